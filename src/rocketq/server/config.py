"""Server configuration from a ``broker.conf`` / TOML file, the environment and flags.

Keys are RocketMQ's (``brokerClusterName``, ``listenPort``, ``flushDiskType``,
``storePathRootDir``, ``mapedFileSizeCommitLog`` ...), so a RocketMQ ``broker.conf`` carries over;
rocketq adds ``bindAddress``, ``namesrvListenPort``, ``grpcServerPort``, ``aclFile`` and ``tlsMode`` (short
for ``tls.server.mode``; the ``tls.*`` keys are RocketMQ's TlsSystemConfig names) (the RocketMQ proxy's
name) for the standalone server.  Later sources win::

    defaults  <  file (-c broker.conf | rocketq.toml)  <  saved  <  ROCKETQ_<key> environment  <  flags

(``saved``: ``<storePath>/config/broker.properties``, what ``rocketq broker config set`` wrote.)

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
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rocketq.broker.broker import BrokerSettings
from rocketq.remoting.limits import ConnectionLimits
from rocketq.broker.config_keys import BROKER_KEYS
from rocketq.broker.runtime_config import SAVED_CONFIG_FILE
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
    # consolePort (rocketq's): the web console; None = 8080 (a free port when listenPort is 0); -1 = off
    console_port: int | None = None
    warnings: tuple[str, ...] = ()


# RocketMQ / rocketq key -> (BrokerSettings field, converter from the coerced value): the broker's own table,
# which UPDATE_BROKER_CONFIG / GET_BROKER_CONFIG use too
_BROKER_KEYS = BROKER_KEYS
# TLS of the listening ports (RocketMQ's TlsSystemConfig names; tlsMode is short for tls.server.mode)
_TLS_KEYS = {"tlsMode": "mode", "tls.server.mode": "mode", "tls.server.certPath": "cert_path",
             "tls.server.keyPath": "key_path", "tls.server.trustCertPath": "trust_cert_path",
             "tls.server.need.client.auth": "need_client_auth"}
_SERVER_KEYS = {"namesrvListenPort": "namesrv_port", "grpcServerPort": "grpc_port", "consolePort": "console_port"}
# limits of every listening port (RocketMQ's NettyServerConfig names; serverMaxConnections and
# serverWriteStallTimeoutSeconds are rocketq's); a water mark of 0 is RocketMQ's "the default"
_LIMIT_KEYS = {"serverMaxConnections": ("max_connections", int),
               "serverChannelMaxIdleTimeSeconds": ("idle_timeout_s", float),
               "serverSocketBacklog": ("backlog", int),
               "writeBufferHighWaterMark": ("write_high_water_bytes", int),
               "writeBufferLowWaterMark": ("write_low_water_bytes", int),
               "serverWriteStallTimeoutSeconds": ("write_stall_timeout_s", float)}


# RocketMQ keys that load without error but change nothing here (said in a warning)
IGNORED_ROCKETMQ_KEYS = frozenset({
    "brokerIP2", "brokerPermission", "sendMessageThreadPoolNums",
    "pullMessageThreadPoolNums", "useReentrantLockWhenPutMessage",
    "autoCreateSubscriptionGroup", "rejectTransactionMessage", "enableDLegerCommitLog",
    "storePathCommitLog", "storePathConsumeQueue", "storePathIndex", "storeCheckpoint", "abortFile",
    "fetchNamesrvAddrByAddressServer", "osPageCacheBusyTimeOutMills", "flushConsumerOffsetInterval",
    "maxTransferCountOnMessageInMemory", "maxTransferBytesOnMessageInMemory", "longPollingEnable",
    "isEnableBatchPush", "clusterTopicEnable", "brokerTopicEnable",
    "duplicationEnable", "mappedFileSizeTimerLog", "timerPrecisionMs",
    # ACL 2.0's pluggable parts: rocketq has the default provider and strategy only (rocketq.acl.setup)
    "authenticationProvider", "authorizationProvider", "authenticationStrategy", "authorizationStrategy",
    "authConfigPath", "userCacheMaxNum", "userCacheExpiredSecond", "userCacheRefreshSecond", "aclCacheMaxNum",
    "aclCacheExpiredSecond", "aclCacheRefreshSecond",
})


def _broker_fields() -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(BrokerSettings)}


def known_keys() -> set[str]:
    return (set(_BROKER_KEYS) | set(_SERVER_KEYS) | set(_TLS_KEYS) | set(_LIMIT_KEYS) | set(StoreConfig.ROCKETMQ_KEYS)
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


def saved_entries(entries: list[tuple[str, object, str]], default_store_path: str) -> list[tuple[str, object, str]]:
    """What ``rocketq broker config set`` (UPDATE_BROKER_CONFIG) saved under the store root the
    *entries* name (the last ``storePathRootDir``): loaded after the configuration file."""
    store = next((v for k, v, _ in reversed(entries) if k == "storePathRootDir" and v), default_store_path)
    path = Path(os.path.expanduser(str(store))) / SAVED_CONFIG_FILE
    return read_properties(path) if path.is_file() else []


def read_env(environ: Mapping[str, str], *, client_keys: bool = True) -> list[tuple[str, object, str]]:
    """Entries from ROCKETQ_<key> variables; the client commands' variables (CLIENT_ENV_KEYS) become
    their server key with *client_keys*, and are skipped without it (``serve`` has its own NameServer);
    the clients' credential, TLS and profile variables are always skipped."""
    from rocketq.client.access import CLIENT_ENV_VARS      # the client commands' credentials, TLS, profile
    by_lower = {k.lower(): k for k in known_keys()}
    aliases, out = [], []
    for name, value in environ.items():
        if name.upper() in CLIENT_ENV_VARS - CLIENT_ENV_KEYS.keys():
            continue                  # ROCKETQ_ACCESS_KEY & co. belong to the clients, not to a server
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
    limits_kw: dict[str, object] = {}
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
            elif key in _LIMIT_KEYS:
                name, conv = _LIMIT_KEYS[key]
                if not (name.startswith("write_") and name.endswith("_bytes") and conv(value) == 0):
                    limits_kw[name] = conv(value)
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
        broker = BrokerSettings(**broker_kw, tls=TlsServerConfig(**tls_kw), limits=ConnectionLimits(**limits_kw))
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
