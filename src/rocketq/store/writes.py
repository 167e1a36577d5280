"""The store's write paths (part of :class:`MessageStore`, kept apart to keep files small).

Theory of operation
-------------------
A put is three steps, the first outside any lock:

1. *refuse or prepare* - a stopped store, a stalled dispatcher or a full disk refuses before anything
   is appended (a refused message must never be delivered later); otherwise the
   :class:`~rocketq.store.prepare.Preparer` turns the messages (or a SEND_MESSAGE header, or a
   SEND_BATCH_MESSAGE body) into a native record batch: validated, sizes known;
2. *append* - :meth:`CommitLog.append` takes the put lock once for the batch, encodes it into the
   mapped segment and tells the dispatcher how many messages arrived.  A single ``Message``
   without a delay level skips step 1: :meth:`CommitLog.append_message` reads, checks and encodes
   it in one native call under the lock;
3. *durability* - under ``SYNC_FLUSH`` the caller waits for the group commit to pass the batch's
   end: a thread blocks (``put_message``/``put_messages``), an asyncio producer awaits a future
   that the flush thread resolves together with every other waiter of its loop.  A wait that
   outlasts ``syncFlushTimeout`` turns the result into ``FLUSH_DISK_TIMEOUT`` (the record stays).
"""

from __future__ import annotations

import asyncio

from rocketq.common.message import Message
from rocketq.store.prepare import RecordBatch
from rocketq.store.results import BatchPutResult, PutError, PutMessageResult, PutStatus


class StoreWrites:
    """Mixed into MessageStore; uses its commitlog, dispatcher, cleaner, group commit and preparer."""

    def put_message(self, msg: Message) -> PutMessageResult:
        # _append_one's common case inline (one Python frame less per single put, ~5 % of its writer)
        if self.running and self.dispatcher.blocked is None and self.cleaner.full is None and not msg.delay_level:
            try:
                result = self.commitlog.append_message(msg, self._clock, self._notify_appended)
            except PutError as exc:
                result = PutMessageResult(exc.status, error=exc.reason)
        else:
            result = self._append_one(msg)
        if self.group_commit is not None and result.status == PutStatus.PUT_OK \
                and not self.group_commit.wait_flushed(result.physical_offset + result.wrote_bytes):
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
        return result

    async def put_message_async(self, msg: Message) -> PutMessageResult:
        """``put_message`` for an asyncio producer: under SYNC_FLUSH it awaits the group commit
        instead of blocking the event loop (one wake-up per fsync for all of a loop's producers)."""
        if self.running and self.dispatcher.blocked is None and self.cleaner.full is None and not msg.delay_level:
            try:   # _append_one's common case inline, as in put_message
                result = self.commitlog.append_message(msg, self._clock, self._notify_appended)
            except PutError as exc:
                return PutMessageResult(exc.status, error=exc.reason)
        else:
            result = self._append_one(msg)
        if self.group_commit is not None and result.status is PutStatus.PUT_OK and not await self._flushed(result):
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
        return result

    async def put_staged_async(self, batch: RecordBatch) -> PutMessageResult:
        """``put_message_async`` of a one-record batch from :meth:`stage_sent`."""
        result = self._refusal() or self._append_single(batch)
        if self.group_commit is not None and result.status is PutStatus.PUT_OK and not await self._flushed(result):
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
        return result

    def stage_sent(self, topic: str, queue_id: int, **header) -> tuple[RecordBatch, str | None, bool] | None:
        """A SEND_MESSAGE(_V2) request's message as a batch to :meth:`put_staged_async`, or None when
        it needs the general path; see :meth:`Preparer.sent`."""
        return self._preparer.sent(topic, queue_id, **header)

    def _flushed(self, result: PutMessageResult) -> asyncio.Future:
        """A future that the group-commit thread resolves True once *result*'s record is on disk, False
        once syncFlushTimeout has passed (a plain call, not a coroutine: one frame less per send)."""
        return self.group_commit.wait_flushed_future(result.physical_offset + result.wrote_bytes,
                                                     asyncio.get_running_loop())

    def _refusal(self) -> PutMessageResult | None:
        """Why no message may be appended now (checked before appending: a refused message must
        never be delivered later), or None."""
        if not self.running:
            return PutMessageResult(PutStatus.SERVICE_NOT_AVAILABLE, error="the store is not running")
        refused = self.dispatcher.blocked or self.cleaner.full
        return None if refused is None else PutMessageResult(PutStatus.SERVICE_NOT_AVAILABLE, error=refused)

    def _append_one(self, msg: Message) -> PutMessageResult:
        dispatcher = self.dispatcher
        # _refusal's conditions, read inline: a single put pays no call when nothing refuses it
        if not self.running or dispatcher.blocked is not None or self.cleaner.full is not None:
            return self._refusal()
        try:
            if not msg.delay_level:
                return self.commitlog.append_message(msg, self._clock, self._notify_appended)
            batch = self._preparer.messages([msg])     # policy: re-addressed to the schedule topic
        except PutError as exc:
            return PutMessageResult(exc.status, error=exc.reason)
        return self._append_single(batch)

    def _append_single(self, batch: RecordBatch) -> PutMessageResult:
        try:
            phy, store_ts = self.commitlog.append(batch, clock=self._clock, on_appended=self.dispatcher.notify_appended)
        except PutError as exc:
            return PutMessageResult(exc.status, error=exc.reason)
        return PutMessageResult(PutStatus.PUT_OK, self._msg_id_prefix + f"{phy:016X}", phy, batch.queue_offset(0),
                                batch.queue_ids[0], batch.total_bytes, store_ts)

    def put_messages(self, msgs: list[Message] | RecordBatch) -> BatchPutResult:
        """Append *msgs* as one batch under one lock: all are stored, or none (with the reason).
        A ``RecordBatch`` (see :meth:`stage_wire_batch`) is appended as it is."""
        appended = self._append_batch(msgs)
        if isinstance(appended, BatchPutResult):
            return appended
        batch, phy, store_ts = appended
        flushed = self.group_commit is None or self.group_commit.wait_flushed(phy + batch.total_bytes)
        return self._batch_result(flushed, batch, phy, store_ts)

    async def put_messages_async(self, msgs: list[Message] | RecordBatch) -> BatchPutResult:
        """``put_messages`` for an asyncio producer: under SYNC_FLUSH it awaits the group commit, so
        that every batch in flight shares the next fsync (a thread per waiting batch would let only
        as many batches into one fsync as the thread pool has threads)."""
        appended = self._append_batch(msgs)
        if isinstance(appended, BatchPutResult):
            return appended
        batch, phy, store_ts = appended
        flushed = self.group_commit is None or await self.group_commit.wait_flushed_future(
            phy + batch.total_bytes, asyncio.get_running_loop())
        return self._batch_result(flushed, batch, phy, store_ts)

    def _append_batch(self, msgs: list[Message] | RecordBatch):
        """(batch, first offset, store timestamp) once appended, or the refusal as a BatchPutResult."""
        count = len(msgs)
        if not self.running:
            return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, error="the store is not running", count=count)
        if not count:
            return BatchPutResult(PutStatus.PUT_OK)
        refused = self.dispatcher.blocked or self.cleaner.full
        if refused is not None:
            return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, error=refused, count=count)
        try:
            batch = msgs if isinstance(msgs, RecordBatch) else self._preparer.messages(msgs)
            phy, store_ts = self.commitlog.append(batch, clock=self._clock, on_appended=self.dispatcher.notify_appended)
        except PutError as exc:
            return BatchPutResult(exc.status, error=exc.reason, count=count)
        return batch, phy, store_ts

    def _batch_result(self, flushed: bool, batch: RecordBatch, phy: int, store_ts: int) -> BatchPutResult:
        return BatchPutResult(PutStatus.PUT_OK if flushed else PutStatus.FLUSH_DISK_TIMEOUT, batch=batch,
                              first_offset=phy, store_timestamp=store_ts, store_host=self.store_host)

    def stage_wire_batch(self, body: bytes, **header) -> RecordBatch | None:
        """A SEND_BATCH_MESSAGE body as a batch to :meth:`put_messages`, or None when a message in it
        needs the general path (a delay level); see :meth:`Preparer.wire_batch`."""
        return self._preparer.wire_batch(body, **header)
