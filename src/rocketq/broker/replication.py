"""A broker's role in replication (``brokerRole``), tying :mod:`rocketq.broker.ha` and
:mod:`rocketq.broker.slave_sync` to the send path.

* ``ASYNC_MASTER`` - serves the HA port; slaves catch up in the background.
* ``SYNC_MASTER``  - as above, and a send is answered only when a slave has it:
  FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE otherwise (the message is stored on the master either way,
  as in RocketMQ).
* ``SLAVE``        - follows the master given by ``haMasterAddress`` or by the NameServers, refuses
  sends (SERVICE_NOT_AVAILABLE), serves pulls and offset queries, and copies topic config,
  subscription groups and consumer offsets from the master.

In controller mode (:mod:`rocketq.broker.controlled`) the role changes at run time: the HA port
listens from the start (a stable ``haAddr`` to report), :meth:`Replication.follow` /
:meth:`Replication.stop_following` start and stop copying from the master the controller names,
and sends are refused whenever the controller agent says so (not the confirmed master, fenced, or
its lease expired).
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
        self.ha_addr: str | None = None
        self._follow: tuple[str, str] | None = None           # controller mode: (master addr, master HA addr)

    async def start(self, host: str, default_port: int) -> str:
        """Start the role's services; returns this broker's HA address (for registration)."""
        self.ha_addr = await self._start(host, default_port)
        return self.ha_addr

    async def _start(self, host: str, default_port: int) -> str:
        s = self._broker.settings
        agent = self._broker.controller_agent
        if agent is not None:
            self.role = s.controller_master_role if agent.state == "master" else "SLAVE"
        if self.role == "SLAVE" and agent is None:
            self.slave = self._ha_slave()
            self.sync = SlaveSync(self._broker, self._master_addr)
            self.sync.start()
            return f"{host}:{s.ha_listen_port or default_port}"
        self.master = await HAMaster(self._broker.store, s.host, default_port if s.ha_listen_port is None
                                     else s.ha_listen_port, tls=self._broker.server_tls, limits=s.limits,
                                     acl=self._broker.acl).start()
        return f"{host}:{self.master.port}"

    async def follow(self, master_addr: str, master_ha_addr: str) -> None:
        """Controller mode: copy the log (and config, offsets) from this master."""
        self._follow = (master_addr, master_ha_addr)
        if self.slave is None:
            self.slave = self._ha_slave()
            self.sync = SlaveSync(self._broker, self._master_addr)
            self.sync.start()

    def _ha_slave(self) -> HASlave:
        # tls.enable: the HA connection to the master uses TLS, as the broker's other connections do
        # and a master with ACL on admits it with the broker's own credentials (rocketq.broker.credentials)
        return HASlave(self._broker.store, self._master_ha_addr, ssl_context=self._broker.client_ssl_context,
                       credentials=self._broker.credentials).start()

    def following_addrs(self) -> tuple[str, str] | None:
        """Controller mode: (master addr, master HA addr) being followed, or None."""
        return self._follow

    async def stop_following(self) -> None:
        """Stop copying; when this returns no replicated append is in flight."""
        self._follow = None
        for part in (self.sync, self.slave):
            if part is not None:
                await part.close()
        self.sync = self.slave = None

    def _master_ha_addr(self) -> str | None:
        if self._broker.controller_agent is not None:
            return self._follow[1] if self._follow else None
        reg = self._broker.registrar
        return self._broker.settings.ha_master_address or (reg.master_ha_addr if reg else None)

    def _master_addr(self) -> str | None:
        if self._broker.controller_agent is not None:
            return self._follow[0] if self._follow else None
        reg = self._broker.registrar
        return reg.master_addr if reg else None

    def write_refusal(self) -> str | None:
        """Why this broker takes no sends now (a slave; in controller mode also not the confirmed
        master, fenced, or its lease expired), or None when it takes them."""
        agent = self._broker.controller_agent
        why = agent.write_refusal() if agent is not None and self.role != "SLAVE" else None
        if why is None and self.role == "SLAVE":
            why = "a slave; send to the master"
        if why is None:
            return None
        return f"the broker[{self._broker.settings.broker_name}, brokerId {self._broker.settings.broker_id}] is {why}"

    def refuse_send(self, cmd: RemotingCommand) -> RemotingCommand | None:
        why = self.write_refusal()
        return None if why is None else RemotingCommand.create_response(cmd, ResponseCode.SERVICE_NOT_AVAILABLE, why)

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
