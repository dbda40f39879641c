"""Pulsar's broker.conf / standalone.conf: key=value lines, # comments, blank values allowed.
serve reads the keys it acts on and names the others once as ignored."""
from __future__ import annotations

from pulsarctl.config import BROKER_DEFAULTS, coerce_setting
from pulsarctl.errors import InvalidValue

PORTS = ("brokerServicePort", "brokerServicePortTls", "webServicePort", "webServicePortTls")
INTS = PORTS + ("maxMessageSize", "tokenAllowedClockSkewSeconds", "keepAliveIntervalSeconds",
                "maxPendingSendRequests", "managedLedgerCacheSizeMB")
BOOLS = ("tlsEnabled", "tlsRequireTrustedClientCertOnConnect", "tlsAllowInsecureConnection",
         "authenticationEnabled", "authorizationEnabled")
LISTS = ("authenticationProviders", "superUserRoles", "advertisedListeners")
STRINGS = ("bindAddress", "advertisedAddress", "tlsCertificateFilePath", "tlsKeyFilePath", "tlsTrustCertsFilePath",
           "tokenSecretKey", "tokenPublicKey", "tokenPublicAlg", "tokenAuthClaim",
           "anonymousUserRole", "basicAuthConf", "clusterName")
USED = INTS + BOOLS + LISTS + STRINGS
# The store's dynamic settings (brokers update-dynamic-config) given in the file are the
# defaults serve runs with, under values["dynamic"]; the store's own values still win.
DYNAMIC = tuple(BROKER_DEFAULTS)


def read(path: str) -> tuple[dict, list[str]]:
    """(the used keys' values, the other keys in file order)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise InvalidValue(f"cannot read config file {path}: {exc.strerror}",
                           hint="pass a standalone.conf / broker.conf with --config FILE") from None
    values: dict = {}
    ignored: list[str] = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(" ")
        key, value = key.strip(), value.strip()
        if key in DYNAMIC and value != "":
            try:
                values.setdefault("dynamic", {})[key] = coerce_setting(key, value)
            except InvalidValue as exc:
                raise InvalidValue(f"{path}:{n}: {exc.message}") from None
        if key not in USED:
            if key not in DYNAMIC and key not in ignored:
                ignored.append(key)
            continue
        if value == "":
            continue
        values[key] = _value(path, n, key, value)
    return values, ignored


def _value(path: str, n: int, key: str, value: str):
    if key in INTS:
        try:
            v = int(value)
        except ValueError:
            raise InvalidValue(f"{path}:{n}: {key} must be a whole number, not {value!r}") from None
        if v < 0 or (key in PORTS and v > 65535):
            raise InvalidValue(f"{path}:{n}: {key} {value} is out of range")
        return v
    if key in BOOLS:
        if value.lower() not in ("true", "false"):
            raise InvalidValue(f"{path}:{n}: {key} must be true or false, not {value!r}")
        return value.lower() == "true"
    if key in LISTS:
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return value
