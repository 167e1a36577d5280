"""rocketq: a message broker in Python that follows Apache RocketMQ's design and speaks its protocols."""

__version__ = "0.1.0"
