"""A broker's role in replication (``brokerRole``), tying :mod:`rocketq.broker.ha` and
:mod:`rocketq.broker.slave_sync` to the send path.

* ``ASYNC_MASTER`` - serves the HA port; slaves catch up in the background.
* ``SYNC_MASTER``  - as above, and a send is answered only when a slave has it:
  FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE otherwise (the message is stored on the master either way,
  as in RocketMQ).
* ``SLAVE``        - follows the master given by ``haMasterAddress`` or by the NameServers, refuses
  sends (SERVICE_NOT_AVAILABLE), serves pulls and offset queries, and copies topic config,
  subscription groups and consumer offsets from the master.
"""

from __future__ import annotations

from rocketq.broker.ha import HAMaster, HASlave
from rocketq.broker.slave_sync import SlaveSync
from rocketq.remoting import RemotingCommand, ResponseCode

ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")


class Replication:
    def __init__(self, broker):
        self._broker = broker
        self.role = broker.settings.broker_role
        self.master: HAMaster | None = None
        self.slave: HASlave | None = None
        self.sync: SlaveSync | None = None

    async def start(self, host: str, default_port: int) -> str:
        """Start the role's services; returns this broker's HA address (for registration)."""
        s = self._broker.settings
        if self.role == "SLAVE":
            self.slave = HASlave(self._broker.store, self._master_ha_addr).start()
            self.sync = SlaveSync(self._broker, self._master_addr)
            self.sync.start()
            return f"{host}:{s.ha_listen_port or default_port}"
        self.master = await HAMaster(self._broker.store, s.host, default_port if s.ha_listen_port is None
                                     else s.ha_listen_port).start()
        return f"{host}:{self.master.port}"

    def _master_ha_addr(self) -> str | None:
        reg = self._broker.registrar
        return self._broker.settings.ha_master_address or (reg.master_ha_addr if reg else None)

    def _master_addr(self) -> str | None:
        reg = self._broker.registrar
        return reg.master_addr if reg else None

    def refuse_send(self, cmd: RemotingCommand) -> RemotingCommand | None:
        if self.role != "SLAVE":
            return None
        return RemotingCommand.create_response(cmd, ResponseCode.SERVICE_NOT_AVAILABLE,
                                               f"the broker[{self._broker.settings.broker_name}, brokerId "
                                               f"{self._broker.settings.broker_id}] is a slave; send to the master")

    def notify(self) -> None:
        if self.master is not None:
            self.master.notify()

    async def replicated(self, end_offset: int) -> int | None:
        """For SYNC_MASTER: None when a slave has everything before *end_offset*, else the response code."""
        if self.role != "SYNC_MASTER":
            return None
        timeout_s = self._broker.store.config.sync_flush_timeout_ms / 1000
        outcome = await self.master.wait_replicated(end_offset, timeout_s)
        return {"ok": None, "timeout": ResponseCode.FLUSH_SLAVE_TIMEOUT,
                "no_slave": ResponseCode.SLAVE_NOT_AVAILABLE}[outcome]

    async def close(self) -> None:
        for part in (self.sync, self.slave, self.master):
            if part is not None:
                await part.close()
