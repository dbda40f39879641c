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


# -- contexts: where commands go (the local store, or a remote Pulsar) ---------------------------
# As StreamNative pulsarctl's contexts and Pulsar's client.conf: a name for a service URL (the
# binary protocol), an admin URL (the REST API) and how to authenticate. They live in
# $XDG_CONFIG_HOME/pulsarctl/contexts.toml, written 0600 (it holds tokens); `local` is the
# store and is not in the file.
ENV_SERVICE_URL = "PULSAR_SERVICE_URL"
ENV_ADMIN_URL = "PULSAR_ADMIN_URL"
LOCAL = "local"
# The fields of a context as the file and `context set` name them (client.conf's names in
# the comments), and which of them are secrets: never printed, only said to be set.
CONTEXT_FIELDS = (
    "service-url",            # brokerServiceUrl
    "admin-url",              # webServiceUrl
    "auth-plugin",            # authPlugin
    "auth-params",            # authParams
    "token",                  # authPlugin AuthenticationToken, authParams token:...
    "token-file",             # authParams file:///...
    "tls-trust-certs-file",   # tlsTrustCertsFilePath
    "tls-allow-insecure",     # tlsAllowInsecureConnection
    "tls-cert-file",          # authPlugin AuthenticationTls: tlsCertFile
    "tls-key-file",           # and tlsKeyFile
)
SECRET_FIELDS = ("token", "auth-params")
_BOOL_FIELDS = ("tls-allow-insecure",)


class Context:
    """A resolved target: a context's fields (CONTEXT_FIELDS), its name, and what chose it
    (`--context`, `--service-url`, PULSAR_SERVICE_URL, the current context of the file)."""

    def __init__(self, name: str, fields: dict, source: str):
        self.name = name
        self.fields = {k: v for k, v in fields.items() if v not in (None, "")}
        self.source = source

    def get(self, field: str):
        return self.fields.get(field)

    @property
    def service_url(self) -> str | None:
        return self.fields.get("service-url")

    @property
    def admin_url(self) -> str | None:
        return self.fields.get("admin-url")

    def auth_kind(self) -> str:
        """How it authenticates, in words that hold no secret."""
        f = self.fields
        if f.get("token") or f.get("token-file"):
            return "token" + (f" from {f['token-file']}" if f.get("token-file") else "")
        if f.get("auth-plugin"):
            return f["auth-plugin"]
        if f.get("tls-cert-file"):
            return "tls client certificate"
        return "none"

    def shown(self) -> dict:
        """The context as `context list|current` print it: secrets replaced by "(set)"."""
        doc = {"name": self.name}
        for k in CONTEXT_FIELDS:
            if k in self.fields:
                doc[k] = "(set)" if k in SECRET_FIELDS else self.fields[k]
        doc["auth"] = self.auth_kind()
        return doc


def contexts_path() -> str:
    return os.path.join(os.path.dirname(config_path()), "contexts.toml")


def read_contexts(path: str | None = None) -> dict:
    """{"current": name or None, "contexts": {name: {field: value}}} of the contexts file
    (empty when there is none)."""
    path = path or contexts_path()
    doc = read_config_file(path)
    contexts = doc.get("contexts") or {}
    if not isinstance(contexts, dict) or not all(isinstance(v, dict) for v in contexts.values()):
        raise InvalidValue(f"contexts file {path}: [contexts.NAME] tables expected",
                           hint="fix the file, or remove it and set the contexts again")
    current = doc.get("current")
    return {"current": current if isinstance(current, str) else None,
            "contexts": {str(k): dict(v) for k, v in contexts.items()}}


def _toml_string(value: str) -> str:
    # JSON's string escapes (\" \\ \n \uXXXX) are TOML basic-string escapes too.
    import json  # lazy: only `context set|use|delete` write the file

    return json.dumps(value, ensure_ascii=False)


def write_contexts(doc: dict, path: str | None = None) -> None:
    """Write the contexts file atomically (a temporary file renamed over it), mode 0600 in a
    0700 directory: it may hold tokens."""
    path = path or contexts_path()
    lines = ["# pulsarctl contexts (`pulsarctl context set|use|delete`); mode 0600: it may "
             "hold secrets", ""]
    if doc.get("current"):
        lines += [f"current = {_toml_string(doc['current'])}", ""]
    for name, fields in sorted(doc.get("contexts", {}).items()):
        lines.append(f"[contexts.{_toml_string(name)}]")
        for k in CONTEXT_FIELDS:
            v = fields.get(k)
            if v is None or v == "":
                continue
            lines.append(f"{k} = {'true' if v is True else 'false' if v is False else _toml_string(str(v))}")
        lines.append("")
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_context_fields(fields: dict) -> dict:
    """The fields as stored: URLs checked, booleans as booleans; unknown names refused."""
    out = {}
    for k, v in fields.items():
        if k not in CONTEXT_FIELDS:
            raise InvalidValue(f"unknown context field {k!r}",
                               hint=f"use one of {', '.join(CONTEXT_FIELDS)}")
        if v is None:
            continue
        if k in _BOOL_FIELDS:
            if not isinstance(v, bool):
                raise InvalidValue(f"context field {k} takes true or false, not {v!r}")
        elif not isinstance(v, str):
            raise InvalidValue(f"context field {k} takes text, not {v!r}")
        out[k] = v
    url = out.get("service-url")
    if url and not url.startswith(("pulsar://", "pulsar+ssl://")):
        raise InvalidValue(f"invalid service URL {url!r}",
                           hint="give pulsar://HOST:PORT or pulsar+ssl://HOST:PORT")
    url = out.get("admin-url")
    if url and not url.startswith(("http://", "https://")):
        raise InvalidValue(f"invalid admin URL {url!r}",
                           hint="give http://HOST:PORT or https://HOST:PORT")
    if out.get("token") and out.get("token-file"):
        raise InvalidValue("give --token or --token-file, not both")
    if bool(out.get("tls-cert-file")) != bool(out.get("tls-key-file")):
        raise InvalidValue("a TLS client certificate needs both --tls-cert-file and "
                           "--tls-key-file")
    return out


def check_context_name(name: str) -> str:
    if not name or name != name.strip() or any(c in name for c in "\"'\\/[]") or \
            any(ord(c) < 32 for c in name):
        raise InvalidValue(f"invalid context name {name!r}",
                           hint="use letters, digits, -, _ and ., e.g. prod or staging-eu")
    return name


def resolve_target(store: str | None = None, context: str | None = None,
                   flags: dict | None = None) -> Context | None:
    """The target of a command, None for the local store. In order: `--context NAME`;
    `--service-url`/`--admin-url`; `--store` (the local store); $PULSAR_SERVICE_URL /
    $PULSAR_ADMIN_URL; $PULSARCTL_STORE (the local store); the current context of the contexts
    file; else the local store. Auth flags (--token, ...) given on the command line override
    the chosen remote target's; with the local store they are refused."""
    flags = {k: v for k, v in (flags or {}).items() if v not in (None, False, "")}
    urls = {k: flags.pop(k) for k in ("service-url", "admin-url") if k in flags}
    auth = flags

    def local():
        if auth or urls:
            given = ", ".join("--" + k for k in sorted({**urls, **auth}))
            raise InvalidValue(f"{given}: the target is the local store",
                               hint="give --service-url and --admin-url, or --context NAME, "
                                    "for a remote Pulsar")
        return None

    if context is not None:
        check_context_name(context)
        if context == LOCAL:
            return local()
        saved = read_contexts()["contexts"].get(context)
        if saved is None:
            # lazy: errors.py is a leaf module, loaded already; named here for the reader
            from pulsarctl.errors import NotFound

            raise NotFound(f"context {context!r} not found",
                           hint="list them with `pulsarctl context list`; set one with "
                                "`pulsarctl context set NAME --service-url ... --admin-url ...`")
        return Context(context, check_context_fields({**saved, **urls, **auth}), "--context")
    if urls:
        if store:
            raise InvalidValue("--store names a local store, --service-url/--admin-url a "
                               "remote one: give one of them")
        return Context("(flags)", check_context_fields({**urls, **auth}),
                       "--service-url/--admin-url")
    if store:
        return local()
    env = {k: os.environ.get(v) for k, v in (("service-url", ENV_SERVICE_URL),
                                             ("admin-url", ENV_ADMIN_URL)) if os.environ.get(v)}
    if env:
        return Context("(environment)", check_context_fields({**env, **auth}),
                       f"{ENV_SERVICE_URL}/{ENV_ADMIN_URL}")
    if os.environ.get(ENV_STORE):
        return local()
    path = contexts_path()
    doc = read_contexts(path) if os.path.exists(path) else {"current": None}
    current = doc["current"]
    if not current or current == LOCAL:
        return local()
    saved = doc["contexts"].get(current)
    if saved is None:
        raise InvalidValue(f"the current context {current!r} is not in {path}",
                           hint="choose one with `pulsarctl context use NAME` (or `local`)")
    return Context(current, check_context_fields({**saved, **auth}),
                   f"the current context ({path})")
