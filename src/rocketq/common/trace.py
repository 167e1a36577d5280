"""Message trace records: what RocketMQ clients with trace enabled send to ``RMQ_SYS_TRACE_TOPIC``.

A client with trace on (``enableMsgTrace``) sends, after each send, consume and transaction end,
a message to the trace topic whose body is one or more records in RocketMQ's text format
(``TraceDataEncoder``): the fields of a record are separated by ``\\x01`` (CONTENT_SPLITOR) and each
record ends with ``\\x02`` (FIELD_SPLITOR); the trace message's KEYS are the traced message's id
and its keys, so the index finds a message's records by its id.  The four kinds, field by field:

=============  ===========================================================================
Pub            type, time, regionId, producer group, topic, msgId, tags, keys, storeHost,
               bodyLength, costTime (ms), msgType (ordinal), offsetMsgId, success[, clientHost]
SubBefore      type, time, regionId, consumer group, requestId, msgId, retryTimes, keys
SubAfter       type, requestId, msgId, costTime (ms), success, keys[, contextCode[, time]]
EndTransaction type, time, regionId, producer group, topic, msgId, tags, keys, storeHost,
               msgType, transactionId, transactionState, fromTransactionCheck
=============  ===========================================================================

``msgType`` is the ordinal of RocketMQ's ``MessageType``: Normal_Msg, Trans_Msg_Half,
Trans_msg_Commit, Delay_Msg, Order_Msg.  SubAfter carries no group: it belongs to the SubBefore
with the same requestId.  :func:`decode` is tolerant as RocketMQ's decoder is (older clients write
fewer fields) but never raises on bad input: a record it cannot read is returned as ``Unreadable``
with the reason, so a trace view shows what was there.  :func:`encode` writes the same format (the
Python client's trace option and the tests use it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
CONTENT_SPLITOR, FIELD_SPLITOR = "\x01", "\x02"
MESSAGE_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg")
MAX_RECORDS_PER_BODY = 10_000          # a trace body is at most a few KiB in practice; bounded anyway
PUB, SUB_BEFORE, SUB_AFTER, END_TRANSACTION = "Pub", "SubBefore", "SubAfter", "EndTransaction"


@dataclass
class TraceRecord:
    """One record; fields a kind does not have stay empty."""

    kind: str                      # Pub | SubBefore | SubAfter | EndTransaction | Unreadable
    msg_id: str = ""
    timestamp_ms: int = 0
    region_id: str = ""
    group: str = ""
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    body_length: int = 0
    cost_ms: int = 0
    msg_type: str = ""
    offset_msg_id: str = ""
    success: bool | None = None
    client_host: str = ""
    request_id: str = ""
    retry_times: int = 0
    context_code: int = 0
    transaction_id: str = ""
    transaction_state: str = ""
    from_check: bool = False
    problem: str = ""
    extra: dict = field(default_factory=dict)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{text[:20]!r} is not a number") from None


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"


def _msg_type(text: str) -> str:
    n = _int(text)
    return MESSAGE_TYPES[n] if 0 <= n < len(MESSAGE_TYPES) else f"type {n}"


def _pub(f: list[str]) -> TraceRecord:
    r = TraceRecord(PUB, msg_id=f[5], timestamp_ms=_int(f[1]), region_id=f[2], group=f[3], topic=f[4], tags=f[6],
                    keys=f[7], store_host=f[8], body_length=_int(f[9]), cost_ms=_int(f[10]), msg_type=_msg_type(f[11]))
    if len(f) == 13:
        r.success = _bool(f[12])
    elif len(f) >= 14:
        r.offset_msg_id, r.success = f[12], _bool(f[13])
        r.client_host = f[14] if len(f) >= 15 else ""
    return r


def _sub_before(f: list[str]) -> TraceRecord:
    return TraceRecord(SUB_BEFORE, msg_id=f[5], timestamp_ms=_int(f[1]), region_id=f[2], group=f[3],
                       request_id=f[4], retry_times=_int(f[6]), keys=f[7])


def _sub_after(f: list[str]) -> TraceRecord:
    r = TraceRecord(SUB_AFTER, request_id=f[1], msg_id=f[2], cost_ms=_int(f[3]), success=_bool(f[4]), keys=f[5])
    if len(f) >= 7:
        r.context_code = _int(f[6])
    if len(f) >= 8:
        r.timestamp_ms = _int(f[7])
    return r


def _end_transaction(f: list[str]) -> TraceRecord:
    return TraceRecord(END_TRANSACTION, msg_id=f[5], timestamp_ms=_int(f[1]), region_id=f[2], group=f[3],
                       topic=f[4], tags=f[6], keys=f[7], store_host=f[8], msg_type=_msg_type(f[9]),
                       transaction_id=f[10], transaction_state=f[11], from_check=_bool(f[12]))


_READERS = {PUB: (12, _pub), SUB_BEFORE: (8, _sub_before), SUB_AFTER: (6, _sub_after),
            END_TRANSACTION: (13, _end_transaction)}


def decode(body: bytes | str) -> list[TraceRecord]:
    """Every record of a trace message body, in order; unreadable ones as kind ``Unreadable``."""
    text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else body
    out = []
    for n, chunk in enumerate(text.split(FIELD_SPLITOR)):
        if not chunk.strip():
            continue
        if n >= MAX_RECORDS_PER_BODY:
            out.append(TraceRecord("Unreadable", problem=f"more than {MAX_RECORDS_PER_BODY} records; the rest skipped"))
            break
        fields = chunk.split(CONTENT_SPLITOR)
        reader = _READERS.get(fields[0])
        if reader is None:
            out.append(TraceRecord("Unreadable", problem=f"unknown record type {fields[0][:32]!r}"))
            continue
        least, read = reader
        if len(fields) < least:
            out.append(TraceRecord("Unreadable", problem=f"{fields[0]} record with {len(fields)} fields, "
                                                         f"at least {least} expected"))
            continue
        try:
            out.append(read(fields))
        except ValueError as exc:
            out.append(TraceRecord("Unreadable", problem=f"{fields[0]} record: {exc}"))
    return out


def encode(record: TraceRecord) -> str:
    """*record* in the text format (with its trailing FIELD_SPLITOR)."""
    r = record
    type_no = str(MESSAGE_TYPES.index(r.msg_type)) if r.msg_type in MESSAGE_TYPES else "0"
    if r.kind == PUB:
        fields = [PUB, r.timestamp_ms, r.region_id, r.group, r.topic, r.msg_id, r.tags, r.keys, r.store_host,
                  r.body_length, r.cost_ms, type_no, r.offset_msg_id, _java_bool(r.success), r.client_host]
    elif r.kind == SUB_BEFORE:
        fields = [SUB_BEFORE, r.timestamp_ms, r.region_id, r.group, r.request_id, r.msg_id, r.retry_times, r.keys]
    elif r.kind == SUB_AFTER:
        fields = [SUB_AFTER, r.request_id, r.msg_id, r.cost_ms, _java_bool(r.success), r.keys, r.context_code,
                  r.timestamp_ms]
    elif r.kind == END_TRANSACTION:
        fields = [END_TRANSACTION, r.timestamp_ms, r.region_id, r.group, r.topic, r.msg_id, r.tags, r.keys,
                  r.store_host, type_no, r.transaction_id, r.transaction_state, _java_bool(r.from_check)]
    else:
        raise ValueError(f"no trace record kind {r.kind!r}")
    return CONTENT_SPLITOR.join(str(x) for x in fields) + FIELD_SPLITOR


def _java_bool(value: bool | None) -> str:
    return "true" if value else "false"


def trace_keys(record: TraceRecord) -> list[str]:
    """The KEYS a trace message carries for *record*: the traced id, and its keys when it has any."""
    return [record.msg_id] + ([record.keys] if record.keys and record.keys != "null" else [])


@dataclass
class TraceStep:
    """One row of a message's path, as the console and ``rocketq message trace`` show it."""

    kind: str
    timestamp_ms: int
    group: str
    where: str                 # store host (Pub) or client host
    cost_ms: int
    status: str
    detail: str


def path_of(msg_id: str, records: list[TraceRecord]) -> list[TraceStep]:
    """The records about *msg_id* as steps in time order; a SubAfter is joined to its SubBefore
    (same requestId) to know its group and time."""
    mine = [r for r in records if r.msg_id == msg_id or (r.offset_msg_id and r.offset_msg_id == msg_id)]
    before = {r.request_id: r for r in mine if r.kind == SUB_BEFORE}
    steps = []
    for r in mine:
        if r.kind == PUB:
            steps.append(TraceStep("sent", r.timestamp_ms, r.group, r.store_host or r.client_host, r.cost_ms,
                                   "success" if r.success else "failed",
                                   f"topic {r.topic}, tags {r.tags}, keys {r.keys}, {r.body_length} bytes, "
                                   f"{r.msg_type}" + (f", offset id {r.offset_msg_id}" if r.offset_msg_id else "")))
        elif r.kind == SUB_BEFORE:
            steps.append(TraceStep("delivered", r.timestamp_ms, r.group, r.region_id, 0, "pulled",
                                   f"attempt {r.retry_times + 1}, request {r.request_id}"))
        elif r.kind == SUB_AFTER:
            start = before.get(r.request_id)
            when = r.timestamp_ms or ((start.timestamp_ms + r.cost_ms) if start else 0)
            steps.append(TraceStep("consumed", when, start.group if start else "", "", r.cost_ms,
                                   "success" if r.success else "failed", f"request {r.request_id}"))
        elif r.kind == END_TRANSACTION:
            steps.append(TraceStep("transaction end", r.timestamp_ms, r.group, r.store_host, 0, r.transaction_state,
                                   f"transaction {r.transaction_id}" + (" (from a check)" if r.from_check else "")))
    return sorted(steps, key=lambda s: (s.timestamp_ms, s.kind))
