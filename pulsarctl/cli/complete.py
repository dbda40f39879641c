"""`pulsarctl __complete [--store PATH] topics | subscriptions TOPIC | dlqs`: names from the
store, one per line, for the shell completion scripts (completions/, made by docgen.py).

A completion runs at every TAB, inside the user's command line, so this command:
- never creates anything: a missing store (or directory) gives no names, and the store is
  opened read-only;
- never prints an error: any failure prints nothing and exits 0;
- stays light: entry.py routes here before typer or rich are imported.

Topic names are offered as users type them: `orders` for persistent://public/default/orders,
`tenant/ns/t` for other namespaces; a partitioned topic by its own name, not its partitions.
Hidden: it is not part of the documented command line (CLI.md), only of the scripts.
"""
from __future__ import annotations

import os
import re

NAME = "__complete"
KINDS = ("topics", "subscriptions", "dlqs")
_DEFAULT_NS = "persistent://public/default/"
_PARTITION = re.compile(r"^(.*)-partition-\d+$")


def short(topic: str) -> str:
    """A full topic name as a user types it."""
    if topic.startswith(_DEFAULT_NS):
        return topic[len(_DEFAULT_NS):]
    if topic.startswith("persistent://"):
        return topic[len("persistent://"):]
    return topic


def _parse(argv: list[str]):
    """(store, kind, rest) or None."""
    store = None
    args = list(argv)
    while args and args[0].startswith("--store"):
        flag, eq, value = args[0].partition("=")
        if flag != "--store":
            return None
        if eq:
            store, args = value, args[1:]
        elif len(args) > 1:
            store, args = args[1], args[2:]
        else:
            return None
    if not args or args[0] not in KINDS:
        return None
    return store, args[0], args[1:]


def _open(store: str | None):
    """The store's Broker, read-only, or None when there is no store there."""
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.config import resolve_store

    path = resolve_store(store)
    if not os.path.isfile(os.path.join(path, "data.mdb")):
        return None  # never create a store by completing
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.broker import Broker

    return Broker(path, readonly=True, create=False)


def _topics(broker) -> list[str]:
    names: list[str] = []
    for tenant in broker.tenants.list():
        for ns in broker.namespaces.list(tenant):
            partitioned = broker.topics.list_partitioned(ns)
            for t in broker.topics.list(ns) + partitioned:
                m = _PARTITION.match(t)
                if m and m.group(1) in partitioned:
                    continue
                if t not in names:
                    names.append(t)
    return sorted(short(t) for t in names)


def _dlqs(broker) -> list[str]:
    return sorted({short(r["topic"]) for r in broker.dlqs()})


def names(argv: list[str]) -> list[str]:
    parsed = _parse(argv)
    if parsed is None:
        return []
    store, kind, rest = parsed
    if kind == "subscriptions" and len(rest) != 1:
        return []
    if kind != "subscriptions" and rest:
        return []
    broker = _open(store)
    if broker is None:
        return []
    try:
        if kind == "topics":
            return _topics(broker)
        if kind == "dlqs":
            return _dlqs(broker)
        return list(broker.topics.subscriptions(rest[0]))
    finally:
        broker.close()


def main(argv: list[str]) -> int:
    """Print the names; exit 0 whatever happens (a completion must not disturb the line)."""
    try:
        found = names(argv)
    except BaseException:  # noqa: BLE001 - nothing may reach the user's command line
        return 0
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli import render

    try:
        for name in found:
            if name and "\n" not in name:
                render.outln(render.safe(name))
        render.flush()
    except BaseException:  # noqa: BLE001 - a closed pipe, say
        pass
    return 0
