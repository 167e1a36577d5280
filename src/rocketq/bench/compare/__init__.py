"""``rocketq bench compare``: rocketq beside Redis Streams, NATS JetStream and RabbitMQ streams on this machine, in one
run, interleaved (see :mod:`.runner`)."""
