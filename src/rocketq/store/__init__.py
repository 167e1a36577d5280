"""rocketq's message store: RocketMQ's CommitLog / ConsumeQueue / IndexFile design, embedded.

No networking here; usable from a script or a test::

    from rocketq.store import MessageStore, StoreConfig, Message
    with MessageStore(StoreConfig(store_path="/tmp/s")) as store:
        r = store.put_message(Message(topic="T", body=b"hi", tags="A", keys=["k1"]))
"""

from rocketq.common.message import Message
from rocketq.store.config import ASYNC_FLUSH, SYNC_FLUSH, StoreConfig
from rocketq.store.message_store import MessageStore
from rocketq.store.record import StoredMessage
from rocketq.store.recovery import CorruptionError
from rocketq.store.results import BatchPutResult, GetMessageResult, GetStatus, PutMessageResult, PutStatus
from rocketq.store.store_files import StoreOpenError

__all__ = ["MessageStore", "StoreConfig", "Message", "StoredMessage", "PutStatus", "PutMessageResult",
           "BatchPutResult", "GetMessageResult", "GetStatus", "ASYNC_FLUSH", "SYNC_FLUSH", "CorruptionError",
           "StoreOpenError"]
