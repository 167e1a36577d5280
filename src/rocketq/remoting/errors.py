"""Errors of the remoting layer, each saying whose fault it is.

* :class:`RemoteProtocolError` — the peer sent bytes that are not a valid frame.  The connection
  cannot be resynchronised (frames have no delimiter), so the transport closes it.
* :class:`LocalProtocolError` — we were asked to send something the protocol cannot carry
  (a header over 16 MiB, a code that does not fit the binary form's int16, ...).  A bug on our side;
  nothing was written.
* :class:`RemotingCommandError` — a frame was fine but a header field a handler needs is missing or
  unparseable.  Handlers let it escape; the transport answers SYSTEM_ERROR with its message, as Java
  answers a ``RemotingCommandException``.
* :class:`RemotingTimeoutError`, :class:`RemotingConnectError`,
  :class:`RemotingConnectionClosedError`, :class:`RemotingTooManyRequestsError` — operating faults of
  the transport.  ``retriable`` says whether trying again (possibly elsewhere) makes sense.
"""

from __future__ import annotations


class RemotingError(Exception):
    """Base of everything this package raises."""

    retriable = False


class RemotingProtocolError(RemotingError):
    """A frame that cannot be encoded or decoded.

    ``fault`` is ``"remote"`` (the peer sent it) or ``"local"`` (we tried to send it), ``what`` says
    what is wrong, and ``where`` where: the stream offset of the frame and the part of it.
    """

    fault = "unknown"

    def __init__(self, what: str, where: str = "") -> None:
        self.what = what
        self.where = where
        super().__init__(f"{what} ({where})" if where else what)


class RemoteProtocolError(RemotingProtocolError):
    fault = "remote"


class LocalProtocolError(RemotingProtocolError):
    fault = "local"


class RemotingCommandError(RemotingError):
    """A header field (``extFields`` entry) that is required but missing, or not parseable."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"the custom field <{field}> {reason}")


class RemotingTimeoutError(RemotingError):
    retriable = True


class RemotingConnectError(RemotingError):
    retriable = True


class RemotingConnectionClosedError(RemotingError):
    """The connection closed while a request was in flight; it may or may not have been processed."""

    retriable = True


class RemotingTooManyRequestsError(RemotingError):
    """The bounded table of requests awaiting an answer is full: back off."""

    retriable = True
