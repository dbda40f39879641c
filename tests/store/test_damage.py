"""A damaged store (store/check.py, store/env.py): refused before LMDB maps it, with StoreDamaged
naming data.mdb and what is wrong; never a SIGBUS, never taken for a new store. doctor --deep's
record walk and --salvage's copy; a full disk is StoreDiskFull, on a real small file system.

Real LMDB in tmp_path. Opening a store cut short used to kill the process (SIGBUS), so those
opens run in a forked child: without the check the test fails, it does not take pytest down."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap

import lmdb
import pytest

from store import Env, StoreDamaged, StoreError, check, codec, identity, keys, pages, space
from store import records as store_records
from store import env as env_module
from store.env import DATABASES, FORMAT_VERSION
from store.salvage import deep_check, salvage


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "store")


def data(path):
    return os.path.join(path, "data.mdb")


def key(i: int) -> bytes:
    return keys.tup("row", i)


def value(i: int) -> dict:
    return {"i": i, "pad": "x" * 200}


def make_store(path: str, n: int = 2000, per_txn: int | None = None) -> dict:
    """A store with n records in its "tables" database (about 15 per page), written per_txn
    at a time (all at once by default): {key: value}."""
    e = Env(path)
    step = per_txn or n
    for start in range(0, n, step):
        e.write(lambda txn, start=start: [e.put(txn, "tables", key(i), value(i))
                                          for i in range(start, min(n, start + step))])
    e.close()
    return {key(i): value(i) for i in range(n)}


def roots(path: str) -> list[int]:
    """The pages everything hangs from: the main database's root and each named root."""
    found = check.inspect(path)
    fd = os.open(data(path), os.O_RDONLY)
    try:
        walk = pages.Walk(pages.PageFile(fd, found.file_bytes, found.meta.psize),
                          found.meta.last_pg)
        named = store_records._named(walk, found.meta, DATABASES, [])
    finally:
        os.close(fd)
    return [found.meta.main.root] + [db.root for db in named.values()
                                     if db.root != pages.P_INVALID]


def records(path: str) -> dict:
    e = Env(path)
    try:
        with e.read() as txn:
            return dict(e.scan(txn, "tables"))
    finally:
        e.close()


def open_in_child(path: str, **kw):
    """Env(path, **kw) in a forked child: ("ok",) or ("StoreDamaged", message), or the signal
    that killed the child (a SIGBUS from LMDB touching pages past the end of the file)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                         # child
        os.close(r)
        try:
            try:
                Env(path, **kw).close()
                out = ["ok"]
            except StoreError as exc:
                out = [type(exc).__name__, str(exc)]
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = f.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return ("killed", signal.Signals(os.WTERMSIG(status)).name)
    return tuple(json.loads(got))


# -- cut short, emptied, missing, overwritten -----------------------------------------------------
def test_a_store_cut_to_half_is_refused_not_a_sigbus(path):
    make_store(path)
    size = os.path.getsize(data(path))
    os.truncate(data(path), size // 2)
    for kw in ({}, {"readonly": True}, {"create": False}):
        got = open_in_child(path, **kw)
        assert got[0] == "StoreDamaged", got
        assert data(path) in got[1] and "cut short" in got[1], got
    assert os.path.getsize(data(path)) == size // 2          # nothing rewritten
    assert path not in env_module._OPEN


def test_a_store_cut_to_zero_bytes_is_not_taken_for_a_new_one(path):
    make_store(path, 10)
    os.truncate(data(path), 0)
    for kw in ({}, {"readonly": True}, {"create": False}):
        with pytest.raises(StoreDamaged) as ei:
            Env(path, **kw)
        assert str(ei.value).startswith(f"{data(path)} is damaged: it is empty (0 bytes)")
        assert "held data" in str(ei.value)
    assert os.path.getsize(data(path)) == 0                  # not initialised as a new store
    # Whereas an empty data.mdb alone (LMDB makes it empty before it writes a page: a creation
    # interrupted then) is a store made afresh.
    fresh = os.path.join(os.path.dirname(path), "fresh")
    os.makedirs(fresh, mode=0o700)
    open(data(fresh), "w").close()
    e = Env(fresh)
    e.write(lambda txn: e.put(txn, "tables", key(1), value(1)))
    e.close()
    assert records(fresh) == {key(1): value(1)}


def test_a_missing_data_mdb_beside_the_identity_record_is_damage(path):
    make_store(path, 10)
    os.unlink(data(path))
    with pytest.raises(StoreDamaged) as ei:
        Env(path)
    assert data(path) in str(ei.value) and "missing" in str(ei.value)
    assert not os.path.exists(data(path))


def test_overwritten_meta_pages_are_damage(path):
    make_store(path, 10)
    with open(data(path), "r+b") as f:
        f.write(b"\0" * 4096)                                 # meta page 0 zeroed
    with pytest.raises(StoreDamaged) as ei:
        Env(path)
    assert "meta page 0" in str(ei.value)


def test_a_root_page_overwritten_is_damage(path):
    make_store(path, 10)
    found = check.inspect(path)
    root = found.meta.main.root
    with open(data(path), "r+b") as f:
        f.seek(root * found.meta.psize)
        f.write(os.urandom(64))
    got = open_in_child(path)
    assert got[0] == "StoreDamaged" and "main database" in got[1], got


def test_a_broken_node_in_the_meta_database_is_damage(path):
    """Every command reads the meta database (format, clock): all of it is checked first."""
    make_store(path, 10)
    found = check.inspect(path)
    fd = os.open(data(path), os.O_RDONLY)
    try:
        walk = pages.Walk(pages.PageFile(fd, found.file_bytes, found.meta.psize),
                          found.meta.last_pg)
        meta_root = store_records._named(walk, found.meta, DATABASES, [])["meta"].root
    finally:
        os.close(fd)
    with open(data(path), "r+b") as f:
        f.seek(meta_root * found.meta.psize + pages.PAGEHDR)      # its first node's offset
        f.write(b"\xff\xff")
    got = open_in_child(path)
    assert got[0] == "StoreDamaged" and "database meta" in got[1], got


def test_garbage_after_the_last_page_is_found_and_nothing_is_lost(path):
    want = make_store(path, 100)
    keep = os.path.getsize(data(path))
    for garbage in (b"garbage\n", os.urandom(5000), os.urandom(4096)):
        os.truncate(data(path), keep)
        with open(data(path), "ab") as f:
            f.write(garbage)
        found = check.inspect(path)
        assert found.state == "ok", found.problems
        assert found.warnings and f"truncate -s {keep} {data(path)}" in found.warnings[0]
        assert records(path) == want                          # LMDB never reads past its end


def test_pages_a_failed_commit_left_after_the_end_are_not_garbage(path):
    """A commit that fails (a full disk, a crash) has written its pages past the last page of
    the committed state: LMDB pages that know their own number, which are no warning."""
    make_store(path, 100)
    found = check.inspect(path)
    psize, last = found.meta.psize, found.meta.last_pg
    with open(data(path), "r+b") as f:
        for pgno in (last + 1, last + 2):
            f.seek(pgno * psize)
            f.write(pgno.to_bytes(8, "little") + b"\0\0" + b"\x02\0" + b"\x10\0\xf0\x0f"
                    + b"\0" * (psize - 16))
    found = check.inspect(path)
    assert found.state == "ok" and not found.warnings, (found.problems, found.warnings)


def test_a_creation_cut_after_one_meta_page_is_told_from_one_under_way(tmp_path):
    """LMDB writes a new store's two meta pages at once; a full disk can stop it after the
    first. That file held nothing: doctor says to remove it. While another process is making
    the store (LMDB holds the lock file's first byte), the same file is no damage: LMDB waits."""
    path = str(tmp_path / "s")
    os.makedirs(path, mode=0o700)
    raw = lmdb.open(os.path.join(tmp_path, "model"), subdir=True)
    raw.close()
    head = open(os.path.join(tmp_path, "model", "data.mdb"), "rb").read(os.sysconf("SC_PAGESIZE"))
    with open(data(path), "wb") as f:
        f.write(head)
    open(os.path.join(path, "lock.mdb"), "wb").close()
    found = check.inspect(path)
    assert found.state == "damaged" and "creation was interrupted" in found.problems[0]
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys\n"
         f"fd = os.open({os.path.join(path, 'lock.mdb')!r}, os.O_RDWR)\n"
         "fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)\nprint('held', flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        assert check.inspect(path).state == "new"
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


# -- stores made before the identity record -------------------------------------------------------
def make_store_as_before(path: str) -> None:
    """A store as Env made it before identity records: LMDB, the named databases, the format."""
    os.makedirs(path, mode=0o700)
    raw = lmdb.open(path, map_size=1 << 30, max_dbs=len(DATABASES) + 4, subdir=True, mode=0o600)
    with raw.begin(write=True) as txn:
        dbs = {n: raw.open_db(n.encode(), txn=txn) for n in DATABASES}
        txn.put(b"format", codec.encode(FORMAT_VERSION), db=dbs["meta"])
        for i in range(50):
            txn.put(key(i), codec.encode(value(i)), db=dbs["tables"])
    raw.close()


def test_a_store_made_before_identity_records_still_opens_and_gets_one(path):
    make_store_as_before(path)
    assert identity.read_identity(path) is None
    assert records(path) == {key(i): value(i) for i in range(50)}
    ident = identity.read_identity(path)
    assert ident and len(ident["id"]) == 32 and ident["pageSize"] == os.sysconf("SC_PAGESIZE")
    assert stat.S_IMODE(os.stat(os.path.join(path, identity.IDENTITY)).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    # From now on an emptied data.mdb is damage, not a new store.
    os.truncate(data(path), 0)
    with pytest.raises(StoreDamaged):
        Env(path)


def test_an_old_store_emptied_in_a_used_directory_is_damage(path):
    """No identity record yet, but the directory shows the store was used (its wake file)."""
    make_store_as_before(path)
    open(os.path.join(path, "wake"), "w").close()
    os.truncate(data(path), 0)
    with pytest.raises(StoreDamaged) as ei:
        Env(path)
    assert "wake" in str(ei.value)
    assert os.path.getsize(data(path)) == 0


def test_a_new_store_gets_an_identity_record(path):
    Env(path).close()
    ident = identity.read_identity(path)
    assert ident and ident["lastPage"] >= 1 and ident["txn"] >= 1
    assert stat.S_IMODE(os.stat(os.path.join(path, identity.IDENTITY)).st_mode) == 0o600


# -- doctor --deep: every record ------------------------------------------------------------------
def flip_value(path: str, v) -> int:
    """Make every copy of the stored value v undecodable (its codec byte becomes 0xff)."""
    raw = bytearray(open(data(path), "rb").read())
    needle = codec.encode(v)
    n, i = 0, raw.find(needle)
    while i >= 0:
        raw[i] = 0xFF
        n += 1
        i = raw.find(needle, i + 1)
    with open(data(path), "r+b") as f:
        f.write(raw)
    return n


def test_deep_check_reports_a_flipped_byte_in_a_record(path):
    want = make_store(path, 300)
    assert flip_value(path, value(123)) >= 1
    rep = deep_check(path)
    tables = rep.dbs["tables"]
    assert tables.expected == tables.read == 300
    assert [k for k, _why in tables.bad] == [key(123)]
    assert "cannot be decoded" in tables.bad[0][1]
    assert not rep.ok and rep.lost == 1
    assert all(not d.bad for name, d in rep.dbs.items() if name != "tables")
    # Commands that meet the record say so instead of failing with a decoding error.
    e = Env(path)
    try:
        with pytest.raises(StoreDamaged) as ei:
            with e.read() as txn:
                e.get(txn, "tables", key(123))
        assert data(path) in str(ei.value) and "('row', 123)" in str(ei.value)
        with pytest.raises(StoreDamaged):
            with e.read() as txn:
                list(e.scan(txn, "tables"))
        with e.read() as txn:
            assert e.get(txn, "tables", key(124)) == want[key(124)]
    finally:
        e.close()


def test_deep_check_of_a_healthy_store_finds_nothing(path):
    make_store(path, 500)
    rep = deep_check(path)
    assert rep.ok, (rep.problems, rep.structure)
    assert rep.dbs["tables"].read == 500 and rep.structure == []
    assert set(rep.dbs) == set(DATABASES)


# -- doctor --salvage -----------------------------------------------------------------------------
def test_salvage_copies_what_is_readable_from_a_store_cut_short(path, tmp_path):
    want = make_store(path, 3000, per_txn=100)
    size = os.path.getsize(data(path))
    psize = check.inspect(path).meta.psize
    cut = max(size // psize * 6 // 10, max(roots(path)) + 1) * psize
    assert cut < size, "the roots are at the end of the file: no part of it can be cut"
    os.truncate(data(path), cut)
    dst = str(tmp_path / "saved")
    rep = salvage(path, dst)
    got = records(dst)
    assert 0 < len(got) < len(want)
    assert all(want[k] == v for k, v in got.items())             # nothing copied wrong
    assert rep.dbs["tables"].read == len(got)
    assert rep.lost == len(want) - len(got)
    assert any("past the end of the file (cut short)" in p for p in rep.problems)
    # The new store is whole, and ids handed out later never collide with salvaged ones.
    assert deep_check(dst).ok
    assert identity.read_identity(dst) is not None


def test_salvage_leaves_out_an_undecodable_record(path, tmp_path):
    want = make_store(path, 300)
    flip_value(path, value(7))
    dst = str(tmp_path / "saved")
    rep = salvage(path, dst)
    del want[key(7)]
    assert records(dst) == want
    assert rep.lost == 1 and [k for k, _ in rep.dbs["tables"].bad] == [key(7)]
    assert deep_check(dst).ok


def test_salvage_reads_the_commit_before_when_the_last_ones_main_root_is_lost(path, tmp_path):
    """The main database's root names every other database: overwritten, the last commit is
    lost, and salvage reads what the commit before it held, which LMDB keeps whole."""
    first = make_store(path, 100)
    e = Env(path)
    e.write(lambda txn: [e.put(txn, "tables", key(i), value(i)) for i in range(100, 3000)])
    e.close()
    found = check.inspect(path)
    with open(data(path), "r+b") as f:
        f.seek(found.meta.main.root * found.meta.psize)
        f.write(os.urandom(found.meta.psize))
    rep = salvage(path, str(tmp_path / "saved"))
    assert records(str(tmp_path / "saved")) == first
    assert any(f"read as transaction {found.meta.txnid - 1} left it" in p for p in rep.problems)


def test_salvage_of_a_healthy_store_copies_everything(path, tmp_path):
    want = make_store(path, 200)
    rep = salvage(path, str(tmp_path / "saved"))
    assert rep.ok and rep.lost == 0
    assert records(str(tmp_path / "saved")) == want


# -- a full disk ----------------------------------------------------------------------------------
_SIMULATE = """
import os, resource, signal
# No mount allowed: the same scenario on a file-size limit (LMDB's pwrite then really stops
# short, as on a full disk) and a free-space probe that counts what the directory holds.
_LIMIT = {size}
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (_LIMIT, _LIMIT))
_real_statvfs, _real_fallocate = os.statvfs, os.posix_fallocate
def _used(root):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
class _St:
    def __init__(self, free):
        self.f_frsize, self.f_bsize = 4096, 4096
        self.f_bfree = self.f_bavail = max(0, free) // 4096
def statvfs(p):
    return _St(_LIMIT - _used({root!r}))
def posix_fallocate(fd, off, n):
    if max(0, off + n - os.fstat(fd).st_size) > max(0, _LIMIT - _used({root!r})):
        raise OSError(28, "No space left on device")
    return _real_fallocate(fd, off, n)
os.statvfs, os.posix_fallocate = statvfs, posix_fallocate
"""


def on_small_fs(tmp_path, body: str, size_kb: int = 1024) -> subprocess.CompletedProcess:
    """Run python code with FS set to a directory on a tmpfs of size_kb, mounted in a private
    mount namespace (gone when the code ends). Where mounting is not allowed, the same code runs
    with the disk's limit simulated at the narrowest points (see _SIMULATE)."""
    fs = tmp_path / "fs"
    fs.mkdir()
    prog = f"import sys\nFS = sys.argv[1]\n{textwrap.dedent(body)}"
    if not os.environ.get("PULSARCTL_TEST_SIMULATE_FULL_DISK"):
        try:
            r = subprocess.run(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                 'mount -t tmpfs -o size="$1"k tmpfs "$2" || exit 97; shift 1; '
                 'exec "$2" -c "$3" "$1"', "sh", str(size_kb), str(fs), sys.executable, prog],
                capture_output=True, text=True, timeout=120)
        except FileNotFoundError:                           # no unshare(1)
            r = None
        if r is not None and r.returncode != 97 and "unshare failed" not in r.stderr:
            return r
    sim = _SIMULATE.format(size=size_kb * 1024, root=str(fs))
    return subprocess.run([sys.executable, "-c", sim + prog, str(fs)], capture_output=True,
                          text=True, timeout=120)


def test_a_full_disk_is_store_disk_full_and_nothing_is_half_written(tmp_path):
    r = on_small_fs(tmp_path, """
        import json, os
        from store import Env, StoreError
        p = os.path.join(FS, "s")
        e = Env(p)
        e.write(lambda txn: e.put(txn, "tables", b"kept", "small"))
        out = {}
        try:
            e.write(lambda txn: e.put(txn, "tables", b"big", os.urandom(2 << 20)))
            out["big"] = "written"
        except StoreError as exc:
            out["big"] = f"{type(exc).__name__}: {exc}"
        with e.read() as txn:
            out["after"] = [e.get(txn, "tables", b"kept"), e.get(txn, "tables", b"big")]
        e.close()
        from store import check
        out["state"] = check.inspect(p).state
        e = Env(p)
        with e.read() as txn:
            out["reopened"] = [e.get(txn, "tables", b"kept"), e.get(txn, "tables", b"big")]
        e.close()
        print(json.dumps(out))
    """)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["big"] == f"StoreDiskFull: disk full writing {tmp_path}/fs/s/data.mdb"
    assert out["after"] == out["reopened"] == ["small", None]
    assert out["state"] == "ok"


def test_creating_a_store_on_a_full_disk_is_store_disk_full_not_a_sigbus(tmp_path):
    r = on_small_fs(tmp_path, """
        import json, os
        from store import Env, StoreError
        fd = os.open(os.path.join(FS, "fill"), os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, bytes(4096)):
                pass
        except OSError:
            pass
        try:
            Env(os.path.join(FS, "new")).close()
            print(json.dumps("opened"))
        except StoreError as exc:
            print(json.dumps(f"{type(exc).__name__}: {exc}"))
    """)
    assert r.returncode == 0, (r.returncode, r.stderr)       # -7 was the SIGBUS
    msg = json.loads(r.stdout)
    assert msg in (f"StoreDiskFull: disk full writing {tmp_path}/fs/new/lock.mdb",
                   f"StoreDiskFull: disk full writing {tmp_path}/fs/new/data.mdb"), msg


def test_disk_full_is_told_from_other_lmdb_errors(tmp_path):
    assert space.disk_full(str(tmp_path), 28, "mdb_txn_commit: No space left on device")
    # LMDB says EIO when a write stops short: full only if the file system has no room left.
    assert not space.disk_full(str(tmp_path), None, "mdb_txn_commit: Input/output error")
    assert not space.disk_full(str(tmp_path), None, "mdb_get: MDB_NOTFOUND")
