package rocketq.compat;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;

/** Message trace on producer and consumer; ACL credentials right and wrong. */
final class MiscScenarios {
    private MiscScenarios() {
    }

    /** A producer and a push consumer with enableMsgTrace: their trace records go to RMQ_SYS_TRACE_TOPIC when
     *  they shut down at the latest (the Python side reads that topic). */
    static Object trace(Args a) throws Exception {
        String topic = a.get("topic");
        int n = a.getInt("n", 2);
        DefaultMQProducer p = Clients.producer(a, a.get("group") + "-producer", null, true);
        ConcurrentLinkedQueue<Map<String, Object>> seen = new ConcurrentLinkedQueue<>();
        DefaultMQPushConsumer c = Clients.push(a, a.get("group"), true);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(m -> seen.add(Msgs.received(m)));
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        List<Map<String, Object>> sent = new ArrayList<>();
        // both clients up at once, as in an application: 5.x clients of one JVM share the trace producer's
        // client instance (named after the NameServer), which the first to shut down closes
        p.start();
        try {
            for (int i = 0; i < n; i++) {
                Message m = new Message(topic, "traced", "trace-key-" + i, Msgs.body("trace", i));
                sent.add(Msgs.sent("sync", m, p.send(m)));
            }
            c.start();
            Msgs.await(() -> seen.size() >= n, a.getLong("timeoutMs", 30_000), n + " traced messages");
            Thread.sleep(a.getLong("traceFlushMs", 500));   // the consume trace (SubAfter) is queued after the listener
        } finally {
            c.shutdown();
            p.shutdown();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", sent);
        out.put("received", new ArrayList<>(seen));
        return out;
    }

    /** With ak/sk: n sends and a consumer reading them back. Then one send signed with `badSk`, which the
     *  broker must refuse: its exception (class, response code, message) is reported. */
    static Object acl(Args a) throws Exception {
        String topic = a.get("topic");
        int n = a.getInt("n", 2);
        DefaultMQProducer p = Clients.producer(a, a.get("group"));
        p.start();
        List<Map<String, Object>> sent = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                Message m = new Message(topic, "acl", "acl-key-" + i, Msgs.body("acl", i));
                sent.add(Msgs.sent("sync", m, p.send(m)));
            }
        } finally {
            p.shutdown();
        }
        Object consumed = ConsumerScenarios.pushConcurrently(a);
        DefaultMQProducer bad = Clients.producer(a, a.get("group") + "-bad",
            new AclClientRPCHook(new SessionCredentials(a.get("ak"), a.get("badSk"))), false);
        bad.setRetryTimesWhenSendFailed(0);
        bad.start();
        Map<String, Object> refused = new LinkedHashMap<>();
        try {
            SendResultHolder.sendOnce(bad, new Message(topic, "acl", "acl-bad", Msgs.body("acl-bad", 0)), refused);
        } finally {
            bad.shutdown();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", sent);
        out.put("received", ((Map<?, ?>) consumed).get("received"));
        out.put("refused", refused);
        return out;
    }

    /** One send whose failure is the expected outcome: what the client threw, or the result if it did not. */
    static final class SendResultHolder {
        private SendResultHolder() {
        }

        static void sendOnce(DefaultMQProducer p, Message m, Map<String, Object> out) throws Exception {
            sendOnce(p, m, out, null);
        }

        static void sendOnce(DefaultMQProducer p, Message m, Map<String, Object> out,
                             org.apache.rocketmq.common.message.MessageQueue mq) throws Exception {
            try {
                out.put("result", Msgs.sent("sync", m, mq == null ? p.send(m) : p.send(m, mq)));
            } catch (MQBrokerException e) {
                out.put("exception", e.getClass().getSimpleName());
                out.put("responseCode", e.getResponseCode());
                out.put("message", e.getErrorMessage());
            } catch (MQClientException e) {
                out.put("exception", e.getClass().getSimpleName());
                out.put("responseCode", e.getResponseCode());
                out.put("message", e.getErrorMessage());
                out.put("cause", String.valueOf(e.getCause()));
            }
        }
    }
}
