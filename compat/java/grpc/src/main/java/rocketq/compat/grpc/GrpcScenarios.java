package rocketq.compat.grpc;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.BooleanSupplier;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/** rocketmq-client-java 5.0.x against rocketq's gRPC endpoint: Producer (normal, FIFO, delay, transaction
 *  with a checker), SimpleConsumer (receive, ack, changeInvisibleDuration), PushConsumer (a failing
 *  listener; FIFO order). Each reports what it sent and received; the Python side checks the bytes. */
final class GrpcScenarios {
    static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(5);
    static final Duration AWAIT = Duration.ofSeconds(2);
    static final long POLL_MS = 20;
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private GrpcScenarios() {
    }

    static Object run(Args a) throws Exception {
        return switch (a.name) {
            case "produce" -> produce(a);
            case "transaction" -> transaction(a);
            case "simple" -> simple(a);
            case "push" -> push(a);
            case "bench_send", "bench_simple", "bench_push" -> BenchScenarios.run(a);
            default -> throw new IllegalArgumentException("no scenario " + a.name);
        };
    }

    static ClientConfiguration config(Args a) {
        // ssl=true: the client's default, TLS (trusting any server certificate, as the 5.x client does)
        return ClientConfiguration.newBuilder().setEndpoints(a.get("endpoint"))
            .enableSsl(Boolean.parseBoolean(a.get("ssl", "false")))
            .setRequestTimeout(REQUEST_TIMEOUT).build();
    }

    static byte[] body(String label, int i) {
        byte[] head = (label + "#" + i + " \u00fcber \u6d88\u606f ").getBytes(StandardCharsets.UTF_8);
        byte[] out = new byte[head.length + 256];
        System.arraycopy(head, 0, out, 0, head.length);
        for (int b = 0; b < 256; b++) {
            out[head.length + b] = (byte) (b + i);
        }
        return out;
    }

    static byte[] bytes(ByteBuffer buf) {
        ByteBuffer copy = buf.duplicate();
        byte[] out = new byte[copy.remaining()];
        copy.get(out);
        return out;
    }

    static Map<String, Object> sent(String kind, Message m, SendReceipt r) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("kind", kind);
        out.put("topic", m.getTopic());
        out.put("tags", m.getTag().orElse(null));
        out.put("keys", String.join(" ", m.getKeys()));
        out.put("body", bytes(m.getBody()));
        out.put("messageGroup", m.getMessageGroup().orElse(null));
        out.put("deliveryTimestamp", m.getDeliveryTimestamp().orElse(null));
        out.put("userProps", new TreeMap<>(m.getProperties()));
        out.put("uniqId", r == null ? null : r.getMessageId().toString());
        out.put("sentAt", System.currentTimeMillis());
        return out;
    }

    static Map<String, Object> received(MessageView m) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("msgId", m.getMessageId().toString());
        out.put("topic", m.getTopic());
        out.put("tags", m.getTag().orElse(null));
        out.put("keys", String.join(" ", m.getKeys()));
        out.put("body", bytes(m.getBody()));
        out.put("messageGroup", m.getMessageGroup().orElse(null));
        out.put("deliveryAttempt", m.getDeliveryAttempt());
        out.put("bornTimestamp", m.getBornTimestamp());
        out.put("userProps", new TreeMap<>(m.getProperties()));
        out.put("receivedAt", System.currentTimeMillis());
        return out;
    }

    static void await(BooleanSupplier cond, long timeoutMs, String what) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("timed out after " + timeoutMs + " ms waiting for " + what);
            }
            Thread.sleep(POLL_MS);
        }
    }

    private static MessageBuilder builder(String topic, String tag, String key, byte[] body) {
        return PROVIDER.newMessageBuilder().setTopic(topic).setTag(tag).setKeys(key).setBody(body)
            .addProperty("u.client", "java-grpc");
    }

    /** n normal messages to `topic`, n FIFO messages in message group "g1" to `fifoTopic`, n delayed by
     *  `delayMs` to `delayTopic`, sync sends; and n more normal ones async. */
    static Object produce(Args a) throws Exception {
        int n = a.getInt("n", 2);
        long delayMs = a.getLong("delayMs", 1500);
        List<Map<String, Object>> out = Collections.synchronizedList(new ArrayList<>());
        try (Producer p = PROVIDER.newProducerBuilder().setClientConfiguration(config(a)).build()) {
            for (int i = 0; i < n; i++) {
                Message m = builder(a.get("topic"), "TagA", "grpc-key-" + i, body("grpc", i)).build();
                out.add(sent("normal", m, p.send(m)));
            }
            for (int i = 0; i < n; i++) {
                Message m = builder(a.get("fifoTopic"), "TagF", "grpc-fifo-" + i, body("grpc-fifo", i))
                    .setMessageGroup("g1").build();
                out.add(sent("fifo", m, p.send(m)));
            }
            for (int i = 0; i < n; i++) {
                Message m = builder(a.get("delayTopic"), "TagD", "grpc-delay-" + i, body("grpc-delay", i))
                    .setDeliveryTimestamp(System.currentTimeMillis() + delayMs).build();
                out.add(sent("delay", m, p.send(m)));
            }
            List<java.util.concurrent.CompletableFuture<SendReceipt>> futures = new ArrayList<>();
            List<Message> asyncMsgs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                Message m = builder(a.get("topic"), "TagB", "grpc-async-" + i, body("grpc-async", i)).build();
                asyncMsgs.add(m);
                futures.add(p.sendAsync(m));
            }
            for (int i = 0; i < n; i++) {
                out.add(sent("async", asyncMsgs.get(i), futures.get(i).get()));
            }
        }
        return Map.of("sent", out);
    }

    /** "commit" committed, "rollback" rolled back, "unknown" left open until the checker commits it. */
    static Object transaction(Args a) throws Exception {
        Map<String, Object> checks = new ConcurrentHashMap<>();
        List<Map<String, Object>> out = new ArrayList<>();
        try (Producer p = PROVIDER.newProducerBuilder().setClientConfiguration(config(a)).setTopics(a.get("topic"))
            .setTransactionChecker(view -> {
                checks.putIfAbsent(String.join(" ", view.getKeys()), received(view));
                return TransactionResolution.COMMIT;
            }).build()) {
            int i = 0;
            for (String outcome : List.of("commit", "rollback", "unknown")) {
                Transaction tx = p.beginTransaction();
                Message m = builder(a.get("topic"), "tx", outcome, body("grpc-tx-" + outcome, i++)).build();
                out.add(sent("transaction", m, p.send(m, tx)));
                if (outcome.equals("commit")) {
                    tx.commit();
                } else if (outcome.equals("rollback")) {
                    tx.rollback();
                }
            }
            await(() -> checks.containsKey("unknown"), a.getLong("checkTimeoutMs", 20_000),
                "the check of the open transaction");
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("sent", out);
        result.put("checks", checks);
        return result;
    }

    /** SimpleConsumer: receive until `expect` distinct messages are acked. The message with key
     *  `extendKey` is not acked at first: its invisible duration is changed to 1 s, so it comes back (delivery
     *  attempt 2) and is acked then. */
    static Object simple(Args a) throws Exception {
        List<Map<String, Object>> seen = new ArrayList<>();
        Map<String, Boolean> acked = new LinkedHashMap<>();
        String extendKey = a.get("extendKey", "");
        int expect = a.getInt("expect", 1);
        long deadline = System.currentTimeMillis() + a.getLong("timeoutMs", 30_000);
        try (SimpleConsumer c = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config(a))
            .setConsumerGroup(a.get("group")).setAwaitDuration(AWAIT)
            .setSubscriptionExpressions(Map.of(a.get("topic"), new FilterExpression("*", FilterExpressionType.TAG)))
            .build()) {
            while (acked.size() < expect) {
                if (System.currentTimeMillis() > deadline) {
                    throw new AssertionError("acked " + acked.size() + " of " + expect);
                }
                for (MessageView m : c.receive(16, Duration.ofSeconds(a.getLong("invisibleS", 10)))) {
                    seen.add(received(m));
                    if (String.join(" ", m.getKeys()).equals(extendKey) && m.getDeliveryAttempt() == 1) {
                        c.changeInvisibleDuration(m, Duration.ofSeconds(1));
                    } else {
                        c.ack(m);
                        acked.put(m.getMessageId().toString(), true);
                    }
                }
            }
        }
        return Map.of("received", seen);
    }

    /** PushConsumer: the listener fails the first delivery of `failKey`; runs until `expect` distinct messages
     *  succeeded. Deliveries are recorded in the order the listener saw them (FIFO order for a FIFO group). */
    static Object push(Args a) throws Exception {
        ConcurrentLinkedQueue<Map<String, Object>> seen = new ConcurrentLinkedQueue<>();
        Map<String, Boolean> ok = new ConcurrentHashMap<>();
        String failKey = a.get("failKey", "");
        long start = System.currentTimeMillis();
        long[] consumedAt = {0};
        try (PushConsumer c = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config(a))
            .setConsumerGroup(a.get("group"))
            .setSubscriptionExpressions(Map.of(a.get("topic"), new FilterExpression("*", FilterExpressionType.TAG)))
            .setMessageListener(m -> {
                seen.add(received(m));
                if (String.join(" ", m.getKeys()).equals(failKey) && m.getDeliveryAttempt() == 1) {
                    return ConsumeResult.FAILURE;
                }
                ok.put(m.getMessageId().toString(), true);
                return ConsumeResult.SUCCESS;
            }).build()) {
            int expect = a.getInt("expect", 1);
            await(() -> ok.size() >= expect, a.getLong("timeoutMs", 30_000), expect + " messages consumed");
            consumedAt[0] = System.currentTimeMillis() - start;
            Thread.sleep(a.getLong("settleMs", 500));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("received", new ArrayList<>(seen));
        out.put("consumedMs", consumedAt[0]);
        out.put("closedMs", System.currentTimeMillis() - start);
        return out;
    }
}
