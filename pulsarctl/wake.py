"""Waking waiting consumers across processes: a command that makes messages deliverable
(a publish, a nack, a fired timer, a disconnected consumer) touches the file `wake` in the store
directory, and a consumer waiting for messages is woken by that (inotify, or the file's
modification time where inotify is missing: wake_events.py), so it fetches at once instead of at
its next poll (up to 100 ms later). Only a hint: a consumer that misses one still polls, so
nothing depends on it."""
from __future__ import annotations

import functools
import os

from pulsarctl import wake_events

NAME = wake_events.NAME
SLICE_S = wake_events.POLL_S   # how often a Waiter without inotify looks at the file


def notify(store: str) -> None:
    path = os.path.join(store, NAME)
    try:
        os.utime(path)
    except FileNotFoundError:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError:
            pass
    except OSError:
        pass  # a read-only store: nobody can publish there anyway


def wakes(fn):
    """Decorates a call that makes messages deliverable: after its transaction commits, wake
    the consumers waiting on the store (unless nothing happened: a count of 0). Its first
    argument is the Broker, or an admin noun holding one."""
    @functools.wraps(fn)
    def wrapper(owner, *args, **kwargs):
        result = fn(owner, *args, **kwargs)
        # a count by kind ({"nack": 0, ...}: the daemon's tick) wakes only when one fired
        if any(result.values()) if isinstance(result, dict) else (
                result != 0 or isinstance(result, bool)):
            notify(getattr(owner, "_broker", owner).wake_path)
        return result
    return wrapper


class Waiter:
    """Waits for a notify() on a store: from its creation on, so a notify between creating it
    and sleeping is not missed. Sleeps on inotify where it can (wake_events.py: the kernel wakes
    it, nothing polls), else looks at the file's stamp every SLICE_S."""

    def __init__(self, store: str):
        self.path = os.path.join(store, NAME)
        self.seen = self._stamp()
        self._watch = wake_events.watch(store)

    def _stamp(self):
        try:
            st = os.stat(self.path)
            return st.st_mtime_ns, st.st_ino
        except OSError:
            return None

    def sleep(self, seconds: float) -> bool:
        """Sleep up to seconds (real time); True as soon as someone notified."""
        if self._watch.wait(seconds):
            self.seen = self._stamp()
            return True
        return False

    def close(self) -> None:
        """Releases the inotify descriptor now (else it goes with the Waiter)."""
        self._watch.close()
