package rocketq.compat;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.BooleanSupplier;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;

/** Bodies the scenarios send, and messages / send results as maps for the result line. */
final class Msgs {
    static final long POLL_MS = 20;

    private Msgs() {
    }

    /** A body that is not plain ASCII: a label, a non-ASCII word and every byte value 0..255 rotated by i,
     *  so a codec that decodes text or drops high bytes shows up as a mismatch on the Python side. */
    static byte[] body(String label, int i) {
        byte[] head = (label + "#" + i + " \u00fcber \u6d88\u606f ").getBytes(StandardCharsets.UTF_8);
        byte[] out = new byte[head.length + 256];
        System.arraycopy(head, 0, out, 0, head.length);
        for (int b = 0; b < 256; b++) {
            out[head.length + b] = (byte) (b + i);
        }
        return out;
    }

    /** {@link #body} repeated past 5,000 bytes: over DefaultMQProducer's compressMsgBodyOverHowmuch (4 KiB). */
    static byte[] bigBody(String label, int i) {
        byte[] one = body(label, i);
        byte[] out = new byte[one.length * (5000 / one.length + 1)];
        for (int at = 0; at < out.length; at += one.length) {
            System.arraycopy(one, 0, out, at, one.length);
        }
        return out;
    }

    static Map<String, Object> sent(String mode, Message m, SendResult r) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("mode", mode);
        out.put("topic", m.getTopic());
        out.put("tags", m.getTags());
        out.put("keys", m.getKeys());
        out.put("body", m.getBody());
        out.put("uniqId", MessageClientIDSetter.getUniqID(m));
        out.put("userProps", userProps(m));
        if (r != null) {
            out.put("status", r.getSendStatus().name());
            out.put("msgId", r.getMsgId());
            out.put("offsetMsgId", r.getOffsetMsgId());
            out.put("queueId", r.getMessageQueue().getQueueId());
            out.put("brokerName", r.getMessageQueue().getBrokerName());
            out.put("queueOffset", r.getQueueOffset());
        }
        return out;
    }

    static Map<String, Object> userProps(Message m) {
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<String, String> e : m.getProperties().entrySet()) {
            if (e.getKey().startsWith("u.")) {
                out.put(e.getKey(), e.getValue());
            }
        }
        return out;
    }

    static Map<String, Object> received(MessageExt m) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("topic", m.getTopic());
        out.put("tags", m.getTags());
        out.put("keys", m.getKeys());
        out.put("body", m.getBody());
        out.put("msgId", m.getMsgId());
        if (m instanceof MessageClientExt ext) {
            out.put("offsetMsgId", ext.getOffsetMsgId());
        }
        out.put("queueId", m.getQueueId());
        out.put("queueOffset", m.getQueueOffset());
        out.put("reconsumeTimes", m.getReconsumeTimes());
        out.put("bornTimestamp", m.getBornTimestamp());
        out.put("storeTimestamp", m.getStoreTimestamp());
        out.put("commitLogOffset", m.getCommitLogOffset());
        out.put("properties", new TreeMap<>(m.getProperties()));
        return out;
    }

    /** Wait for a condition, polling; a timeout is the scenario's failure, naming what did not happen. */
    static void await(BooleanSupplier cond, long timeoutMs, String what) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("timed out after " + timeoutMs + " ms waiting for " + what);
            }
            Thread.sleep(POLL_MS);
        }
    }
}
