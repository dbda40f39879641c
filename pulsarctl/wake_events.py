"""Events for the store's wake file (pulsarctl/wake.py): something to wait on that is ready when
the file is touched, so that a waiting consumer (a CLI consume, a client's receive, serve) sleeps
in the kernel instead of looking at the file every 5 ms.

On Linux it is inotify (the inotify_simple library) on the store directory, filtered to the wake
file. notify() touches the file with utime (IN_ATTRIB) or, the first time, creates it (IN_CREATE,
then IN_CLOSE_WRITE); IN_MOVED_TO covers a file renamed into place. The directory is watched, not
the file, so that a wake file created after the watch began (a fresh store), or removed and made
again, is still seen. IN_MODIFY is left out on purpose: LMDB's data.mdb beside it is written on
every commit, and those writes would wake every watcher for nothing (the wake file itself is
never written to, only touched).

Where inotify is missing (not Linux, the library absent, inotify_init1 or inotify_add_watch
refused: out of instances or watches, no such directory) the same interface looks at the file's
stamp (modification time, inode) every 5 ms, as pulsarctl always did.

One interface, for both:
- fileno(): the descriptor that becomes readable on a change (None for the stamp fallback);
- changed(): True when the file changed since the last call (never blocks; consumes the events);
- wait(timeout): block up to timeout seconds (None: forever) for a change, True if one came;
- attach(loop, callback): call callback() on the asyncio loop at each change; detach() stops
  that and releases the descriptor (the watch is done after detach() or close())."""
from __future__ import annotations

import math
import os
import select

from pulsarctl import clock as clocks

NAME = "wake"          # the file's name in the store directory
POLL_S = 0.005         # how often the stamp fallback looks at the file

# The fallback is forced where this is False (tests of it; a file system inotify does not see).
USE_INOTIFY = True


def watch(store: str, *, inotify: bool | None = None) -> "InotifyWatch | StampWatch":
    """A watch of store's wake file, started now: a change after this call is reported even if
    the waiting starts later. inotify where it works, else the stamp fallback."""
    if USE_INOTIFY if inotify is None else inotify:
        try:
            return InotifyWatch(store)
        except (ImportError, OSError, AttributeError):
            # ImportError: not on this platform; AttributeError: a libc without inotify_init1;
            # OSError: EMFILE (max_user_instances), ENOSPC (max_user_watches), ENOENT.
            pass
    return StampWatch(store)


class InotifyWatch:
    """inotify on the store directory, reporting the wake file's IN_ATTRIB / IN_CREATE /
    IN_CLOSE_WRITE / IN_MOVED_TO. Raises OSError (or ImportError) where inotify cannot be had."""

    def __init__(self, store: str):
        # lazy: Linux only (ImportError elsewhere), and ctypes only for a consumer that waits
        from inotify_simple import INotify, flags

        self._flags = flags
        self._mask = flags.ATTRIB | flags.CREATE | flags.CLOSE_WRITE | flags.MOVED_TO
        self._inotify = INotify(nonblocking=True)
        try:
            self._inotify.add_watch(store, self._mask | flags.ONLYDIR)
        except BaseException:
            self._inotify.close()
            raise
        self._poller = select.poll()
        self._poller.register(self._inotify.fileno(), select.POLLIN)
        self._loop = None

    def fileno(self) -> int | None:
        return None if self._inotify.closed else self._inotify.fileno()

    def changed(self) -> bool:
        if self._inotify.closed:
            return False
        f = self._flags
        hit = False
        for ev in self._inotify.read(timeout=0):
            if ev.mask & (f.Q_OVERFLOW | f.IGNORED):
                hit = True   # events were lost, or the directory went: say so, never miss one
            elif ev.name == NAME and ev.mask & self._mask:
                hit = True
        return hit

    def wait(self, timeout: float | None) -> bool:
        end = None if timeout is None else clocks.monotonic() + timeout
        while True:
            if self.changed():
                return True
            if end is None:
                ms = None
            else:
                left = end - clocks.monotonic()
                if left <= 0:
                    return False
                ms = max(1, math.ceil(left * 1000))   # poll() counts whole milliseconds
            if self._inotify.closed:
                return False
            self._poller.poll(ms)

    def attach(self, loop, callback) -> None:
        def ready():
            if self.changed():
                callback()
        self._loop = loop
        loop.add_reader(self._inotify.fileno(), ready)

    def detach(self) -> None:
        if self._inotify.closed:
            return
        if self._loop is not None:
            self._loop.remove_reader(self._inotify.fileno())
            self._loop = None
        self._inotify.close()   # closing the inotify descriptor drops its watch with it

    close = detach

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()

    def __del__(self):
        # A watch dropped without close() (a Waiter going out of scope) still frees its
        # descriptor, without the unclosed-file warning FileIO would give.
        inotify = getattr(self, "_inotify", None)
        if inotify is not None and not inotify.closed and self._loop is None:
            inotify.close()


class StampWatch:
    """The fallback: the wake file's (modification time, inode), looked at every POLL_S."""

    def __init__(self, store: str):
        self.path = os.path.join(store, NAME)
        self.seen = self.stamp()
        self._handle = None
        self._closed = False

    def stamp(self):
        try:
            st = os.stat(self.path)
            return st.st_mtime_ns, st.st_ino
        except OSError:
            return None

    def fileno(self) -> int | None:
        return None

    def changed(self) -> bool:
        if self._closed:
            return False
        stamp = self.stamp()
        if stamp != self.seen:
            self.seen = stamp
            return True
        return False

    def wait(self, timeout: float | None) -> bool:
        end = None if timeout is None else clocks.monotonic() + timeout
        while True:
            if self.changed():
                return True
            if self._closed:
                return False
            if end is None:
                clocks.sleep(POLL_S)
                continue
            left = end - clocks.monotonic()
            if left <= 0:
                return False
            clocks.sleep(min(POLL_S, left))

    def attach(self, loop, callback) -> None:
        def tick():
            if self.changed():
                callback()
            if not self._closed:
                self._handle = loop.call_later(POLL_S, tick)
        self._handle = loop.call_later(POLL_S, tick)

    def detach(self) -> None:
        self._closed = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    close = detach

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()
