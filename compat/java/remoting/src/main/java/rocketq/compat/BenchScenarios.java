package rocketq.compat;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/** Throughput scenarios for `rocketq bench grpc --java` (rocketq.bench.java_bench), the remoting
 *  counterparts of ../grpc BenchScenarios: DefaultMQProducer sending n messages of `size` bytes one at a
 *  time (window=0) or `window` async sends in flight; DefaultLitePullConsumer polling (`batch` per pull)
 *  until `expect` messages, then commitSync; DefaultMQPushConsumer (the client's defaults). Timings are
 *  System.nanoTime in this JVM; a failed send, or `idleMs` without a new message, fails the scenario. */
final class BenchScenarios {
    static final long RESULT_WAIT_S = 60;
    static final long POLL_TIMEOUT_MS = 500;
    static final long IDLE_MS = 20_000;          // no new message this long: the scenario fails

    private BenchScenarios() {
    }

    static Object run(Args a) throws Exception {
        return switch (a.name) {
            case "bench_send" -> send(a);
            case "bench_lite" -> lite(a);
            case "bench_push" -> push(a);
            default -> throw new IllegalArgumentException("no scenario " + a.name);
        };
    }

    /** msgs/s over `count` messages in `nanos`, and the p50 / p99 of the latencies (ms), in one map. */
    static Map<String, Object> report(int count, long nanos, long[] lat, int latCount) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("messages", count);
        out.put("seconds", nanos / 1e9);
        out.put("msgsPerS", count / (nanos / 1e9));
        if (latCount > 0) {
            long[] sorted = Arrays.copyOf(lat, latCount);
            Arrays.sort(sorted);
            out.put("p50Ms", sorted[latCount / 2] / 1e6);
            out.put("p99Ms", sorted[Math.min(latCount - 1, (int) (latCount * 0.99))] / 1e6);
        }
        return out;
    }

    /** Until `doneAt` is set; fails once `count` has not grown for `idleMs` (a stall, whatever the count). */
    static void awaitProgress(AtomicLong doneAt, AtomicInteger count, long idleMs, int expect)
        throws InterruptedException {
        int seen = -1;
        long last = System.nanoTime();
        while (doneAt.get() == 0) {
            Thread.sleep(Msgs.POLL_MS);
            int now = count.get();
            if (now != seen) {
                seen = now;
                last = System.nanoTime();
            } else if (System.nanoTime() - last > idleMs * 1_000_000) {
                throw new AssertionError("no new message for " + idleMs + " ms after " + now + " of " + expect);
            }
        }
    }

    static Object send(Args a) throws Exception {
        String topic = a.get("topic");
        int n = a.getInt("n", 1000);
        int window = a.getInt("window", 0);
        byte[] body = new byte[a.getInt("size", 1024)];
        Arrays.fill(body, (byte) 'j');
        long[] lat = new long[n];
        DefaultMQProducer p = Clients.producer(a, a.get("group"));
        p.start();
        try {
            check(p.send(new Message(topic, "bench", body)));               // the route and the channel warm
            long t0 = System.nanoTime();
            if (window == 0) {
                for (int i = 0; i < n; i++) {
                    long s = System.nanoTime();
                    check(p.send(new Message(topic, "bench", body)));
                    lat[i] = System.nanoTime() - s;
                }
            } else {
                asyncSends(p, topic, body, n, window, lat);
            }
            return report(n, System.nanoTime() - t0, lat, n);
        } finally {
            p.shutdown();
        }
    }

    private static void check(SendResult r) {
        if (r.getSendStatus() != SendStatus.SEND_OK) {
            throw new AssertionError("send answered " + r.getSendStatus());
        }
    }

    private static void asyncSends(DefaultMQProducer p, String topic, byte[] body, int n, int window, long[] lat)
        throws Exception {
        Semaphore slots = new Semaphore(window);
        CountDownLatch done = new CountDownLatch(n);
        AtomicReference<Throwable> failed = new AtomicReference<>();
        for (int i = 0; i < n && failed.get() == null; i++) {
            slots.acquire();
            int at = i;
            long s = System.nanoTime();
            p.send(new Message(topic, "bench", body), new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    lat[at] = System.nanoTime() - s;
                    slots.release();
                    done.countDown();
                }

                @Override
                public void onException(Throwable e) {
                    failed.compareAndSet(null, e);
                    slots.release();
                    done.countDown();
                }
            });
        }
        if (failed.get() == null && !done.await(RESULT_WAIT_S, TimeUnit.SECONDS)) {
            throw new AssertionError(done.getCount() + " async sends unanswered after " + RESULT_WAIT_S + " s");
        }
        if (failed.get() != null) {
            throw new AssertionError("an async send failed", failed.get());
        }
    }

    /** Poll until `expect` distinct messages, then commitSync; latency = one poll call that returned messages.
     *  Timed from the first poll that returned messages: the consumer's start-up and first rebalance (which
     *  the gRPC SimpleConsumer does not have) are not in the rate. */
    static Object lite(Args a) throws Exception {
        int expect = a.getInt("expect", 1000);
        long idleNanos = a.getLong("idleMs", IDLE_MS) * 1_000_000;
        DefaultLitePullConsumer c = Clients.lite(a, a.get("group"));
        c.setPullBatchSize(a.getInt("batch", 32));
        c.subscribe(a.get("topic"), "*");
        c.start();
        try {
            Set<String> seen = ConcurrentHashMap.newKeySet();
            long[] lat = new long[expect];
            int polls = 0;
            int deliveries = 0;
            long t0 = 0;                        // the start of the first poll that returned messages
            long lastProgress = System.nanoTime();
            while (seen.size() < expect) {
                long s = System.nanoTime();
                List<MessageExt> got = c.poll(POLL_TIMEOUT_MS);
                long now = System.nanoTime();
                if (got.isEmpty()) {
                    if (now - lastProgress > idleNanos) {
                        throw new AssertionError("no message for " + idleNanos / 1_000_000 + " ms after "
                            + seen.size() + " of " + expect);
                    }
                    continue;
                }
                t0 = t0 == 0 ? s : t0;
                lastProgress = now;
                lat[Math.min(polls++, expect - 1)] = now - s;
                deliveries += got.size();
                for (MessageExt m : got) {
                    seen.add(m.getMsgId());
                }
            }
            c.commitSync();
            Map<String, Object> out = report(expect, System.nanoTime() - t0, lat, Math.min(polls, expect));
            out.put("deliveries", deliveries);
            return out;
        } finally {
            c.shutdown();
        }
    }

    /** DefaultMQPushConsumer until `expect` distinct messages were consumed; timed from the first delivery,
     *  so the consumer's start-up and first rebalance are not in the rate. */
    static Object push(Args a) throws Exception {
        int expect = a.getInt("expect", 1000);
        Set<String> ok = ConcurrentHashMap.newKeySet();
        AtomicInteger distinct = new AtomicInteger();
        AtomicInteger deliveries = new AtomicInteger();
        AtomicLong first = new AtomicLong();
        AtomicLong doneAt = new AtomicLong();
        DefaultMQPushConsumer c = Clients.push(a, a.get("group"), false);
        c.subscribe(a.get("topic"), "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            long now = System.nanoTime();
            first.compareAndSet(0, now);
            for (MessageExt m : msgs) {
                deliveries.incrementAndGet();
                if (ok.add(m.getMsgId()) && distinct.incrementAndGet() == expect) {
                    doneAt.compareAndSet(0, System.nanoTime());
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        try {
            awaitProgress(doneAt, distinct, a.getLong("idleMs", IDLE_MS), expect);
        } finally {
            c.shutdown();
        }
        Map<String, Object> out = report(expect - 1, doneAt.get() - first.get(), null, 0);
        out.put("deliveries", deliveries.get());
        return out;
    }
}
