package rocketq.compat;

import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.remoting.RPCHook;

/** Producers and consumers set up the same way in every scenario: the request's NameServer, a client
 *  instance of their own (two clients of one JVM must not share an MQClientInstance, which is keyed by
 *  instance name and would keep the first NameServer it saw), short timeouts, and ACL credentials when
 *  the request names them (ak=..., sk=...). */
final class Clients {
    static final int SEND_TIMEOUT_MS = 5_000;
    private static final AtomicInteger SEQ = new AtomicInteger();

    private Clients() {
    }

    static String instance(String tag) {
        return "compat-" + tag + "-" + SEQ.incrementAndGet();
    }

    static RPCHook hook(Args a) {
        String ak = a.get("ak", null);
        return ak == null ? null : new AclClientRPCHook(new SessionCredentials(ak, a.get("sk")));
    }

    static DefaultMQProducer producer(Args a, String group) {
        return producer(a, group, hook(a), false);
    }

    static DefaultMQProducer producer(Args a, String group, RPCHook hook, boolean trace) {
        DefaultMQProducer p = new DefaultMQProducer(group, hook, trace, null);     // null: the default trace topic
        configure(p, a);
        return p;
    }

    static TransactionMQProducer txProducer(Args a, String group) {
        TransactionMQProducer p = new TransactionMQProducer(group, hook(a));
        configure(p, a);
        return p;
    }

    private static void configure(DefaultMQProducer p, Args a) {
        p.setNamesrvAddr(a.get("namesrv"));
        p.setInstanceName(instance("p"));
        p.setSendMsgTimeout(SEND_TIMEOUT_MS);
        p.setRetryTimesWhenSendFailed(1);
    }

    static DefaultMQPushConsumer push(Args a, String group, boolean trace) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, hook(a), new AllocateMessageQueueAveragely(), trace,
            null);
        c.setNamesrvAddr(a.get("namesrv"));
        c.setInstanceName(instance("c"));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPullTimeDelayMillsWhenException(200);
        // A rebalance gives the subscription a new subVersion and sends it in a heartbeat, but only if the
        // client's heartbeat lock is free (tryLock): when the periodic heartbeat holds it - its first run is
        // 1 s after start, like the first rebalance here - the broker keeps the old version and answers the
        // consumer's pulls SUBSCRIPTION_NOT_LATEST until the next periodic heartbeat, 30 s by default (any
        // broker, RocketMQ's too: it is the client's race). Every 2 s keeps that within the tests' waits.
        c.setHeartbeatBrokerInterval(2000);
        return c;
    }

    static DefaultLitePullConsumer lite(Args a, String group) {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group, hook(a));
        c.setNamesrvAddr(a.get("namesrv"));
        c.setInstanceName(instance("l"));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setAutoCommit(false);
        return c;
    }
}
