package rocketq.bench;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;

/**
 * The load tool `rocketq bench compare` drives Apache RocketMQ and rocketq with (both over remoting, the same
 * rocketmq-client 5.3.3 jars the broker ships with). Apache RocketMQ's own benchmark tools
 * (org.apache.rocketmq.example.benchmark Producer / BatchProducer / Consumer) are not published to Maven Central,
 * so this tool takes their flags and does what they do:
 *
 *   producer  -n NAMESRV -t TOPIC -w THREADS(64) -s SIZE(128) -k KEYS(false): THREADS threads, each sending one
 *             message at a time with DefaultMQProducer.send (sync), as producer.sh does;
 *   batch     the same plus -b BATCH(16): each thread sends a list of BATCH messages per call (BatchProducer);
 *   consumer  -n -t -w THREADS(20) -g GROUP: a DefaultMQPushConsumer with THREADS consume threads and one message
 *             per listener call (Consumer), reading the topic from its first offset.
 *
 * Where it differs, so that a run is bounded and its figures comparable: the producers stop after -d SECONDS
 * (the RocketMQ tools run until killed) and count only sends started after -W WARMUP seconds; latencies are
 * System.nanoTime per call with percentiles (the RocketMQ tools print average and max milliseconds only); the
 * consumer stops after -x EXPECT messages, -i IDLE seconds without one, or -S seconds without a first one.
 * It prints one summary line:
 *   [Complete] key: value key: value ...
 */
public final class RmqBenchmark {
    static final long WARM_TIMEOUT_MS = 60_000;

    private RmqBenchmark() {
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            throw new IllegalArgumentException("usage: RmqBenchmark producer|batch|consumer -n NAMESRV -t TOPIC ...");
        }
        Map<String, String> opts = parse(Arrays.copyOfRange(argv, 1, argv.length));
        try {
            switch (argv[0]) {
                case "producer":
                    produce(opts, 0);
                    break;
                case "batch":
                    produce(opts, Integer.parseInt(opts.getOrDefault("b", "16")));
                    break;
                case "consumer":
                    consume(opts);
                    break;
                default:
                    throw new IllegalArgumentException("unknown mode " + argv[0]);
            }
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);          // the client's non-daemon threads would keep the JVM alive
        }
        System.exit(0);
    }

    static Map<String, String> parse(String[] args) {
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("-")) {
                throw new IllegalArgumentException("expected a flag at " + args[i]);
            }
            out.put(args[i].substring(1), args[i + 1]);
        }
        return out;
    }

    /** Latencies in microseconds, one growable array per thread (no sharing on the hot path). */
    static final class Lat {
        long[] us = new long[1 << 16];
        int n;

        void add(long v) {
            if (n == us.length) {
                us = Arrays.copyOf(us, n * 2);
            }
            us[n++] = v;
        }
    }

    static void produce(Map<String, String> o, int batch) throws Exception {
        String topic = o.get("t");
        int threads = Integer.parseInt(o.getOrDefault("w", "64"));
        int size = Integer.parseInt(o.getOrDefault("s", "128"));
        boolean keys = Boolean.parseBoolean(o.getOrDefault("k", "false"));
        double seconds = Double.parseDouble(o.getOrDefault("d", "20"));
        double warmup = Double.parseDouble(o.getOrDefault("W", "3"));
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'm');
        DefaultMQProducer producer = new DefaultMQProducer(batch > 0 ? "benchmark_batch_producer" : "benchmark_producer");
        producer.setNamesrvAddr(o.get("n"));
        producer.setInstanceName(Long.toString(System.nanoTime()));
        producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        producer.start();
        warm(producer, new Message(topic, body));            // route and connection before the clock starts
        long start = System.nanoTime();
        long measureFrom = start + (long) (warmup * 1e9);
        long end = measureFrom + (long) (seconds * 1e9);
        LongAdder total = new LongAdder();
        LongAdder failed = new LongAdder();
        LongAdder measured = new LongAdder();
        Lat[] lats = new Lat[threads];
        CountDownLatch done = new CountDownLatch(threads);
        for (int i = 0; i < threads; i++) {
            Lat lat = lats[i] = new Lat();
            Thread t = new Thread(() -> {
                try {
                    while (true) {
                        long t0 = System.nanoTime();
                        if (t0 >= end) {
                            break;
                        }
                        List<Message> msgs = new ArrayList<>(Math.max(1, batch));
                        for (int j = 0; j < Math.max(1, batch); j++) {
                            Message m = new Message(topic, body);
                            if (keys) {
                                m.setKeys(Long.toString(System.currentTimeMillis() / 1000));
                            }
                            msgs.add(m);
                        }
                        try {
                            SendResult r = batch > 0 ? producer.send(msgs) : producer.send(msgs.get(0));
                            long t1 = System.nanoTime();
                            if (r.getSendStatus() != SendStatus.SEND_OK) {
                                failed.add(msgs.size());
                                continue;
                            }
                            total.add(msgs.size());
                            if (t0 >= measureFrom && t1 <= end) {
                                measured.add(msgs.size());
                                lat.add((t1 - t0) / 1000);
                            }
                        } catch (Exception e) {
                            failed.add(msgs.size());
                        }
                    }
                } finally {
                    done.countDown();
                }
            }, "bench-send-" + i);
            t.start();
        }
        done.await();
        producer.shutdown();
        long[] all = merge(lats);
        System.out.printf("[Complete] Mode: %s Threads: %d Size: %d Batch: %d Keys: %s Send Total: %d "
                + "Measured: %d Seconds: %.3f Send TPS: %.1f Average RT(ms): %.3f p50 RT(ms): %.3f "
                + "p99 RT(ms): %.3f Max RT(ms): %.3f Send Failed: %d%n",
            batch > 0 ? "batch" : "producer", threads, size, Math.max(1, batch), keys, total.sum(), measured.sum(),
            seconds, measured.sum() / seconds, avg(all) / 1000.0, pct(all, 0.5) / 1000.0, pct(all, 0.99) / 1000.0,
            all.length == 0 ? 0.0 : all[all.length - 1] / 1000.0, failed.sum());
    }

    /** One send that succeeds, retried for up to WARM_TIMEOUT_MS (a cold JVM on a busy machine can miss the
     * client's 3 s send timeout). */
    static void warm(DefaultMQProducer producer, Message msg) throws Exception {
        long deadline = System.currentTimeMillis() + WARM_TIMEOUT_MS;
        while (true) {
            try {
                producer.send(msg);
                return;
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                TimeUnit.MILLISECONDS.sleep(200);
            }
        }
    }

    static void consume(Map<String, String> o) throws Exception {
        String topic = o.get("t");
        int threads = Integer.parseInt(o.getOrDefault("w", "20"));
        long expect = Long.parseLong(o.getOrDefault("x", "0"));
        double idle = Double.parseDouble(o.getOrDefault("i", "5"));
        double timeout = Double.parseDouble(o.getOrDefault("T", "600"));
        // the idle clock starts at the first delivery: before it the client is still starting, fetching the
        // route, registering and rebalancing, which took over 5 s in some runs (against both brokers alike)
        double firstWait = Double.parseDouble(o.getOrDefault("S", "60"));
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong();
        LongAdder got = new LongAdder();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(o.getOrDefault("g", "benchmark_consumer"));
        consumer.setNamesrvAddr(o.get("n"));
        consumer.setInstanceName(Long.toString(System.nanoTime()));
        consumer.setConsumeThreadMin(threads);
        consumer.setConsumeThreadMax(threads);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            first.compareAndSet(0, now);
            got.add(msgs.size());
            last.set(now);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long started = System.nanoTime();
        consumer.start();
        while (true) {
            TimeUnit.MILLISECONDS.sleep(50);
            long now = System.nanoTime();
            boolean idleOut = last.get() == 0 ? now - started > firstWait * 1e9 : now - last.get() > idle * 1e9;
            if ((expect > 0 && got.sum() >= expect) || idleOut || now - started > timeout * 1e9) {
                break;
            }
        }
        consumer.shutdown();
        double secs = first.get() == 0 ? 0 : (last.get() - first.get()) / 1e9;
        System.out.printf("[Complete] Mode: consumer Threads: %d Consume Total: %d Expected: %d Seconds: %.3f "
            + "Consume TPS: %.1f%n", threads, got.sum(), expect, secs, secs > 0 ? got.sum() / secs : 0.0);
    }

    static long[] merge(Lat[] lats) {
        int n = 0;
        for (Lat l : lats) {
            n += l.n;
        }
        long[] all = new long[n];
        int at = 0;
        for (Lat l : lats) {
            System.arraycopy(l.us, 0, all, at, l.n);
            at += l.n;
        }
        Arrays.sort(all);
        return all;
    }

    static double avg(long[] v) {
        double s = 0;
        for (long x : v) {
            s += x;
        }
        return v.length == 0 ? 0 : s / v.length;
    }

    static double pct(long[] sorted, double q) {
        return sorted.length == 0 ? 0 : sorted[Math.min(sorted.length - 1, (int) (sorted.length * q))];
    }
}
