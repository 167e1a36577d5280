"""What a server process exposes, said in one line at start-up.

``rocketq serve``, ``rocketq broker`` and ``rocketq namesrv`` end their start-up line with
:func:`exposure`: every listening socket with its bound address and what it serves, whether ACL is
on, whether TLS is on, and who can reach it - "from this machine only" when every socket is bound
to a loopback address, else a plain warning.  The addresses are the ones the sockets were bound to,
not the ones announced to clients (``brokerIP1``), which can differ.
"""

from __future__ import annotations

import ipaddress

from rocketq.remoting.tls import TlsMode

Listener = tuple[str, str, int]          # (what, bound host, port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False                     # a host name: it may resolve to anything


def _shown(host: str, port: int) -> str:
    host = host or "0.0.0.0"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def exposure(listeners: list[Listener], *, acl: bool, tls: TlsMode) -> str:
    """``listening on 127.0.0.1:9876 (NameServer), ...; ACL off, TLS off: reachable from this machine only``."""
    where = ", ".join(f"{_shown(host, port)} ({what})" for what, host, port in listeners)
    security = f"ACL {'on' if acl else 'off'}, TLS {'off' if tls == TlsMode.DISABLED else tls.value}"
    if all(is_loopback(host) for _, host, _ in listeners):
        reach = "reachable from this machine only"
    elif acl:
        reach = "reachable from other machines"
    else:
        reach = ("reachable from other machines, and with ACL off anyone who reaches these ports can read, "
                 "write and delete every topic (see the README's Security section)")
    return f"listening on {where}; {security}: {reach}"
