package rocketq.compat;

/** The scenarios by name (the first word of a request line). */
final class Scenarios {
    private Scenarios() {
    }

    static Object run(Args a) throws Exception {
        return switch (a.name) {
            case "send_all_modes" -> ProducerScenarios.sendAllModes(a);
            case "send_compressed" -> ProducerScenarios.sendCompressed(a);
            case "send_orderly" -> ProducerScenarios.sendOrderly(a);
            case "send_delay" -> ProducerScenarios.sendDelay(a);
            case "transaction" -> ProducerScenarios.transaction(a);
            case "push_concurrently" -> ConsumerScenarios.pushConcurrently(a);
            case "push_retry" -> ConsumerScenarios.pushRetry(a);
            case "push_orderly" -> ConsumerScenarios.pushOrderly(a);
            case "broadcast" -> ConsumerScenarios.broadcast(a);
            case "lite_subscribe" -> ConsumerScenarios.liteSubscribe(a);
            case "lite_assign_seek" -> ConsumerScenarios.liteAssignSeek(a);
            case "trace" -> MiscScenarios.trace(a);
            case "acl" -> MiscScenarios.acl(a);
            case "mqadmin" -> AdminScenarios.mqadmin(a);
            case "send_to_queue" -> BadInputScenarios.sendToQueue(a);
            case "subscribe_sql" -> BadInputScenarios.subscribeSql(a);
            case "bench_send", "bench_lite", "bench_push" -> BenchScenarios.run(a);
            default -> throw new IllegalArgumentException("no scenario " + a.name);
        };
    }
}
