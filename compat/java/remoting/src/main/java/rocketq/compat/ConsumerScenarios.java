package rocketq.compat;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/** Consumers: push (concurrently, with retries and dead-lettering, orderly with a second instance joining
 *  and leaving, broadcasting) and lite pull (subscribe; assign + seek). Each returns every delivery it saw,
 *  duplicates included, after waiting `settleMs` past the last expected one so that extra deliveries show. */
final class ConsumerScenarios {
    static final long DEFAULT_TIMEOUT_MS = 30_000;
    static final long DEFAULT_SETTLE_MS = 1_000;
    static final long POLL_TIMEOUT_MS = 500;

    private ConsumerScenarios() {
    }

    private static long distinct(Collection<Map<String, Object>> seen) {
        return seen.stream().map(m -> m.get("msgId")).distinct().count();
    }

    /** A concurrent push consumer of `topic` (subscription `expr`) until `expect` distinct messages came. */
    static Object pushConcurrently(Args a) throws Exception {
        ConcurrentLinkedQueue<Map<String, Object>> seen = new ConcurrentLinkedQueue<>();
        DefaultMQPushConsumer c = Clients.push(a, a.get("group"), a.get("trace", "false").equals("true"));
        String sql = a.get("sql", "");
        if (sql.isEmpty()) {
            c.subscribe(a.get("topic"), a.get("expr", "*"));
        } else {
            c.subscribe(a.get("topic"), MessageSelector.bySql(sql));
        }
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(m -> seen.add(Msgs.received(m)));
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        try {
            int expect = a.getInt("expect", 1);
            Msgs.await(() -> distinct(seen) >= expect, a.getLong("timeoutMs", DEFAULT_TIMEOUT_MS),
                expect + " messages (have " + distinct(seen) + ")");
            Thread.sleep(a.getLong("settleMs", DEFAULT_SETTLE_MS));     // duplicates, if any, show up here
        } finally {
            c.shutdown();                                                  // commits the offsets
        }
        return Map.of("received", new ArrayList<>(seen));
    }

    /** A listener that fails: keys in `failAlways` every time (so they end in %DLQ%group after
     *  maxReconsumeTimes), keys in `failOnce` at their first delivery only. */
    static Object pushRetry(Args a) throws Exception {
        Set<String> failAlways = Set.of(a.get("failAlways", "").split(","));
        Set<String> failOnce = Set.of(a.get("failOnce", "").split(","));
        int maxReconsume = a.getInt("maxReconsumeTimes", 2);
        ConcurrentLinkedQueue<Map<String, Object>> seen = new ConcurrentLinkedQueue<>();
        DefaultMQPushConsumer c = Clients.push(a, a.get("group"), false);
        c.setMaxReconsumeTimes(maxReconsume);
        c.subscribe(a.get("topic"), "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            MessageExt m = msgs.get(0);
            seen.add(Msgs.received(m));
            boolean fail = failAlways.contains(m.getKeys())
                || (failOnce.contains(m.getKeys()) && m.getReconsumeTimes() == 0);
            return fail ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        try {
            int expect = a.getInt("expect", 1);
            Msgs.await(() -> {
                for (String key : failAlways) {
                    if (seen.stream().noneMatch(m -> key.equals(m.get("keys"))
                        && (Integer) m.get("reconsumeTimes") == maxReconsume)) {
                        return false;
                    }
                }
                for (String key : failOnce) {
                    if (!key.isEmpty() && seen.stream().noneMatch(m -> key.equals(m.get("keys"))
                        && (Integer) m.get("reconsumeTimes") == 1)) {
                        return false;
                    }
                }
                return distinct(seen) >= expect;
            }, a.getLong("timeoutMs", DEFAULT_TIMEOUT_MS), "the retries (seen " + seen.size() + " deliveries)");
            Thread.sleep(a.getLong("settleMs", DEFAULT_SETTLE_MS));     // the last send-back (to the DLQ) goes out
        } finally {
            c.shutdown();
        }
        return Map.of("received", new ArrayList<>(seen));
    }

    private static DefaultMQPushConsumer orderly(Args a, String name, ConcurrentLinkedQueue<Map<String, Object>> seen) {
        DefaultMQPushConsumer c = Clients.push(a, a.get("group"), false);
        try {
            c.subscribe(a.get("topic"), "*");
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
        c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            long start = System.nanoTime();
            try {
                Thread.sleep(5);                       // long enough for two holders of one queue to overlap
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            for (MessageExt m : msgs) {
                Map<String, Object> one = Msgs.received(m);
                one.put("instance", name);
                one.put("startNs", start);
                one.put("endNs", System.nanoTime());
                seen.add(one);
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        return c;
    }

    /** Orderly consumption while a second instance joins and leaves: A alone reads phase 1; B starts and
     *  messages keep coming until B has consumed some; B shuts down and A reads phase 3. joinNs and leaveNs
     *  (System.nanoTime, the clock of startNs) are when B was started and shut down. */
    static Object pushOrderly(Args a) throws Exception {
        String topic = a.get("topic");
        int phase = a.getInt("phase", 16);
        int orders = a.getInt("orders", 8);
        long timeout = a.getLong("timeoutMs", DEFAULT_TIMEOUT_MS);
        ConcurrentLinkedQueue<Map<String, Object>> seen = new ConcurrentLinkedQueue<>();
        List<Map<String, Object>> sent = new ArrayList<>();
        long joinNs = Long.MAX_VALUE, leaveNs = Long.MAX_VALUE;
        DefaultMQProducer p = Clients.producer(a, a.get("group") + "-producer");
        p.start();
        DefaultMQPushConsumer first = orderly(a, "A", seen);
        DefaultMQPushConsumer second = orderly(a, "B", seen);
        first.start();
        try {
            sent.addAll(ProducerScenarios.sendOrderly(p, topic, "o", 0, phase, orders));
            Msgs.await(() -> distinct(seen) >= sent.size(), timeout, "instance A to read phase 1");
            joinNs = System.nanoTime();
            second.start();
            // B may wait for a lock to lapse: A's periodic lock renewal (lockAll, from a snapshot of its
            // queues) can reach the broker after the unlock A's rebalance sent, so a queue A gave up stays
            // locked until the broker's lease ends (60 s, as in RocketMQ); joinTimeoutMs covers that
            long until = System.currentTimeMillis() + a.getLong("joinTimeoutMs", timeout);
            while (seen.stream().noneMatch(m -> "B".equals(m.get("instance")))) {
                if (System.currentTimeMillis() > until) {
                    throw new AssertionError("instance B never got a queue");
                }
                sent.addAll(ProducerScenarios.sendOrderly(p, topic, "o", sent.size(), orders, orders));
                Thread.sleep(200);
            }
            Msgs.await(() -> distinct(seen) >= sent.size(), timeout, "A and B to read phase 2");
            leaveNs = System.nanoTime();
            second.shutdown();
            sent.addAll(ProducerScenarios.sendOrderly(p, topic, "o", sent.size(), phase, orders));
            Msgs.await(() -> distinct(seen) >= sent.size(), timeout,
                "A to read phase 3 (have " + distinct(seen) + " of " + sent.size() + ")");
            Thread.sleep(a.getLong("settleMs", DEFAULT_SETTLE_MS));
        } finally {
            first.shutdown();
            second.shutdown();
            p.shutdown();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", sent);
        out.put("received", new ArrayList<>(seen));
        out.put("joinNs", joinNs);
        out.put("leaveNs", leaveNs);
        return out;
    }

    /** setMessageModel(BROADCASTING) by reflection: MessageModel moved from org.apache.rocketmq.common.protocol
     *  (4.x) to org.apache.rocketmq.remoting.protocol (5.x), and one source serves both lines. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void broadcasting(DefaultMQPushConsumer c) throws Exception {
        for (java.lang.reflect.Method m : c.getClass().getMethods()) {
            if (m.getName().equals("setMessageModel")) {
                Class<? extends Enum> model = (Class<? extends Enum>) m.getParameterTypes()[0];
                m.invoke(c, Enum.valueOf(model, "BROADCASTING"));
                return;
            }
        }
        throw new AssertionError("no setMessageModel");
    }

    /** Two instances of one group in the broadcasting model each read every message. */
    static Object broadcast(Args a) throws Exception {
        ConcurrentLinkedQueue<Map<String, Object>> seen = new ConcurrentLinkedQueue<>();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        for (String name : List.of("A", "B")) {
            DefaultMQPushConsumer c = Clients.push(a, a.get("group"), false);
            broadcasting(c);
            c.subscribe(a.get("topic"), "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                msgs.forEach(m -> {
                    Map<String, Object> one = Msgs.received(m);
                    one.put("instance", name);
                    seen.add(one);
                });
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumers.add(c);
        }
        try {
            for (DefaultMQPushConsumer c : consumers) {
                c.start();
            }
            int expect = a.getInt("expect", 1);
            Msgs.await(() -> seen.size() >= 2L * expect, a.getLong("timeoutMs", DEFAULT_TIMEOUT_MS),
                "both instances to read " + expect + " messages");
            Thread.sleep(a.getLong("settleMs", DEFAULT_SETTLE_MS));
        } finally {
            consumers.forEach(DefaultMQPushConsumer::shutdown);
        }
        return Map.of("received", new ArrayList<>(seen));
    }

    /** DefaultLitePullConsumer.subscribe, poll until `expect` messages, commitSync, shutdown. */
    static Object liteSubscribe(Args a) throws Exception {
        DefaultLitePullConsumer c = Clients.lite(a, a.get("group"));
        c.subscribe(a.get("topic"), a.get("expr", "*"));
        c.start();
        try {
            return Map.of("received", pollUntil(c, a));
        } finally {
            c.shutdown();
        }
    }

    /** assign one queue, seek to `offset`, poll until `expect` messages, commitSync, shutdown. */
    static Object liteAssignSeek(Args a) throws Exception {
        DefaultLitePullConsumer c = Clients.lite(a, a.get("group"));
        // assign() starts a pull at once, which races with seek() in the client: 4.9.8's replacement task can
        // take the seek before the old task submits what it pulled, and poll() then returns offsets before the
        // seek too (seen in CI). The caller commits the group's offset at the queue's end first, so that pull
        // finds nothing (CONSUME_FROM_LAST_OFFSET alone does not: a new group on a queue still starting at 0
        // is answered 0, by RocketMQ's broker too).
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        c.start();
        try {
            int queueId = a.getInt("queueId", 0);
            MessageQueue mq = c.fetchMessageQueues(a.get("topic")).stream().filter(q -> q.getQueueId() == queueId)
                .findFirst().orElseThrow(() -> new AssertionError("no queue " + queueId + " in the route"));
            c.assign(List.of(mq));
            c.seek(mq, a.getLong("offset", 0));
            return Map.of("received", pollUntil(c, a));
        } finally {
            c.shutdown();
        }
    }

    private static List<Map<String, Object>> pollUntil(DefaultLitePullConsumer c, Args a) throws Exception {
        List<Map<String, Object>> seen = new ArrayList<>();
        Set<String> ids = new HashSet<>();
        int expect = a.getInt("expect", 1);
        long deadline = System.currentTimeMillis() + a.getLong("timeoutMs", DEFAULT_TIMEOUT_MS);
        while (ids.size() < expect) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("polled " + ids.size() + " of " + expect + " messages");
            }
            for (MessageExt m : c.poll(POLL_TIMEOUT_MS)) {
                seen.add(Msgs.received(m));
                ids.add(m.getMsgId());
            }
        }
        long settle = System.currentTimeMillis() + a.getLong("settleMs", 300);
        while (System.currentTimeMillis() < settle) {
            c.poll(POLL_TIMEOUT_MS).forEach(m -> seen.add(Msgs.received(m)));
        }
        c.commitSync();
        return seen;
    }
}
