"""Server configuration from a ``broker.conf`` / TOML file, the environment and flags.

Keys are RocketMQ's (``brokerClusterName``, ``listenPort``, ``flushDiskType``,
``storePathRootDir``, ``mapedFileSizeCommitLog`` ...), so a RocketMQ ``broker.conf`` carries over;
rocketq adds ``bindAddress``, ``namesrvListenPort``, ``grpcServerPort``, ``aclFile`` and ``tlsMode`` (short
for ``tls.server.mode``; the ``tls.*`` keys are RocketMQ's TlsSystemConfig names) (the RocketMQ proxy's
name) for the standalone server.  Later sources win::

    defaults  <  file (-c broker.conf | rocketq.toml)  <  ROCKETQ_<key> environment  <  flags

* ``.properties`` files: ``key=value`` / ``key: value`` lines, ``#`` and ``!`` comments, ``\\``
  continuations, as Java's ``Properties`` reads them.
* ``.toml`` files: the same keys at top level, or inside any tables (``[broker]``, ``[store]``...),
  which are only for grouping.
* environment: ``ROCKETQ_LISTENPORT=10921`` or ``ROCKETQ_listenPort=10921`` (case does not matter);
  ``ROCKETQ_NAMESRV``, which the client commands read, is ``namesrvAddr`` (see ``CLIENT_ENV_KEYS``).

Unknown keys are errors that name the source (file and line, or variable) and suggest the closest
known key.  Keys RocketMQ has and rocketq does not use are reported as warnings, not errors, so a
real ``broker.conf`` loads and the user learns what was ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rocketq.broker.broker import BrokerSettings
from rocketq.remoting.tls import TlsMode, TlsServerConfig
from rocketq.store import StoreConfig
from rocketq.store.config import _coerce

ENV_PREFIX = "ROCKETQ_"
# Variables of the client commands (rocketq send/consume/topic ...), so that one environment serves
# both kinds of command: ROCKETQ_NAMESRV is rocketq's NAMESRV_ADDR, which RocketMQ's broker reads as
# its namesrvAddr too.  An explicit ROCKETQ_NAMESRVADDR wins over it.
CLIENT_ENV_KEYS = {"ROCKETQ_NAMESRV": "namesrvAddr"}


class ConfigError(ValueError):
    """A bad key or value; the message names where it came from."""


@dataclass(frozen=True)
class ServerConfig:
    broker: BrokerSettings = field(default_factory=BrokerSettings)
    store: StoreConfig = field(default_factory=StoreConfig)
    namesrv_port: int = 9876
    grpc_port: int = 8081             # 0 picks a free port; -1 turns the gRPC endpoint off
    warnings: tuple[str, ...] = ()


# RocketMQ / rocketq key -> (target, field, converter from the coerced value)
_MS_TO_S = ("ms", lambda v: int(v) / 1000)
_BROKER_KEYS: dict[str, tuple[str, object]] = {
    "brokerClusterName": ("cluster_name", None), "brokerName": ("broker_name", None),
    "brokerId": ("broker_id", None), "brokerIP1": ("announce_host", None), "listenPort": ("port", None),
    "bindAddress": ("host", None), "namesrvAddr": ("namesrv_addr", None),
    "autoCreateTopicEnable": ("auto_create_topic", None), "defaultTopicQueueNums": ("default_topic_queue_nums", None),
    "traceTopicEnable": ("trace_topic_enable", None), "msgTraceTopicName": ("trace_topic_name", None),
    "transactionCheckInterval": ("transaction_check_interval_s", _MS_TO_S),
    "transactionTimeOut": ("transaction_timeout_s", _MS_TO_S), "transactionCheckMax": ("transaction_check_max", None),
    "brokerFastFailureEnable": ("fast_failure", None), "waitTimeMillsInSendQueue": ("wait_in_send_queue_ms", None),
    "sendThreadPoolQueueCapacity": ("send_queue_capacity", None),
    "aclEnable": ("acl_enable", None), "aclFile": ("acl_file", None),
    "innerClientAuthenticationCredentials": ("inner_credentials", None),
    "validateSystemTopicWhenUpdateTopic": ("validate_system_topic", None),
    "brokerRole": ("broker_role", None), "haListenPort": ("ha_listen_port", None),
    "haMasterAddress": ("ha_master_address", None), "slaveReadEnable": ("slave_read_enable", None),
    "whichBrokerWhenConsumeSlowly": ("which_broker_when_consume_slowly", None),
    "accessMessageInMemoryMaxRatio": ("access_message_in_memory_max_ratio", None),
    "enableControllerMode": ("controller_mode", None), "controllerAddr": ("controller_addr", None),
    "controllerMasterRole": ("controller_master_role", None), "controllerLeaseEnable": ("controller_lease", None),
    "tls.enable": ("tls_enable", None), "tls.client.trustCertPath": ("tls_trust_cert_path", None),
    "tls.client.certPath": ("tls_client_cert_path", None), "tls.client.keyPath": ("tls_client_key_path", None),
    "timerWheelEnable": ("timer_wheel_enable", None), "timerMaxDelaySec": ("timer_max_delay_sec", None),
}
# TLS of the listening ports (RocketMQ's TlsSystemConfig names; tlsMode is short for tls.server.mode)
_TLS_KEYS = {"tlsMode": "mode", "tls.server.mode": "mode", "tls.server.certPath": "cert_path",
             "tls.server.keyPath": "key_path", "tls.server.trustCertPath": "trust_cert_path",
             "tls.server.need.client.auth": "need_client_auth"}
_SERVER_KEYS = {"namesrvListenPort": "namesrv_port", "grpcServerPort": "grpc_port"}


def rocketmq_properties(broker: BrokerSettings, store: StoreConfig) -> dict[str, str]:
    """The effective settings under their RocketMQ names, as Java's GET_BROKER_CONFIG lists them (values
    as text; booleans lower case, durations in RocketMQ's units); secrets are left out."""
    out: dict[str, str] = {}
    for key, (name, conv) in _BROKER_KEYS.items():
        value = getattr(broker, name)
        if value is None or key == "innerClientAuthenticationCredentials":
            continue
        if conv is _MS_TO_S:
            value = int(round(value * 1000))
        out[key] = _text(value)
    for key, name in StoreConfig.ROCKETMQ_KEYS.items():
        if name and key != "mapedFileSizeCommitLog":         # the typo'd alias of mappedFileSizeCommitLog
            out[key] = _text(getattr(store, name))
    out["tlsMode"] = broker.tls.mode.name.lower() if hasattr(broker.tls.mode, "name") else str(broker.tls.mode)
    return dict(sorted(out.items()))


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return " ".join(map(str, value))
    return str(value)

# RocketMQ keys that load without error but change nothing here (said in a warning)
IGNORED_ROCKETMQ_KEYS = frozenset({
    "brokerIP2", "brokerPermission", "sendMessageThreadPoolNums",
    "pullMessageThreadPoolNums", "useReentrantLockWhenPutMessage",
    "autoCreateSubscriptionGroup", "rejectTransactionMessage", "enableDLegerCommitLog",
    "storePathCommitLog", "storePathConsumeQueue", "storePathIndex", "storeCheckpoint", "abortFile",
    "fetchNamesrvAddrByAddressServer", "osPageCacheBusyTimeOutMills", "flushConsumerOffsetInterval",
    "maxTransferCountOnMessageInMemory", "maxTransferBytesOnMessageInMemory", "longPollingEnable",
    "enablePropertyFilter", "isEnableBatchPush", "clusterTopicEnable", "brokerTopicEnable",
    "duplicationEnable", "mappedFileSizeTimerLog", "timerPrecisionMs",
})


def _broker_fields() -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(BrokerSettings)}


def known_keys() -> set[str]:
    return (set(_BROKER_KEYS) | set(_SERVER_KEYS) | set(_TLS_KEYS) | set(StoreConfig.ROCKETMQ_KEYS)
            | {f.name for f in dataclasses.fields(StoreConfig)} | IGNORED_ROCKETMQ_KEYS)


def read_properties(path: Path) -> list[tuple[str, str, str]]:
    """(key, value, where) for each entry of a Java properties file."""
    out, pending, start = [], "", 0
    for n, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if not pending:
            start = n
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            raise ConfigError(f"{path}:{start}: expected key=value, got {line!r}")
        out.append((line[:cut].strip(), line[cut + 1:].strip(), f"{path}:{start}"))
    return out


def read_toml(path: Path) -> list[tuple[str, object, str]]:
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    out: list[tuple[str, object, str]] = []

    def walk(table: Mapping, prefix: str) -> None:
        for key, value in table.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}[{key}] ")
            else:
                out.append((key, value, f"{path}: {prefix}{key}"))
    walk(data, "")
    return out


def read_file(path: Path) -> list[tuple[str, object, str]]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    return read_toml(path) if path.suffix == ".toml" else read_properties(path)


def read_env(environ: Mapping[str, str], *, client_keys: bool = True) -> list[tuple[str, object, str]]:
    """Entries from ROCKETQ_<key> variables; the client commands' variables (CLIENT_ENV_KEYS) become
    their server key with *client_keys*, and are skipped without it (``serve`` has its own NameServer)."""
    by_lower = {k.lower(): k for k in known_keys()}
    aliases, out = [], []
    for name, value in environ.items():
        if name.upper() in CLIENT_ENV_KEYS:
            if client_keys:
                aliases.append((CLIENT_ENV_KEYS[name.upper()], value, f"environment {name}"))
        elif name.upper().startswith(ENV_PREFIX) and not name.upper().startswith(ENV_PREFIX + "TEST_"):
            raw = name[len(ENV_PREFIX):]
            out.append((by_lower.get(raw.lower(), raw), value, f"environment {name}"))
    return aliases + out


def build(entries: list[tuple[str, object, str]]) -> ServerConfig:
    """Fold (key, value, where) entries, later ones winning, into a validated ServerConfig."""
    known, broker_types = known_keys(), _broker_fields()
    broker_kw: dict = {}
    server_kw: dict = {}
    store_props: dict[str, object] = {}
    tls_kw: dict[str, object] = {}
    warnings: list[str] = []
    errors: list[str] = []
    for key, value, where in entries:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            errors.append(f"{where}: unknown key {key!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
            continue
        try:
            if key in _BROKER_KEYS:
                name, conv = _BROKER_KEYS[key]
                v = _coerce(broker_types[name].replace(" | None", ""), value)
                broker_kw[name] = conv[1](v) if conv else v
            elif key in _TLS_KEYS:
                tls_kw[_TLS_KEYS[key]] = TlsMode.parse(value) if _TLS_KEYS[key] == "mode" else str(value)
            elif key in _SERVER_KEYS:
                server_kw[_SERVER_KEYS[key]] = int(value)
            elif key in IGNORED_ROCKETMQ_KEYS:
                warnings.append(f"{where}: {key} is a RocketMQ setting rocketq does not use; ignored")
            else:
                store_props[key] = value
        except (ValueError, TypeError) as exc:
            errors.append(f"{where}: {key}: {exc}")
    try:
        store, _ = StoreConfig.from_rocketmq(store_props)
    except (ValueError, TypeError) as exc:
        errors.append(f"store settings: {exc}")
    if errors:
        raise ConfigError("; ".join(errors))
    try:
        broker = BrokerSettings(**broker_kw, tls=TlsServerConfig(**tls_kw))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"broker settings: {exc}") from None
    return ServerConfig(broker=broker, store=store, warnings=tuple(warnings), **server_kw)


def load(path: Path | None = None, *, environ: Mapping[str, str] | None = None,
         overrides: Mapping[str, object] | None = None) -> ServerConfig:
    """The configuration from *path* (optional), ``ROCKETQ_*`` variables of *environ* and *overrides*
    (flags, by RocketMQ key name; None values are skipped)."""
    entries = list(read_file(path)) if path is not None else []
    entries += read_env(environ or {})
    entries += [(k, v, f"option {k}") for k, v in (overrides or {}).items() if v is not None]
    return build(entries)
