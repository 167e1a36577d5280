"""Console sessions, login and CSRF tokens.

Every browser gets a session on its first request: a random 256-bit id in an ``HttpOnly``,
``SameSite=Strict`` cookie, mapped here to the session's CSRF token and, with ACL on, the account it
logged in as.  Sessions are held in memory (a restart logs everyone out), at most ``MAX_SESSIONS``
(the oldest go first) and each for ``SESSION_TTL_S`` after its last use.

CSRF: every state-changing request is a POST whose form carries the session's token (the templates
put it in a hidden field), compared in constant time; a POST whose ``Origin`` header names another
site is refused as well.  ``SameSite=Strict`` already keeps other sites' forms from carrying the
cookie; the token makes the check independent of browser behaviour.

With ACL on, a session is anonymous until a login with an AccessKey and SecretKey of
``plain_acl.yml`` (checked by :func:`rocketq.acl.http_auth.verify`); the console then signs every
request it makes for that session with those keys, so each account sees and does exactly what the
brokers' ACL lets it.  Without a login only the login page and the static files are served.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

MAX_SESSIONS = 1_000
SESSION_TTL_S = 8 * 3600.0
COOKIE = "rocketq_console"
TOKEN_BYTES = 32


@dataclass
class Session:
    sid: str
    csrf: str
    last_used: float
    access_key: str | None = None        # the logged-in account (ACL on)
    secret_key: str | None = None
    flash: str = ""                      # one message shown on the next page (after a redirect)


class Sessions:
    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._by_id: OrderedDict[str, Session] = OrderedDict()

    def get(self, sid: str | None) -> Session | None:
        s = self._by_id.get(sid or "")
        if s is None:
            return None
        if self._clock() - s.last_used > SESSION_TTL_S:
            del self._by_id[s.sid]
            return None
        s.last_used = self._clock()
        self._by_id.move_to_end(s.sid)
        return s

    def new(self) -> Session:
        while len(self._by_id) >= MAX_SESSIONS:
            self._by_id.popitem(last=False)
        s = Session(secrets.token_urlsafe(TOKEN_BYTES), secrets.token_urlsafe(TOKEN_BYTES), self._clock())
        self._by_id[s.sid] = s
        return s

    def drop(self, sid: str) -> None:
        self._by_id.pop(sid, None)

    def renew(self, old: Session) -> Session:
        """A fresh id for a session that just logged in (no fixation of an id set before login)."""
        self.drop(old.sid)
        s = self.new()
        s.flash = old.flash
        return s


def csrf_ok(session: Session, token: str | None) -> bool:
    return bool(token) and hmac.compare_digest(session.csrf.encode(), str(token).encode())


def same_origin(origin: str | None, host: str | None) -> bool:
    """True when the request names no Origin (older browsers, curl) or the console's own."""
    if not origin or origin == "null":
        return origin is None
    scheme, sep, rest = origin.partition("://")
    return bool(sep) and scheme in ("http", "https") and rest == (host or "")
