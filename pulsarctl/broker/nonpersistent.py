"""Non-persistent topics (non-persistent://...): their messages never touch the disk. They
live in a second LMDB environment on tmpfs (/dev/shm), one per store, so they are gone when the
machine restarts, and they reach only consumers attached when they are published: a
subscription starts at the newest message, and one that has no consumer left when a consumer
attaches starts over from the newest message (Pulsar drops what arrives while nobody listens).

The Broker routes every call naming a non-persistent topic to a Broker over that environment
(Broker.owner_of, and `routed` below on each method that takes topics); the rest of the semantics (all subscription types, acks, nacks,
stats) are the persistent ones."""
from __future__ import annotations

import functools
import os

from pulsarctl.errors import InvalidValue
from pulsarctl.names import TopicName, parse_topic

SHM = "/dev/shm"


def path_for(store: str) -> str:
    """Where the store's non-persistent topics live: tmpfs, keyed by the store's real path."""
    import hashlib  # lazy, as tempfile: only a call naming a non-persistent topic needs them
    import tempfile  # lazy: one-shot produce never needs it

    base = SHM if os.path.isdir(SHM) and os.access(SHM, os.W_OK) else tempfile.gettempdir()
    digest = hashlib.sha1(os.path.realpath(store).encode()).hexdigest()[:16]
    return os.path.join(base, f"pulsarctl-{os.getuid()}", digest)


def _np(name) -> bool | None:
    if isinstance(name, TopicName):
        return not name.persistent
    if isinstance(name, str):
        return name.startswith("non-persistent://")
    return None


def is_non_persistent(names) -> bool:
    """Whether a call names non-persistent topics (all of them; a mix is refused)."""
    one = _np(names)
    if one is not None:
        return one
    try:
        flags = {bool(_np(n)) for n in names}
    except TypeError:
        return False
    if len(flags) > 1:
        raise InvalidValue("persistent and non-persistent topics cannot be used together",
                           hint="give one kind of topic per command")
    return flags == {True}


def check_domain(topic) -> TopicName:
    return topic if isinstance(topic, TopicName) else parse_topic(topic)


def routed(method):
    """Decorates, in its class body, each Broker or admin-noun method whose first argument
    names topics: the one step that runs it on the Broker owning them (Broker.owner_of), the
    store's own or the one over its non-persistent topics."""
    @functools.wraps(method)
    def wrapper(self, names, *args, **kwargs):
        broker = self._broker
        owner = broker.owner_of(names)
        if owner is not broker:
            self = self._on(owner)
        return method(self, names, *args, **kwargs)
    return wrapper
