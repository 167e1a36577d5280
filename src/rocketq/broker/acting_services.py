"""What a slave acting master delivers, and how its progress goes back to the returning master.

Theory of operation
-------------------
RocketMQ 5 starts a slave's "special services" while it is the group's smallest id and the master
is away (``BrokerController.changeSpecialServiceStatus``): the delay-level service, the timer's
dequeue and the transaction check, each writing through ``EscapeBridge`` to another group.
rocketq does the same with :class:`ActingServices`, started and stopped by
:class:`rocketq.broker.acting_master.ActingMaster`:

* **Delay levels** (:class:`DelayEscape`): each level's queue of ``SCHEDULE_TOPIC_XXXX`` is walked
  from the slave's copy of the master's progress (``delayOffset.json``, copied by
  :mod:`rocketq.broker.slave_sync`), and a message whose time has come is escaped under its real
  topic (:mod:`rocketq.broker.escape`).  A level's offset moves past a message only once the remote
  master stored it; a failed escape stops that level until the next poll, so order within a level
  holds and nothing is skipped.
* **Timer messages**: the broker's :class:`rocketq.broker.timer.Timer` runs with the escape as its
  ``put``, from the master's copied checkpoint (see there).
* **Transactions**: the checker (:mod:`rocketq.broker.transaction_check`) escapes each unresolved
  half message, as a half message, to another group, whose master then checks it back with the
  producer (RocketMQ's ``TransactionalMessageServiceImpl.check`` on an acting slave).  Its progress
  is the consumer offset of ``CID_RMQ_SYS_TRANS`` on this slave.

Stopping (the master is back) waits for the put under way, then saves the delay offsets and the
timer checkpoint.  The master, before it delivers anything itself, waits until no slave of its group
runs these services (``brokerActive`` in GET_BROKER_RUNTIME_INFO) and takes each slave's progress
where it is further: consumer offsets (the transaction walk among them), delay offsets per level,
the timer checkpoint (:meth:`ActingServices.take_back`; RocketMQ's ``syncMetadataReverse``, which
takes a slave's whole tables when their data version is not older; rocketq compares per entry).
Until the master holds that progress, the slave's copy from the master keeps its own higher values
(:meth:`ActingServices.keeps_progress`), so a round of SlaveSynchronize cannot undo it first.
"""

from __future__ import annotations

import asyncio
import logging
import time

from rocketq.broker.escape import EscapeBridge
from rocketq.common.aio import wait_event
from rocketq.common.sysflag import SCHEDULE_TOPIC
from rocketq.store.consume_queue import BLANK_SIZE
from rocketq.store.schedule import due_message

log = logging.getLogger(__name__)

DELAY_POLL_S = 0.1                 # as the store's schedule_poll_interval_ms
UNITS_PER_POLL = 256
PERSIST_INTERVAL_S = 1.0
HANDBACK_HOLD_S = 120.0            # the slave keeps its higher offsets at most this long for the master


class DelayEscape:
    def __init__(self, broker, put):
        self._broker, self._put = broker, put
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._last_persist = 0.0
        self._dirty = False
        self.escaped = 0

    def start(self) -> None:
        self._stop.clear()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Finish the escape under way (never cut in the middle of a put), then save the offsets."""
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        self._persist()

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                await self.escape_due()
                if self._dirty and time.monotonic() - self._last_persist >= PERSIST_INTERVAL_S:
                    await asyncio.to_thread(self._persist)
            except Exception:
                log.exception("escaping delayed messages failed; trying again")
            await wait_event(self._stop, DELAY_POLL_S)

    def _persist(self) -> None:
        if self._dirty:
            self._broker.store.schedule.persist()
            self._dirty = False
            self._last_persist = time.monotonic()

    async def escape_due(self) -> int:
        """Escape every due message, level by level; returns how many went."""
        store = self._broker.store
        offsets = store.schedule.offsets
        done = 0
        for level in range(1, len(store.config.delay_levels_ms) + 1):
            cq = store.consume_queue(SCHEDULE_TOPIC, level - 1)
            if cq is None:
                continue
            offset = max(offsets.get(level, 0), cq.min_offset())
            blocked = False
            while not blocked and not self._stop.is_set():
                units = cq.get_units(offset, UNITS_PER_POLL).tolist()
                if not units:
                    break
                for phy, size, due in units:
                    if size != BLANK_SIZE and (due > int(time.time() * 1000) or not await self._escape(phy, size)):
                        blocked = True
                        break
                    done += size != BLANK_SIZE
                    offset += 1
                    offsets[level] = offset          # after the remote master stored it, never before
                    self._dirty = True
        self.escaped += done
        return done

    async def _escape(self, phy: int, size: int) -> bool:
        m = self._broker.store.read_message(phy, size)
        if m is None:
            return True                            # expired with its segment: nothing to deliver
        msg = due_message(m, phy)
        return True if msg is None else await self._put(msg)


class ActingServices:
    def __init__(self, broker):
        self._broker = broker
        self.bridge = EscapeBridge(broker)
        self._delay: DelayEscape | None = None
        self.running = False
        self._held: dict | None = None             # offsets as they were when acting stopped
        self._held_since = 0.0

    async def start(self) -> None:
        b = self._broker
        if self.running:
            return
        self._held = None
        if b.timer is not None and not b.timer.running:     # first: it may raise (a bad file), nothing runs then
            b.timer.start(put=self.bridge.put, fresh=True)
        self._delay = DelayEscape(b, self.bridge.put)
        self._delay.start()
        b.transaction_checker.escape = self.bridge.put
        self.running = True
        log.warning("broker %s acting master: delayed, timer and transactional messages go to other groups",
                    b.settings.broker_name)

    async def stop(self) -> None:
        if not self.running:
            return
        b = self._broker
        b.transaction_checker.escape = None
        await b.transaction_checker.wait_idle()
        await self._delay.stop()
        if b.timer is not None:
            await b.timer.close()
        b.offsets.persist()
        self._held = b.offsets.encode().get("offsetTable") or {}
        self._held_since = time.monotonic()
        self.running = False
        log.warning("broker %s no longer acting master: %d messages escaped to other groups",
                    b.settings.broker_name, self.bridge.escaped)

    def keeps_progress(self, master_table: dict) -> bool:
        """Whether this slave still holds consumer offsets (transaction progress among them) higher than
        its master's *master_table*, made while acting and not yet taken back (bounded in time)."""
        if self._held is None:
            return False
        if time.monotonic() - self._held_since > HANDBACK_HOLD_S:
            self._held = None
            return False
        for key, queues in self._held.items():
            theirs = master_table.get(key) or {}
            if any(int(off) > int(theirs.get(q, theirs.get(str(q), -1))) for q, off in queues.items()):
                return True
        self._held = None                          # the master has it all
        return False

    async def close(self) -> None:
        await self.stop()
        await self.bridge.close()
