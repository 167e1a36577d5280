package rocketq.compat;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/** Sends: every mode of DefaultMQProducer, orderly sends by selector, delay levels, transactions. Each
 *  returns what it sent (bodies, keys, tags, the send results); the Python side reads the topic back. */
final class ProducerScenarios {
    static final long ASYNC_WAIT_MS = 10_000;

    private ProducerScenarios() {
    }

    /** The first sync message's body passes the 4 KiB from which the producer deflates it (sysFlag COMPRESSED). */
    private static Message message(String topic, String mode, int i) {
        byte[] body = mode.equals("sync") && i == 0 ? Msgs.bigBody(mode, i) : Msgs.body(mode, i);
        Message m = new Message(topic, i % 2 == 0 ? "TagA" : "TagB", mode + "-key-" + i, body);
        m.putUserProperty("u.mode", mode);
        m.putUserProperty("u.seq", Integer.toString(i));
        return m;
    }

    /** sync, async, oneway and batch sends of n messages each, alternating tags TagA / TagB. */
    static Object sendAllModes(Args a) throws Exception {
        String topic = a.get("topic");
        int n = a.getInt("n", 3);
        DefaultMQProducer p = Clients.producer(a, a.get("group"));
        p.start();
        List<Map<String, Object>> sent = Collections.synchronizedList(new ArrayList<>());
        try {
            for (int i = 0; i < n; i++) {
                Message m = message(topic, "sync", i);
                sent.add(Msgs.sent("sync", m, p.send(m)));
            }
            CountDownLatch done = new CountDownLatch(n);
            List<String> errors = Collections.synchronizedList(new ArrayList<>());
            for (int i = 0; i < n; i++) {
                Message m = message(topic, "async", i);
                p.send(m, new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        sent.add(Msgs.sent("async", m, r));
                        done.countDown();
                    }

                    @Override
                    public void onException(Throwable e) {
                        errors.add(String.valueOf(e));
                        done.countDown();
                    }
                });
            }
            if (!done.await(ASYNC_WAIT_MS, TimeUnit.MILLISECONDS) || !errors.isEmpty()) {
                throw new AssertionError("async sends: " + done.getCount() + " unanswered, errors " + errors);
            }
            for (int i = 0; i < n; i++) {
                Message m = message(topic, "oneway", i);
                p.sendOneway(m);
                sent.add(Msgs.sent("oneway", m, null));
            }
            List<Message> batch = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                batch.add(message(topic, "batch", i));
            }
            SendResult r = p.send(batch);
            for (Message m : batch) {
                Map<String, Object> one = Msgs.sent("batch", m, null);
                one.put("status", r.getSendStatus().name());
                one.put("batchMsgId", r.getMsgId());
                one.put("queueId", r.getMessageQueue().getQueueId());
                one.put("queueOffset", r.getQueueOffset());
                sent.add(one);
            }
        } finally {
            p.shutdown();
        }
        return Map.of("sent", sent);
    }

    /** n sync sends of bodies over 4 KiB from a producer set to the codec `compressType` (LZ4, ZSTD or ZLIB:
     *  RocketMQ 5's CompressionType, named in sysFlag bits 8-10); {"unsupported": true} from a client line
     *  without it (4.x deflates with zlib only). Reflection: the same sources compile against both lines. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static Object sendCompressed(Args a) throws Exception {
        String codec = a.get("compressType");
        DefaultMQProducer p = Clients.producer(a, a.get("group"));
        try {
            Class type = Class.forName("org.apache.rocketmq.common.compression.CompressionType");
            DefaultMQProducer.class.getMethod("setCompressType", type).invoke(p, Enum.valueOf(type, codec));
        } catch (ClassNotFoundException | NoSuchMethodException e) {
            return Map.of("unsupported", true);
        }
        p.start();
        List<Map<String, Object>> sent = new ArrayList<>();
        try {
            for (int i = 0; i < a.getInt("n", 2); i++) {
                Message m = new Message(a.get("topic"), "TagA", codec + "-key-" + i, Msgs.bigBody(codec, i));
                sent.add(Msgs.sent("sync", m, p.send(m)));
            }
        } finally {
            p.shutdown();
        }
        return Map.of("sent", sent);
    }

    /** n messages over `orders` order ids; the selector puts order k on queue k % queues, in send order. */
    static Object sendOrderly(Args a) throws Exception {
        DefaultMQProducer p = Clients.producer(a, a.get("group"));
        p.start();
        try {
            return Map.of("sent", sendOrderly(p, a.get("topic"), a.get("label", "order"), a.getInt("first", 0),
                a.getInt("n", 16), a.getInt("orders", 8)));
        } finally {
            p.shutdown();
        }
    }

    static List<Map<String, Object>> sendOrderly(DefaultMQProducer p, String topic, String label, int first, int n,
                                                 int orders) throws Exception {
        List<Map<String, Object>> sent = new ArrayList<>();
        for (int i = first; i < first + n; i++) {
            int order = i % orders;
            Message m = new Message(topic, "order" + order, label + "-" + i, Msgs.body(label, i));
            SendResult r = p.send(m, (List<MessageQueue> mqs, Message msg, Object arg) ->
                mqs.get((Integer) arg % mqs.size()), order);
            Map<String, Object> one = Msgs.sent("orderly", m, r);
            one.put("order", order);
            sent.add(one);
        }
        return sent;
    }

    /** n messages with delay level `level`. */
    static Object sendDelay(Args a) throws Exception {
        DefaultMQProducer p = Clients.producer(a, a.get("group"));
        p.start();
        List<Map<String, Object>> sent = new ArrayList<>();
        try {
            for (int i = 0; i < a.getInt("n", 2); i++) {
                Message m = message(a.get("topic"), "delay", i);
                m.setDelayTimeLevel(a.getInt("level", 2));
                Map<String, Object> one = Msgs.sent("delay", m, p.send(m));
                one.put("sentAt", System.currentTimeMillis());
                sent.add(one);
            }
        } finally {
            p.shutdown();
        }
        return Map.of("sent", sent);
    }

    /** Three half messages: "commit" is committed, "rollback" rolled back, "unknown" left UNKNOW until the
     *  broker's check-back, which the checker answers COMMIT. Waits for that check. */
    static Object transaction(Args a) throws Exception {
        TransactionMQProducer p = Clients.txProducer(a, a.get("group"));
        Map<String, Object> checks = new ConcurrentHashMap<>();
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return switch (msg.getKeys()) {
                    case "commit" -> LocalTransactionState.COMMIT_MESSAGE;
                    case "rollback" -> LocalTransactionState.ROLLBACK_MESSAGE;
                    default -> LocalTransactionState.UNKNOW;
                };
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                Map<String, Object> seen = Msgs.received(msg);
                seen.put("transactionId", msg.getTransactionId());
                checks.putIfAbsent(msg.getKeys(), seen);
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        p.start();
        List<Map<String, Object>> sent = new ArrayList<>();
        try {
            int i = 0;
            for (String outcome : List.of("commit", "rollback", "unknown")) {
                Message m = new Message(a.get("topic"), "tx", outcome, Msgs.body("tx-" + outcome, i++));
                TransactionSendResult r = p.sendMessageInTransaction(m, null);
                Map<String, Object> one = Msgs.sent("transaction", m, r);
                one.put("localState", r.getLocalTransactionState().name());
                one.put("transactionId", r.getTransactionId());
                sent.add(one);
            }
            Msgs.await(() -> checks.containsKey("unknown"), a.getLong("checkTimeoutMs", 20_000),
                "the broker's check-back of the UNKNOW transaction");
        } finally {
            p.shutdown();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", sent);
        out.put("checks", checks);
        return out;
    }
}
