"""The LMDB environment (store/env.py): format version, map growth, file modes, refusing paths
that are not stores, all-or-nothing writes and the shared per-process handle. Real LMDB in
tmp_path. (Only store/env.py may import lmdb among the package modules; a test may.)"""
from __future__ import annotations

import os
import stat

import lmdb
import pytest

from store import Env, FORMAT_VERSION, StoreError, StoreFormatError, StoreNotAStore, StoreNotFound
from store import StoreReadOnly, codec
from store import env as env_module


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "store")


def mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def set_format(path: str, value) -> None:
    """Rewrite the meta 'format' key through a raw lmdb handle (no Env open on path)."""
    raw = lmdb.open(path, max_dbs=20, subdir=True)
    try:
        meta = raw.open_db(b"meta")
        with raw.begin(write=True) as txn:
            if value is None:
                txn.delete(b"format", db=meta)
            else:
                txn.put(b"format", codec.encode(value), db=meta)
    finally:
        raw.close()


# -- format ----------------------------------------------------------------------------------
def test_format_version_is_written(path):
    e = Env(path)
    with e.read() as txn:
        assert e.get(txn, "meta", b"format") == FORMAT_VERSION
    e.close()
    # Read through a raw handle too: it is on disk, not only in memory.
    raw = lmdb.open(path, max_dbs=20, subdir=True, readonly=True)
    try:
        with raw.begin() as txn:
            meta = raw.open_db(b"meta", txn=txn)
            assert codec.decode(txn.get(b"format", db=meta)) == FORMAT_VERSION
    finally:
        raw.close()


def test_format_version_is_checked(path):
    Env(path).close()
    set_format(path, FORMAT_VERSION + 1)
    with pytest.raises(StoreFormatError) as ei:
        Env(path)
    assert str(FORMAT_VERSION + 1) in str(ei.value)
    assert path not in env_module._OPEN


def test_format_version_is_checked_read_only(path):
    Env(path).close()
    set_format(path, FORMAT_VERSION + 1)
    with pytest.raises(StoreFormatError):
        Env(path, readonly=True)


def test_a_refused_store_leaves_no_handle_open(path):
    """A failed open must close its LMDB handle: after the format is repaired (or another
    version of the tool is used) the same process can open the store."""
    Env(path).close()
    set_format(path, FORMAT_VERSION + 1)
    # The caller keeps the error (as a CLI error handler or a log does), and with it the
    # traceback: the handle must be closed by Env itself, not by garbage collection.
    with pytest.raises(StoreFormatError) as first:
        Env(path)
    with pytest.raises(StoreFormatError):      # again: the same error, not "already open"
        Env(path)
    set_format(path, FORMAT_VERSION)
    e = Env(path)
    assert first.value is not None
    with e.read() as txn:
        assert e.get(txn, "meta", b"format") == FORMAT_VERSION
    e.close()


def test_missing_format_key_is_refused_read_only(path):
    Env(path).close()
    set_format(path, None)
    with pytest.raises(StoreFormatError):
        Env(path, readonly=True)


def test_format_survives_reopen(path):
    e = Env(path)
    e.write(lambda txn: e.put(txn, "meta", b"hello", {"a": 1}))
    e.close()
    e = Env(path)
    with e.read() as txn:
        assert e.get(txn, "meta", b"hello") == {"a": 1}
        assert e.get(txn, "meta", b"format") == FORMAT_VERSION
    e.close()


# -- map growth ------------------------------------------------------------------------------
def test_map_grows_when_full(path):
    e = Env(path, map_size=64 * 1024)
    start = e.map_size
    assert start <= 64 * 1024 * 2
    runs = []
    blob = os.urandom(64 * 1024)

    def body(txn):
        runs.append(1)
        for i in range(64):                       # 4 MiB in one transaction
            e.put(txn, "tables", b"k%04d" % i, blob)
        return "done"

    assert e.write(body) == "done"
    assert e.map_size > start
    assert e.map_size >= 4 * 1024 * 1024
    assert len(runs) > 1                           # it was rerun from the start after growing
    # More writes, each one growing the map again when needed.
    for j in range(3):
        e.write(lambda txn, j=j: [e.put(txn, "tables", b"m%d-%04d" % (j, i), blob)
                                  for i in range(32)])
    with e.read() as txn:
        assert e.get(txn, "tables", b"k0063") == blob
        assert sum(1 for _ in e.scan(txn, "tables")) == 64 + 3 * 32
    e.close()
    e = Env(path)
    with e.read() as txn:
        assert e.get(txn, "tables", b"m2-0031") == blob
    e.close()


# -- files, directories, modes ---------------------------------------------------------------
def test_directory_and_file_modes(path):
    old = os.umask(0)                              # the modes must not depend on the umask
    try:
        e = Env(path)
    finally:
        os.umask(old)
    assert os.path.isdir(path)
    assert mode(path) == 0o700
    assert mode(os.path.join(path, "data.mdb")) == 0o600
    assert mode(os.path.join(path, "lock.mdb")) == 0o600
    e.close()


def test_nested_directory_is_created(tmp_path):
    p = str(tmp_path / "a" / "b" / "store")
    e = Env(p)
    assert mode(p) == 0o700
    e.close()


def test_a_file_is_not_a_store(tmp_path):
    p = tmp_path / "file"
    p.write_text("hello")
    with pytest.raises(StoreNotAStore):
        Env(str(p))
    with pytest.raises(StoreNotAStore):
        Env(str(p), create=False)
    assert p.read_text() == "hello"


def test_a_directory_with_other_files_is_not_a_store(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    with pytest.raises(StoreNotAStore):
        Env(str(d))
    assert sorted(os.listdir(d)) == ["notes.txt"]    # nothing written into it


def test_an_empty_directory_becomes_a_store(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    e = Env(str(d))
    assert "data.mdb" in os.listdir(d)
    e.close()


def test_missing_store_without_create(tmp_path):
    p = str(tmp_path / "nothing")
    with pytest.raises(StoreNotFound):
        Env(p, create=False)
    assert not os.path.exists(p)
    with pytest.raises(StoreNotFound):
        Env(p, readonly=True)
    assert not os.path.exists(p)
    d = tmp_path / "empty"
    d.mkdir()
    with pytest.raises(StoreNotFound):
        Env(str(d), create=False)


def test_errors_form_one_tree():
    for cls in (StoreNotFound, StoreNotAStore, StoreFormatError, StoreReadOnly):
        assert issubclass(cls, StoreError)


# -- transactions ----------------------------------------------------------------------------
def test_write_is_all_or_nothing(path):
    e = Env(path)
    e.write(lambda txn: e.put(txn, "tables", b"keep", 1))

    class Boom(Exception):
        pass

    def body(txn):
        e.put(txn, "tables", b"keep", 2)
        e.put(txn, "tables", b"new", 3)
        e.delete(txn, "tables", b"keep")
        raise Boom

    with pytest.raises(Boom):
        e.write(body)
    with e.read() as txn:
        assert e.get(txn, "tables", b"keep") == 1
        assert e.get(txn, "tables", b"new") is None
    # The environment is still usable.
    e.write(lambda txn: e.put(txn, "tables", b"new", 4))
    with e.read() as txn:
        assert e.get(txn, "tables", b"new") == 4
    e.close()


def test_a_failure_after_growing_still_leaves_nothing(path):
    e = Env(path, map_size=64 * 1024)
    blob = os.urandom(32 * 1024)
    calls = []

    def body(txn):
        calls.append(1)
        for i in range(40):
            e.put(txn, "tables", b"g%03d" % i, blob)
        raise KeyError("late")

    with pytest.raises(KeyError):
        e.write(body)
    assert len(calls) > 1
    with e.read() as txn:
        assert list(e.scan(txn, "tables")) == []
    e.close()


def test_write_announced_tells_its_result_before_the_commit(path):
    # serve sends the messages a fetch chose while the fetch's commit syncs
    e = Env(path)
    seen = []

    def announce(result):
        with e.read() as txn:      # another transaction: the write is not there yet
            seen.append((result, e.get(txn, "tables", b"k")))

    assert e.write_announced(lambda txn: e.put(txn, "tables", b"k", 1) or "chosen",
                             announce) == "chosen"
    assert seen == [("chosen", None)]
    with e.read() as txn:
        assert e.get(txn, "tables", b"k") == 1
    e.close()


def test_a_map_that_fills_after_the_announce_is_grown_and_nothing_is_run_again(path):
    # announce has acted on the result (messages sent): running fn again would choose and
    # send again, so the change is not made and the caller hears of it
    e = Env(path, map_size=64 * 1024)
    start = e.map_size
    runs, told = [], []

    def announce(result):
        told.append(result)
        raise lmdb.MapFullError("filled at the commit")

    with pytest.raises(StoreError, match="not made"):
        e.write_announced(lambda txn: runs.append(1) or e.put(txn, "tables", b"k", 1),
                          announce)
    assert (len(runs), len(told)) == (1, 1)
    assert e.map_size > start
    with e.read() as txn:
        assert e.get(txn, "tables", b"k") is None
    e.close()


def test_scan_prefix_and_delete_prefix(path):
    e = Env(path)

    def body(txn):
        for k in (b"a1", b"a2", b"b1", b"ab", b"c"):
            e.put(txn, "tables", k, k.decode())
        assert [k for k, _ in e.scan(txn, "tables", b"a")] == [b"a1", b"a2", b"ab"]
        assert [k for k, _ in e.scan(txn, "tables", b"a", start=b"a2")] == [b"a2", b"ab"]
        assert e.delete_prefix(txn, "tables", b"a") == 3
        assert [k for k, _ in e.scan(txn, "tables")] == [b"b1", b"c"]
        assert e.delete_prefix(txn, "tables", b"zz") == 0
    e.write(body)
    e.close()


def test_readonly_env_refuses_writes(path):
    Env(path).close()
    e = Env(path, readonly=True)
    with pytest.raises(StoreReadOnly):
        e.write(lambda txn: None)
    with e.read() as txn:
        assert e.get(txn, "meta", b"format") == FORMAT_VERSION
    e.close()


# -- one handle per process ------------------------------------------------------------------
def test_two_envs_share_one_handle(path):
    a = Env(path)
    b = Env(path)
    assert a._env is b._env
    assert env_module._OPEN[a.path][2] == 2
    a.write(lambda txn: a.put(txn, "tables", b"x", 1))
    with b.read() as txn:
        assert b.get(txn, "tables", b"x") == 1
    a.close()
    # b still works after a is closed.
    b.write(lambda txn: b.put(txn, "tables", b"y", 2))
    with b.read() as txn:
        assert b.get(txn, "tables", b"y") == 2
    assert env_module._OPEN[b.path][2] == 1
    b.close()
    assert b.path not in env_module._OPEN
    # Opening again after both are closed gives a fresh, working handle.
    c = Env(path)
    assert c._env is not a._env
    with c.read() as txn:
        assert c.get(txn, "tables", b"x") == 1 and c.get(txn, "tables", b"y") == 2
    c.close()
    assert path not in env_module._OPEN


def test_closing_one_env_twice_leaves_the_shared_handle_open(path):
    """close() is idempotent: closing the same Env again must not take the shared handle
    away from another Env that still uses it."""
    a = Env(path)
    b = Env(path)
    a.close()
    a.close()
    b.write(lambda txn: b.put(txn, "tables", b"z", 1))
    with b.read() as txn:
        assert b.get(txn, "tables", b"z") == 1
    b.close()
    assert path not in env_module._OPEN


def test_relative_and_absolute_paths_share_a_handle(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = Env("store")
    b = Env(str(tmp_path / "store"))
    assert a._env is b._env
    a.close()
    b.close()
    assert str(tmp_path / "store") not in env_module._OPEN


def test_readonly_env_shares_a_writable_handle(path):
    w = Env(path)
    r = Env(path, readonly=True)
    assert r._env is w._env
    with pytest.raises(StoreReadOnly):
        r.write(lambda txn: None)
    w.write(lambda txn: w.put(txn, "tables", b"k", 1))
    with r.read() as txn:
        assert r.get(txn, "tables", b"k") == 1
    r.close()
    w.close()
    assert path not in env_module._OPEN


def test_writable_env_after_a_read_only_one(path):
    """A process that first opened a store read-only (stats, a reader) can still open it for
    writing while the read-only one is open."""
    Env(path).close()
    r = Env(path, readonly=True)
    try:
        w = Env(path)
        try:
            w.write(lambda txn: w.put(txn, "tables", b"k", 1))
            with r.read() as txn:
                assert r.get(txn, "tables", b"k") == 1
            with pytest.raises(StoreReadOnly):
                r.write(lambda txn: None)
        finally:
            w.close()
        with r.read() as txn:
            assert r.get(txn, "tables", b"k") == 1
    finally:
        r.close()
    assert path not in env_module._OPEN


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_env_is_not_used_across_fork(path):
    e = Env(path)
    pid = os.fork()
    if pid == 0:                                      # child
        code = 1
        try:
            e.write(lambda txn: None)
        except StoreError:
            code = 0
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    e.write(lambda txn: e.put(txn, "tables", b"parent", 1))   # the parent goes on
    e.close()
