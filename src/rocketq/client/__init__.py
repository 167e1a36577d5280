"""rocketq's Python client for the RocketMQ remoting protocol (asyncio first; :mod:`.sync` wraps it).

* :class:`Producer`, :class:`TransactionProducer` - :mod:`.producer`
* :class:`PushConsumer` - :mod:`.push_consumer`; :class:`LitePullConsumer` - :mod:`.pull_consumer`;
  :class:`PopConsumer` - :mod:`.pop_consumer`
* :class:`Admin` - :mod:`.admin`
* low-level calls - :mod:`.api`; data types - :mod:`.model`
"""

from rocketq.client.model import (
    ConsumeFrom,
    ConsumeResult,
    Credentials,
    MessageModel,
    MessageQueue,
    MQClientError,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
    TransactionState,
)
from rocketq.client.admin import Admin
from rocketq.client.pop_consumer import PopConsumer
from rocketq.client.producer import Producer, TransactionProducer
from rocketq.client.request_reply import RequestTimeout, create_reply_message
from rocketq.client.pull_consumer import LitePullConsumer
from rocketq.client.push_consumer import PushConsumer
from rocketq.common.message import Message

__all__ = ["Admin", "LitePullConsumer", "PopConsumer", "PushConsumer", "ConsumeFrom", "ConsumeResult", "Credentials", "Message", "MessageModel", "MessageQueue",
           "MQClientError", "Producer", "PullResult", "PullStatus", "SendResult", "SendStatus",
           "TransactionProducer", "TransactionState", "RequestTimeout", "create_reply_message"]
