"""Network faults between master and slave: the HA connection goes through a proxy that the test
cuts (every connection reset) and stalls (bytes held back) while producers send.  Faults delay
replication but never corrupt it: afterwards the slave's CommitLog is the master's byte for byte,
SYNC_MASTER acknowledged only what the slave had, and `rocketq store verify` passes on both."""

import asyncio
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "client"))
from cluster import small_store  # noqa: E402
from waiting import until  # noqa: E402

from rocketq.broker.broker import Broker, BrokerSettings  # noqa: E402
from rocketq.client import Message, MQClientError, Producer  # noqa: E402
from rocketq.namesrv.server import NameServer  # noqa: E402
from rocketq.store.tools import verify_store  # noqa: E402


class FaultyProxy:
    """TCP proxy to *target*; ``cut()`` resets every connection, ``stalled`` holds bytes back."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.stalled = asyncio.Event()          # set = stalled
        self._writers: set[asyncio.StreamWriter] = set()
        self.connections = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader, writer):
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)
        for w in (writer, up_writer):
            self._writers.discard(w)
            w.close()

    async def _pipe(self, reader, writer):
        while data := await reader.read(65536):
            while self.stalled.is_set():
                await asyncio.sleep(0.01)       # held back while stalled (the proxy's own pacing)
            writer.write(data)
            await writer.drain()
        writer.close()

    def cut(self) -> None:
        for w in list(self._writers):
            w.transport.abort()

    async def close(self) -> None:
        self.cut()
        self._server.close()


def test_cuts_and_stalls_delay_replication_but_never_corrupt_it(tmp_path):
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)

    async def main():
        namesrv = await NameServer("127.0.0.1", 0, kv_path=tmp_path / "kv.json").start()
        addr = f"127.0.0.1:{namesrv.port}"
        master = await Broker(BrokerSettings(broker_name="broker-a", port=0, namesrv_addr=addr,
                                             broker_role="SYNC_MASTER", ha_listen_port=0),
                              small_store(tmp_path / "m", sync_flush_timeout_ms=500)).start()
        proxy = FaultyProxy(master.replication.master.port)
        proxy_port = await proxy.start()
        slave = await Broker(BrokerSettings(broker_name="broker-a", broker_id=1, port=0, namesrv_addr=addr,
                                            broker_role="SLAVE", ha_master_address=f"127.0.0.1:{proxy_port}"),
                             small_store(tmp_path / "s")).start()
        acked: list[int] = []                   # physical end offsets of SEND_OK answers
        refused = 0                             # answers other than SEND_OK (the slave was not reachable in time)
        try:
            await until(lambda: master.replication.master.slaves, 20, "the slave to connect through the proxy")
            async with Producer("PG", addr, retries=0, timeout_s=3) as p:
                for round_ in range(12):
                    fault = ("cut", "stall", "none")[round_ % 3]
                    if fault == "stall":
                        proxy.stalled.set()
                    for i in range(rng.randrange(3, 6) if fault == "stall" else rng.randrange(10, 40)):
                        body = f"r{round_}-{i}-".encode() + rng.randbytes(rng.randrange(10, 3000))
                        try:
                            r = await p.send(Message("Faults", body))
                        except MQClientError:
                            refused += 1
                            continue
                        if r.status.value == "SEND_OK":       # SYNC_MASTER: the slave already has it
                            acked.append(master.store.max_physical_offset())
                            assert slave.store.max_physical_offset() >= acked[-1], (round_, i, fault)
                        else:
                            refused += 1
                        if fault == "cut" and i == 3:
                            proxy.cut()
                    proxy.stalled.clear()
                    await until(lambda: master.replication.master.slaves and slave.store.max_physical_offset()
                                == master.store.max_physical_offset(), 30, f"the slave back after round {round_}")
            end = master.store.max_physical_offset()
            await until(lambda: slave.store.max_physical_offset() == end, 60, "the slave to catch up after the faults")
            assert proxy.connections >= 2, "the cuts made the slave reconnect"
            assert acked, "some sends were acknowledged"
            assert refused, "a stall made SYNC_MASTER answer FLUSH_SLAVE_TIMEOUT at least once"
            master_log = master.store.commitlog.read(0, end)
            assert slave.store.commitlog.read(0, end) == master_log
        finally:
            await slave.close()
            await proxy.close()
            await master.close()
            await namesrv.close()
        for side in ("m", "s"):
            report = verify_store(tmp_path / side)
            assert report.ok, (side, report.problems)

    asyncio.run(main())
