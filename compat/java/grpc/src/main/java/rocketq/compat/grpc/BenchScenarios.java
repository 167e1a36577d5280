package rocketq.compat.grpc;

import java.time.Duration;
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
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/** Throughput scenarios for `rocketq bench grpc --java` (rocketq.bench.java_bench): the 5.x gRPC client
 *  sending n messages of `size` bytes one at a time (window=0) or `window` sendAsync calls in flight, a
 *  SimpleConsumer receiving `batch` at a time on `threads` threads and acking each message (ackAsync,
 *  `window` in flight), and a PushConsumer. Every timing is System.nanoTime in this JVM; a scenario
 *  fails when a send or an ack fails, or when no new message comes for `idleMs`. */
final class BenchScenarios {
    static final long RESULT_WAIT_S = 60;
    static final Duration INVISIBLE = Duration.ofSeconds(60);       // longer than any run: no redelivery
    static final Duration AWAIT = Duration.ofMillis(500);           // a receive on an empty queue returns soon
    static final long IDLE_MS = 20_000;                             // no new message this long: the scenario fails
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private BenchScenarios() {
    }

    static Object run(Args a) throws Exception {
        return switch (a.name) {
            case "bench_send" -> send(a);
            case "bench_simple" -> simple(a);
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
            Thread.sleep(GrpcScenarios.POLL_MS);
            int now = count.get();
            if (now != seen) {
                seen = now;
                last = System.nanoTime();
            } else if (System.nanoTime() - last > idleMs * 1_000_000) {
                throw new AssertionError("no new message for " + idleMs + " ms after " + now + " of " + expect);
            }
        }
    }

    private static Message message(String topic, byte[] body) {
        return PROVIDER.newMessageBuilder().setTopic(topic).setTag("bench").setBody(body).build();
    }

    static Object send(Args a) throws Exception {
        String topic = a.get("topic");
        int n = a.getInt("n", 1000);
        int window = a.getInt("window", 0);
        byte[] body = new byte[a.getInt("size", 1024)];
        Arrays.fill(body, (byte) 'j');
        long[] lat = new long[n];
        try (Producer p = PROVIDER.newProducerBuilder().setClientConfiguration(GrpcScenarios.config(a))
            .setTopics(topic).build()) {
            p.send(message(topic, body));                                  // the route and the channel warm
            long t0 = System.nanoTime();
            if (window == 0) {
                for (int i = 0; i < n; i++) {
                    long s = System.nanoTime();
                    p.send(message(topic, body));
                    lat[i] = System.nanoTime() - s;
                }
            } else {
                Semaphore slots = new Semaphore(window);
                CountDownLatch done = new CountDownLatch(n);
                AtomicReference<Throwable> failed = new AtomicReference<>();
                for (int i = 0; i < n && failed.get() == null; i++) {
                    slots.acquire();
                    int at = i;
                    long s = System.nanoTime();
                    p.sendAsync(message(topic, body)).whenComplete((r, e) -> {
                        lat[at] = System.nanoTime() - s;
                        if (e != null) {
                            failed.compareAndSet(null, e);
                        }
                        slots.release();
                        done.countDown();
                    });
                }
                if (failed.get() == null && !done.await(RESULT_WAIT_S, TimeUnit.SECONDS)) {
                    throw new AssertionError(done.getCount() + " async sends unanswered after " + RESULT_WAIT_S + " s");
                }
                if (failed.get() != null) {
                    throw new AssertionError("an async send failed", failed.get());
                }
            }
            return report(n, System.nanoTime() - t0, lat, n);
        }
    }

    /** Receive and ack until `expect` distinct messages are acked; latency = one message's ack round trip. */
    static Object simple(Args a) throws Exception {
        int expect = a.getInt("expect", 1000);
        int batch = a.getInt("batch", 32);
        int threads = a.getInt("threads", 4);
        long idleNanos = a.getLong("idleMs", IDLE_MS) * 1_000_000;
        Semaphore ackSlots = new Semaphore(a.getInt("window", 256));
        Set<String> acked = ConcurrentHashMap.newKeySet();
        long[] lat = new long[expect + threads * batch];
        AtomicInteger latCount = new AtomicInteger();
        AtomicInteger distinct = new AtomicInteger();
        AtomicLong lastProgress = new AtomicLong(System.nanoTime());
        AtomicLong doneAt = new AtomicLong();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        try (SimpleConsumer c = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(GrpcScenarios.config(a))
            .setConsumerGroup(a.get("group")).setAwaitDuration(AWAIT)
            .setSubscriptionExpressions(Map.of(a.get("topic"), new FilterExpression("*", FilterExpressionType.TAG)))
            .build()) {
            long t0 = System.nanoTime();
            Runnable worker = () -> {
                try {
                    while (doneAt.get() == 0 && failed.get() == null) {
                        if (System.nanoTime() - lastProgress.get() > idleNanos) {
                            throw new AssertionError("no message for " + idleNanos / 1_000_000 + " ms after "
                                + acked.size() + " of " + expect);
                        }
                        List<MessageView> got = c.receive(batch, INVISIBLE);
                        for (MessageView m : got) {
                            ackSlots.acquire();
                            long s = System.nanoTime();
                            c.ackAsync(m).whenComplete((r, e) -> {
                                ackSlots.release();
                                if (e != null) {
                                    failed.compareAndSet(null, e);
                                    return;
                                }
                                long now = System.nanoTime();
                                int at = latCount.getAndIncrement();
                                if (at < lat.length) {
                                    lat[at] = now - s;
                                }
                                lastProgress.set(now);
                                if (acked.add(m.getMessageId().toString()) && distinct.incrementAndGet() == expect) {
                                    doneAt.compareAndSet(0, now);
                                }
                            });
                        }
                    }
                } catch (Throwable e) {
                    failed.compareAndSet(null, e);
                }
            };
            Thread[] pool = new Thread[threads];
            for (int i = 0; i < threads; i++) {
                pool[i] = new Thread(worker, "bench-receive-" + i);
                pool[i].start();
            }
            for (Thread t : pool) {
                t.join();
            }
            if (failed.get() != null) {
                throw new AssertionError("receive + ack failed after " + acked.size() + " of " + expect, failed.get());
            }
            Map<String, Object> out = report(expect, doneAt.get() - t0, lat, Math.min(latCount.get(), lat.length));
            out.put("deliveries", latCount.get());
            return out;
        }
    }

    /** A PushConsumer (the client's defaults: 20 consumption threads) until `expect` distinct messages
     *  succeeded; timed from the first delivery, so the consumer's start-up is not in the rate. */
    static Object push(Args a) throws Exception {
        int expect = a.getInt("expect", 1000);
        Set<String> ok = ConcurrentHashMap.newKeySet();
        AtomicLong first = new AtomicLong();
        AtomicLong doneAt = new AtomicLong();
        AtomicInteger deliveries = new AtomicInteger();
        AtomicInteger distinct = new AtomicInteger();
        try (PushConsumer c = PROVIDER.newPushConsumerBuilder().setClientConfiguration(GrpcScenarios.config(a))
            .setConsumerGroup(a.get("group"))
            .setSubscriptionExpressions(Map.of(a.get("topic"), new FilterExpression("*", FilterExpressionType.TAG)))
            .setMessageListener(m -> {
                long now = System.nanoTime();
                first.compareAndSet(0, now);
                deliveries.incrementAndGet();
                if (ok.add(m.getMessageId().toString()) && distinct.incrementAndGet() == expect) {
                    doneAt.compareAndSet(0, System.nanoTime());
                }
                return ConsumeResult.SUCCESS;
            }).build()) {
            awaitProgress(doneAt, distinct, a.getLong("idleMs", IDLE_MS), expect);
        }
        Map<String, Object> out = report(expect - 1, doneAt.get() - first.get(), null, 0);
        out.put("deliveries", deliveries.get());
        return out;
    }
}
