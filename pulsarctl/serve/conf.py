"""Pulsar's broker.conf / standalone.conf: key=value lines, # comments, blank values allowed.
serve reads the keys it acts on and names the others once as ignored."""
from __future__ import annotations

from pulsarctl.errors import InvalidValue

USED = ("brokerServicePort", "bindAddress", "maxMessageSize", "webServicePort",
        "keepAliveIntervalSeconds")
INTS = ("brokerServicePort", "maxMessageSize", "webServicePort", "keepAliveIntervalSeconds")
PORTS = ("brokerServicePort", "webServicePort")


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
        if key not in USED:
            if key not in ignored:
                ignored.append(key)
            continue
        if value == "":
            continue
        if key in INTS:
            try:
                values[key] = int(value)
            except ValueError:
                raise InvalidValue(f"{path}:{n}: {key} must be a whole number, not {value!r}") from None
            if values[key] < 0 or (key in PORTS and values[key] > 65535):
                raise InvalidValue(f"{path}:{n}: {key} {value} is out of range")
        else:
            values[key] = value
    return values, ignored
