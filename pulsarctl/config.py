"""Where the store is, and the store-wide settings named after Pulsar's broker.conf."""
from __future__ import annotations

import os

from pulsarctl.errors import InvalidValue
from pulsarctl.units import parse_duration_ms

ENV_STORE = "PULSARCTL_STORE"


def config_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "pulsarctl", "config.toml")


def default_store() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "pulsarctl", "store")


def read_config_file(path: str | None = None) -> dict:
    path = path or config_path()
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InvalidValue(f"cannot read config file {path}: {exc.strerror}") from None
    import tomllib  # only when a config file exists

    try:
        return tomllib.loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidValue(f"config file {path} is not valid TOML: {exc}",
                           hint="fix or remove the file") from None


def resolve_store(cli_value: str | None = None) -> str:
    """--store > $PULSARCTL_STORE > config file key `store` > $XDG_DATA_HOME/pulsarctl/store."""
    return resolve_store_source(cli_value)[0]


def resolve_store_source(cli_value: str | None = None) -> tuple[str, str]:
    """The store's path and the setting that chose it: "--store", "PULSARCTL_STORE", "config
    file <path>" or "default" (what `doctor` shows)."""
    if cli_value:
        return os.path.expanduser(cli_value), "--store"
    env = os.environ.get(ENV_STORE)
    if env:
        return os.path.expanduser(env), ENV_STORE
    store = read_config_file().get("store")
    if store:
        if not isinstance(store, str):
            raise InvalidValue(f"config file {config_path()}: `store` must be a string")
        return os.path.expanduser(store), f"config file {config_path()}"
    return default_store(), "default"


# Store-wide dynamic settings (pulsar-admin brokers update-dynamic-config), with defaults and
# the type each takes. Later issues add their settings here.
# Pulsar's SchemaCompatibilityStrategy values (broker/schema_compat.py applies them).
SCHEMA_STRATEGIES = ("ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
                     "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE")
BROKER_DEFAULTS: dict[str, object] = {
    "maxMessageSize": 5 * 1024 * 1024,
    "managedLedgerMaxEntriesPerLedger": 50_000,
    "acknowledgmentAtBatchIndexLevelEnabled": False,
    "delayedDeliveryTickTimeMillis": 1000,
    "brokerDeduplicationEnabled": False,
    "delayedDeliveryEnabled": True,
    "ttlDurationDefaultInSeconds": 0,
    "defaultRetentionTimeInMinutes": 0,
    "defaultRetentionSizeInMB": 0,
    "maxUnackedMessagesPerConsumer": 50_000,
    "maxUnackedMessagesPerSubscription": 200_000,
    "allowAutoTopicCreation": True,
    "allowAutoSubscriptionCreation": True,
    "defaultNumPartitions": 1,
    "receiverQueueSize": 1000,
    "dispatcherMaxRoundRobinBatchSize": 20,
    # TDMQ's MESSAGE_DELAYLEVEL: reconsume-later --delay-level N waits level N (1-based).
    "messageDelayLevel": "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
    # How a new schema version must relate to the ones before it (broker/schemas.py).
    "schemaCompatibilityStrategy": "FULL",
    "isAllowAutoUpdateSchema": True,
    # The message history behind `explain` (broker/history.py): recorded at all, and how long
    # a trimmed message's history is kept (or the topic's retention time, if longer).
    "messageHistoryEnabled": True,
    "messageHistoryRetention": "7d",
}


def coerce_setting(name: str, value: str):
    if name not in BROKER_DEFAULTS:
        raise InvalidValue(f"unknown dynamic config '{name}'",
                           hint="list them with `pulsarctl brokers get-all-dynamic-config`")
    default = BROKER_DEFAULTS[name]
    if isinstance(default, bool):
        v = str(value).strip().lower()
        if v not in ("true", "false"):
            raise InvalidValue(f"{name} takes true or false, not {value!r}")
        return v == "true"
    if isinstance(default, int):
        try:
            n = int(str(value).strip())
        except ValueError:
            raise InvalidValue(f"{name} takes a whole number, not {value!r}") from None
        if (n < 0 and not (name.startswith("defaultRetention") and n == -1)) or (name in ("maxMessageSize", "managedLedgerMaxEntriesPerLedger",
                               "receiverQueueSize", "dispatcherMaxRoundRobinBatchSize") and n < 1):
            raise InvalidValue(f"{name} must be positive, not {value!r}")
        return n
    if name == "messageDelayLevel":
        levels = str(value).split()
        if not levels:
            raise InvalidValue("messageDelayLevel needs at least one duration",
                               hint='e.g. "1s 5s 10s 30s 1m"')
        for level in levels:
            parse_duration_ms(level, "delay level")
        return " ".join(levels)
    if name == "messageHistoryRetention":
        parse_duration_ms(str(value).strip(), name)
        return str(value).strip()
    if name == "schemaCompatibilityStrategy":
        v = str(value).strip().upper()
        if v not in SCHEMA_STRATEGIES:
            raise InvalidValue(f"unknown schema compatibility strategy {value!r}",
                               hint=f"use one of {', '.join(SCHEMA_STRATEGIES)}")
        return v
    return value
