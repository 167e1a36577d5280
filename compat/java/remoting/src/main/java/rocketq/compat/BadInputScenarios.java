package rocketq.compat;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/** What a client does wrong in the field, and what it is told. */
final class BadInputScenarios {
    private BadInputScenarios() {
    }

    /** One message sent to queue `queueId` of broker-a, whatever the route says: the result or the exception. */
    static Object sendToQueue(Args a) throws Exception {
        DefaultMQProducer p = Clients.producer(a, a.get("group"));
        p.setRetryTimesWhenSendFailed(0);
        p.start();
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            Message m = new Message(a.get("topic"), "bad", "to-queue-" + a.get("queueId"), Msgs.body("to-queue", 0));
            MessageQueue mq = new MessageQueue(a.get("topic"), a.get("brokerName", "broker-a"), a.getInt("queueId", 0));
            MiscScenarios.SendResultHolder.sendOnce(p, m, out, mq);
        } finally {
            p.shutdown();
        }
        return out;
    }

    /** A push consumer subscribing with an SQL92 selector: start() is refused by the broker's
     *  CHECK_CLIENT_CONFIG answer (RocketMQ with enablePropertyFilter=false, its default). */
    static Object subscribeSql(Args a) throws Exception {
        DefaultMQPushConsumer c = Clients.push(a, a.get("group"), false);
        c.subscribe(a.get("topic"), MessageSelector.bySql(a.get("sql", "a > 5")));
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            c.start();
            out.put("started", true);
        } catch (MQClientException e) {
            out.put("started", false);
            out.put("message", e.getMessage());
            out.put("cause", String.valueOf(e.getCause()));
        } finally {
            c.shutdown();
        }
        return out;
    }
}
