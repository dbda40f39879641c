"""The wake file's event source (pulsarctl/wake_events.py): a publish through the Broker, which
touches the store's wake file, makes a watch of it ready, on inotify and on the stamp fallback
alike; nothing else does; a watch gives its descriptor back when detached; and a wake file
made after the watch began is seen too.

No test waits for time to pass: each waits for the event itself, with a generous bound
(PATIENCE_S), and a "nothing happened" check only looks at what is already there."""
from __future__ import annotations

import asyncio
import gc
import os

import pytest

from pulsarctl import wake, wake_events
from pulsarctl.messages import OutgoingMessage

from procs import PATIENCE_S, wait_for

BOTH = pytest.mark.parametrize("inotify", [True, False], ids=["inotify", "stamp"])


def _publish(broker, data=b"x"):
    broker.publish("t", [OutgoingMessage(data)])


def _publish_wakes(broker, w, inotify) -> bool:
    """A publish makes w fire. On inotify one publish must do; the stamp fallback cannot tell
    two touches within one tick of the file system's clock apart (same modification time), so
    there the publish is repeated until the stamp moves."""
    if inotify:
        _publish(broker)
        return w.wait(PATIENCE_S)

    def again():
        _publish(broker)
        return w.wait(0.02)
    return wait_for(again, "the wake file's stamp to change")


def _watch(store, inotify):
    w = wake_events.watch(store, inotify=inotify)
    # The kind asked for, or the test would pass on the other one.
    assert isinstance(w, wake_events.InotifyWatch if inotify else wake_events.StampWatch)
    return w


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@BOTH
def test_a_publish_makes_the_watch_fire(broker, inotify):
    _publish(broker, b"warm-up")   # the wake file exists from here on
    with _watch(broker.wake_path, inotify) as w:
        assert w.changed() is False
        assert _publish_wakes(broker, w, inotify) is True
        assert w.changed() is False   # that one is used up


@BOTH
def test_no_fire_without_a_notify(broker, inotify):
    _publish(broker, b"warm-up")
    with _watch(broker.wake_path, inotify) as w:
        # A write that wakes nobody (LMDB's data.mdb changes: IN_MODIFY beside the wake file).
        broker.topics.create("quiet")
        broker.subscribe("t", "s", "c", "Shared")
        # Other files of the store directory touched or made (the directory is what inotify
        # watches): none of them is the wake file.
        os.utime(os.path.join(broker.wake_path, "data.mdb"))
        with open(os.path.join(broker.wake_path, "not-wake"), "w") as f:
            f.write("x")
        assert w.wait(0) is False
        assert w.changed() is False
        assert _publish_wakes(broker, w, inotify) is True   # it still works after looking


def test_inotify_wait_sleeps_in_the_kernel_until_the_publish(broker):
    """A blocking wait ends on the publish made while it waits, from another thread."""
    _publish(broker, b"warm-up")
    import threading

    with _watch(broker.wake_path, True) as w:
        waiting = threading.Event()
        got = []

        def waiter():
            waiting.set()
            got.append(w.wait(PATIENCE_S))

        t = threading.Thread(target=waiter)
        t.start()
        assert waiting.wait(PATIENCE_S)
        _publish(broker)
        t.join(PATIENCE_S + 5)
        assert got == [True]


@BOTH
def test_a_wake_file_made_after_the_watch_began_is_seen(broker, inotify):
    path = os.path.join(broker.wake_path, wake.NAME)
    if os.path.exists(path):
        os.unlink(path)
    with _watch(broker.wake_path, inotify) as w:
        _publish(broker)   # notify() finds no file and creates it
        assert os.path.exists(path)
        assert w.wait(PATIENCE_S) is True


@BOTH
def test_attach_calls_back_on_the_loop_and_detach_closes_the_descriptor(broker, inotify):
    _publish(broker, b"warm-up")
    before = _fds()

    async def main():
        fired = asyncio.Event()
        w = _watch(broker.wake_path, inotify)
        fd = w.fileno()
        if inotify:
            assert str(fd) in _fds()
        w.attach(asyncio.get_running_loop(), fired.set)
        _publish(broker)
        if inotify:
            await asyncio.wait_for(fired.wait(), PATIENCE_S)
        else:   # a publish in the stamp's tick goes unseen (see _publish_wakes): again
            for _ in range(int(PATIENCE_S / 0.05)):
                try:
                    await asyncio.wait_for(fired.wait(), 0.05)
                    break
                except TimeoutError:
                    _publish(broker)
            assert fired.is_set()
        w.detach()
        w.detach()   # twice is harmless
        return fd

    fd = asyncio.run(main())
    assert _fds() == before
    if inotify:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_a_waiter_sleeps_on_inotify_and_gives_its_descriptor_back(broker):
    _publish(broker, b"warm-up")
    before = _fds()
    w = wake.Waiter(broker.wake_path)
    assert isinstance(w._watch, wake_events.InotifyWatch)
    assert w.sleep(0) is False
    _publish(broker)
    assert w.sleep(PATIENCE_S) is True
    w.close()
    assert _fds() == before
    # One dropped without close() (as client.py's are) frees its descriptor too.
    w = wake.Waiter(broker.wake_path)
    assert _fds() != before
    del w
    gc.collect()
    assert _fds() == before


def test_the_fallback_is_taken_where_inotify_cannot_be_had(tmp_path, monkeypatch):
    """inotify refused (EMFILE: out of instances; a missing directory) -> the stamp watch."""
    import inotify_simple

    def refused(*args, **kwargs):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(inotify_simple.INotify, "__init__", refused)
    w = wake_events.watch(str(tmp_path))
    assert isinstance(w, wake_events.StampWatch)
    wake.notify(str(tmp_path))
    assert w.wait(PATIENCE_S) is True
    monkeypatch.undo()
    assert isinstance(wake_events.watch(str(tmp_path / "none")), wake_events.StampWatch)
