"""``rocketq bench compare``: rocketq beside Redis Streams and NATS JetStream on this machine, in one
run, interleaved (see :mod:`.runner`)."""
