"""GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25): the broker's settings over the wire.

GET answers every broker and store setting as Java properties text (``key=value`` lines, RocketMQ's
key names, :mod:`rocketq.broker.config_keys`), with the header ``version`` (a DataVersion JSON that
changes with each update); secrets (``innerClientAuthenticationCredentials``) are masked.

UPDATE takes such text.  Every key must be a broker or store setting and every value valid for it
(checked as the configuration loader checks a file: the whole update is refused, naming the key,
otherwise).  Then:

* the keys in :data:`RUNTIME_KEYS` (filters, message types, pop assignment, fast failure,
  transaction checks, the timer's limits, system-topic validation) and :data:`STORE_RUNTIME_KEYS`
  (``fileReservedTime``) take effect at once;
* every key is saved in ``<storePath>/config/broker.properties``, which the server reads at start
  after its configuration file (and before the environment and flags), so the others take effect
  at the next start - the answer's remark names both kinds.

RocketMQ applies what it can and rewrites its whole configuration file; rocketq keeps the operator's
file as written and saves only what was set over the wire.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from rocketq.broker.admin import ok
from rocketq.broker.config_keys import BROKER_KEYS
from rocketq.broker.timer_messages import TimerPolicy
from rocketq.common.data_version import DataVersion
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode
from rocketq.store import StoreConfig
from rocketq.store.config import _coerce

SAVED_CONFIG_FILE = Path("config") / "broker.properties"      # under the store root
SECRET_KEYS = frozenset({"innerClientAuthenticationCredentials", "initAuthenticationUser"})
MAX_CONFIG_BODY_BYTES = 64 * 1024


def _pull(broker) -> None:
    broker._pull._property_filter = broker.settings.enable_property_filter
    broker._pull._max_filter_bytes = broker.settings.max_filter_message_size


def _flow(broker) -> None:
    st, fc = broker.settings, broker.flow_control
    fc.enabled, fc.max_wait_in_queue_ms, fc.max_inflight_sends = (st.fast_failure, st.wait_in_send_queue_ms,
                                                                  st.send_queue_capacity)


def _transactions(broker) -> None:
    st, tc = broker.settings, broker.transaction_checker
    tc.interval_s, tc.timeout_s, tc.max_checks = (st.transaction_check_interval_s, st.transaction_timeout_s,
                                                  st.transaction_check_max)


def _timer(broker) -> None:
    st = broker.settings
    broker.timer_policy = TimerPolicy(st.timer_wheel_enable, st.timer_max_delay_sec * 1000)


# settings whose readers look at broker.settings on every use, or are told here (the hook)
RUNTIME_KEYS = {
    "enablePropertyFilter": _pull, "maxFilterMessageSize": _pull, "enableMixedMessageType": None,
    "defaultMessageRequestMode": None, "defaultPopShareQueueNum": None, "validateSystemTopicWhenUpdateTopic": None,
    "brokerFastFailureEnable": _flow, "waitTimeMillsInSendQueue": _flow, "sendThreadPoolQueueCapacity": _flow,
    "transactionTimeOut": _transactions, "transactionCheckMax": _transactions,
    "transactionCheckInterval": _transactions, "timerWheelEnable": _timer, "timerMaxDelaySec": _timer,
}


def _reserved_time(broker, value: str) -> None:
    hours = StoreConfig.from_rocketmq({"fileReservedTime": value}, store_path=broker.store.config.store_path)[0] \
        .file_reserved_time_hours
    broker.store.config = broker.store.config.replace(file_reserved_time_hours=hours)
    broker.store.cleaner.set_reserved_hours(hours)


# store settings that change at once: key -> apply(broker, value as written)
STORE_RUNTIME_KEYS = {"fileReservedTime": _reserved_time}


def handlers(broker) -> dict:
    return {RequestCode.GET_BROKER_CONFIG: lambda conn, cmd: get_config(broker, cmd),
            RequestCode.UPDATE_BROKER_CONFIG: lambda conn, cmd: update_config(broker, cmd)}


def _version(broker) -> DataVersion:
    if getattr(broker, "config_version", None) is None:
        broker.config_version = DataVersion()
    return broker.config_version


def current(broker) -> dict[str, str]:
    """Every setting by its RocketMQ key, as text."""
    out: dict[str, str] = {}
    for key, (name, conv) in BROKER_KEYS.items():
        value = getattr(broker.settings, name)
        if conv is not None and value is not None:
            value = int(round(value * 1000))          # ms on the wire, seconds in the field
        out[key] = "***" if key in SECRET_KEYS and value else _text(value)
    for key, name in StoreConfig.ROCKETMQ_KEYS.items():
        if name is not None and key not in out:
            out[key] = _text(getattr(broker.store.config, name))
    server = getattr(broker, "server", None)
    if server is not None and server.port:           # listenPort 0: the port the system picked
        out["listenPort"] = str(server.port)
    return out


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


async def get_config(broker, cmd: RemotingCommand) -> RemotingCommand:
    body = "".join(f"{k}={v}\n" for k, v in sorted(current(broker).items()))
    return ok(cmd, {"version": json.dumps(_version(broker).to_json())}, body.encode())


def parse_properties(text: str) -> dict[str, str]:
    """``key=value`` / ``key: value`` lines (``#`` and ``!`` comments), as Java's Properties."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            raise ValueError(f"line {n}: expected key=value, got {line[:80]!r}")
        out[line[:cut].strip()] = line[cut + 1:].strip()
    return out


def _check(broker, props: dict[str, str]) -> tuple[dict, str | None]:
    """The BrokerSettings field changes *props* make, or the refusal naming the first bad key."""
    types = {f.name: str(f.type).replace(" | None", "") for f in dataclasses.fields(broker.settings)}
    changes = {}
    for key, value in props.items():
        if key in BROKER_KEYS:
            name, conv = BROKER_KEYS[key]
            try:
                v = _coerce(types[name], value)
                changes[name] = conv[1](v) if conv else v
            except (ValueError, TypeError) as exc:
                return {}, f"{key}={value}: {exc}"
        elif StoreConfig.ROCKETMQ_KEYS.get(key):
            try:
                StoreConfig.from_rocketmq({key: value}, store_path=broker.store.config.store_path)
            except (ValueError, TypeError) as exc:
                return {}, f"{key}={value}: {exc}"
        else:
            return {}, f"{key} is not a broker or store setting (TLS, NameServer and gRPC ports are set in the " \
                       "configuration file)"
    try:
        dataclasses.replace(broker.settings, **changes)             # the settings' own checks
    except (ValueError, TypeError) as exc:
        return {}, str(exc)
    return changes, None


async def update_config(broker, cmd: RemotingCommand) -> RemotingCommand:
    if len(cmd.body or b"") > MAX_CONFIG_BODY_BYTES:
        return RemotingCommand.create_response(cmd, ResponseCode.INVALID_PARAMETER,
                                               f"the body is larger than {MAX_CONFIG_BODY_BYTES} bytes")
    try:
        props = parse_properties((cmd.body or b"").decode())
    except (ValueError, UnicodeDecodeError) as exc:
        return RemotingCommand.create_response(cmd, ResponseCode.INVALID_PARAMETER, f"bad properties body: {exc}")
    changes, refusal = _check(broker, props)
    if refusal is not None:
        return RemotingCommand.create_response(cmd, ResponseCode.INVALID_PARAMETER, refusal)
    save(Path(broker.store.config.store_path) / SAVED_CONFIG_FILE, props)
    now = {BROKER_KEYS[k][0]: changes[BROKER_KEYS[k][0]] for k in props if k in RUNTIME_KEYS}
    broker.settings = dataclasses.replace(broker.settings, **now)
    for hook in {RUNTIME_KEYS[k] for k in props if k in RUNTIME_KEYS} - {None}:
        hook(broker)
    for key in props.keys() & STORE_RUNTIME_KEYS.keys():
        STORE_RUNTIME_KEYS[key](broker, props[key])
    _version(broker).next()
    applied = sorted(k for k in props if k in RUNTIME_KEYS or k in STORE_RUNTIME_KEYS)
    later = sorted(k for k in props if k not in applied)
    remark = "; ".join(part for part in (
        f"applied now: {', '.join(applied)}" if applied else "",
        f"saved, takes effect after a restart: {', '.join(later)}" if later else "") if part)
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, remark or None)


def save(path: Path, props: dict[str, str]) -> None:
    """Merge *props* into the saved settings file (written whole: temporary file, fsync, rename)."""
    saved = parse_properties(path.read_text(encoding="utf-8")) if path.is_file() else {}
    saved.update(props)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    text = "# set over the wire (UPDATE_BROKER_CONFIG, `rocketq broker config set`); read after the config file\n"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text + "".join(f"{k}={v}\n" for k, v in sorted(saved.items())))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
