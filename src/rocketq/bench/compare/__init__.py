"""``rocketq bench compare``: rocketq (over remoting with its own client, over gRPC with the official
5.x client) beside Redis Streams, NATS JetStream and RabbitMQ streams on this machine, in one run,
interleaved, after an untimed check of what each system's acknowledgement means on disk (see
:mod:`.runner` and :mod:`.fsync_check`)."""
