"""Synchronous wrappers: the asyncio client run on a background event-loop thread.

::

    from rocketq.client.sync import Producer, LitePullConsumer, Admin
    with Producer("PG", "127.0.0.1:9876") as p:
        p.send(Message("Orders", b"hello"))
    with LitePullConsumer("GID", "127.0.0.1:9876") as c:
        c.subscribe("Orders")
        c.start()
        for msg in c.poll(timeout_s=1):
            ...

Every method of the wrapped object is available; coroutine methods are run on the loop thread and
waited for (with the wrapper's ``call_timeout_s``, default 60 s); plain methods are called there
too.  One loop thread serves all wrappers of a process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading

from rocketq.client import admin as _admin
from rocketq.client import pop_consumer as _pop
from rocketq.client import producer as _producer
from rocketq.client import pull_consumer as _pull
from rocketq.client import push_consumer as _push

_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="rocketq-client-loop", daemon=True).start()
            _LOOP = loop
        return _LOOP


def submit(coro) -> concurrent.futures.Future:
    """Start *coro* on the client loop thread without waiting; its future."""
    return asyncio.run_coroutine_threadsafe(coro, _loop())


def run(coro, timeout_s: float | None = 60.0):
    """Run *coro* on the client loop thread and wait for its result."""
    return asyncio.run_coroutine_threadsafe(coro, _loop()).result(timeout_s)


class _SyncWrapper:
    _cls: type = object
    _close = "shutdown"
    _open = "start"

    def __init__(self, *args, call_timeout_s: float | None = 60.0, **kwargs):
        async def make():
            return self._cls(*args, **kwargs)
        self._timeout = call_timeout_s
        self._obj = run(make(), call_timeout_s)

    def __getattr__(self, name):
        attr = getattr(self._obj, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **kw: run(attr(*a, **kw), self._timeout)
        if callable(attr):
            async def call(*a, **kw):
                return attr(*a, **kw)
            return lambda *a, **kw: run(call(*a, **kw), self._timeout)
        return attr

    def __enter__(self):
        if self._open:
            getattr(self, self._open)()
        return self

    def __exit__(self, *exc) -> None:
        getattr(self, self._close)()


class Producer(_SyncWrapper):
    _cls = _producer.Producer


class TransactionProducer(_SyncWrapper):
    _cls = _producer.TransactionProducer


class PushConsumer(_SyncWrapper):
    _cls = _push.PushConsumer
    _open = ""                 # subscribe first, then start()


class LitePullConsumer(_SyncWrapper):
    _cls = _pull.LitePullConsumer
    _open = ""


class PopConsumer(_SyncWrapper):
    _cls = _pop.PopConsumer
    _close = "close"
    _open = ""


class Admin(_SyncWrapper):
    _cls = _admin.Admin
    _close = "close"
    _open = ""
