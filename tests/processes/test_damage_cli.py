"""A damaged store and a full disk through the real entry point (`python -m pulsarctl` in a
subprocess): exit 1 and one line on stderr naming the file, what is wrong and what to do; never
135 (SIGBUS), never an empty store in place of one that held messages. doctor says the truth:
garbage, undecodable records, what --salvage could not save, the clock, the daemon, and which
setting chose the store.

Set-up runs in-process (a Broker on the test's store); only the commands under test are
processes."""
from __future__ import annotations

import fcntl
import json
import os
import random
import subprocess
import sys
import textwrap

from pulsarctl.broker import Broker
from pulsarctl.clock import SimulatedClock
from pulsarctl.messages import OutgoingMessage
from store import Env, check, codec, pages

from procs import pok
from simclock import START_MS

TOPIC = "persistent://public/default/t"


def fill(store_path: str, n: int = 300) -> None:
    # On the simulated clock: the same publish times, so the same bytes in the file, every run
    # (flip_message looks for a record's first bytes, which a wall-clock time could mimic).
    b = Broker(store_path, SimulatedClock(START_MS))
    try:
        b.publish(TOPIC, [OutgoingMessage(f"m-{i:04d}".encode()) for i in range(n)])
    finally:
        b.close()


def data(store_path):
    return os.path.join(store_path, "data.mdb")


def one_line(r, code: int = 1) -> str:
    """The failed command's one stderr line (exit code, no traceback, never a signal)."""
    assert r.returncode == code, (r.args[3:], r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "unexpected" not in lines[0] and "Traceback" not in r.stderr
    return lines[0]


def doctor_rows(run_proc, *args):
    r = run_proc("doctor", *args, "-o", "json")
    assert r.returncode in (0, 1), (r.returncode, r.stderr)
    return r.returncode, json.loads(r.stdout)


def failing(rows):
    return [f'{r["check"]}: {r["detail"]}' for r in rows if not r["ok"]]


# -- cut short, emptied ---------------------------------------------------------------------------
def test_a_store_cut_to_half_is_one_error_line_from_every_command(run_proc, store_path):
    fill(store_path)
    size = os.path.getsize(data(store_path))
    os.truncate(data(store_path), size // 2)
    for args in (("topics", "list", "public/default"), ("produce", "t", "-m", "x"),
                 ("read", "t", "-n", "1", "-m", "earliest"), ("topics", "stats", "t")):
        line = one_line(run_proc(*args))                       # was exit 135, no message
        assert line.startswith(f"error: {data(store_path)} is damaged: it is {size // 2} bytes")
        assert "cut short" in line and "run `pulsarctl doctor`" in line
        assert "--salvage NEW_STORE" in line
    code, rows = doctor_rows(run_proc)                         # doctor itself never crashes
    assert code == 1
    assert any("cut short" in f for f in failing(rows)), rows
    assert os.path.getsize(data(store_path)) == size // 2


def test_a_store_cut_to_zero_bytes_is_not_a_new_empty_store(run_proc, store_path):
    fill(store_path)
    os.truncate(data(store_path), 0)
    for args in (("topics", "list", "public/default"), ("produce", "t", "-m", "x"),
                 ("read", "t", "-n", "1", "-m", "earliest")):
        line = one_line(run_proc(*args))                       # was exit 0 on an empty store
        assert line.startswith(f"error: {data(store_path)} is damaged: it is empty (0 bytes), "
                               "but identity says the store held data")
    assert os.path.getsize(data(store_path)) == 0             # not made into a new store
    code, rows = doctor_rows(run_proc)
    assert code == 1 and any("empty (0 bytes)" in f for f in failing(rows)), rows


def test_garbage_at_the_end_of_the_file_does_not_pass_doctor(run_proc, store_path):
    fill(store_path, 20)
    keep = os.path.getsize(data(store_path))
    with open(data(store_path), "ab") as f:
        f.write(os.urandom(5000))
    code, rows = doctor_rows(run_proc)
    assert code == 1
    bad = failing(rows)
    assert len(bad) == 1 and "garbage" in bad[0] and f"truncate -s {keep}" in bad[0], rows
    # LMDB never reads past its last page: the messages are all there and commands go on.
    r = pok(run_proc("read", "t", "-n", "20", "-m", "earliest"))
    assert r.stdout.count("got message") == 20
    os.truncate(data(store_path), keep)                        # what doctor says to do
    assert doctor_rows(run_proc)[0] == 0


# -- garbage over pages LMDB uses: commands and doctor agree ------------------------------------
def overwrite_pages(store_path: str, first: int, n: int) -> None:
    """n pages from page first made garbage (the same bytes every run)."""
    psize = check.inspect(store_path).meta.psize
    with open(data(store_path), "r+b") as f:
        f.seek(first * psize)
        f.write(random.Random(27).randbytes(n * psize))


def test_garbage_over_the_last_pages_fails_doctor_as_it_fails_read(run_proc, store_path):
    fill(store_path)
    last = check.inspect(store_path).meta.last_pg
    overwrite_pages(store_path, last - 1, 2)             # the last two pages LMDB uses
    line = one_line(run_proc("read", "t", "-n", "300", "-m", "earliest"))
    assert line.startswith(f"error: {data(store_path)} is damaged: a record cannot be decoded")
    assert "run `pulsarctl doctor` to see what is wrong" in line
    code, rows = doctor_rows(run_proc)                   # was exit 0: "the store is fine"
    assert code == 1
    bad = failing(rows)
    assert any(f.startswith(f"store records: {data(store_path)} is damaged: the record (1, 299) "
                            "of its entries database cannot be decoded") for f in bad), bad
    assert any("--salvage NEW_STORE" in f for f in bad), bad


def test_an_overwritten_free_list_fails_doctor_as_it_fails_a_write(run_proc, store_path):
    fill(store_path)
    free = check.inspect(store_path).meta.free.root
    assert free != pages.P_INVALID
    overwrite_pages(store_path, free, 1)
    # Every record reads back whole; the next write meets the free list.
    assert pok(run_proc("read", "t", "-n", "300", "-m", "earliest")).stdout.count("got") == 300
    line = one_line(run_proc("produce", "t", "-m", "x"))
    assert line.startswith(f"error: {data(store_path)} is damaged: LMDB reports")
    code, rows = doctor_rows(run_proc)
    assert code == 1
    assert any(f"free list: page {free} holds something else" in f for f in failing(rows)), rows


# -- an undecodable record: --deep, --salvage -----------------------------------------------------
def flip_message(store_path: str, payload: bytes) -> None:
    """Make the stored entry holding payload undecodable: its codec byte becomes 0xff, in
    every copy of the live block of entries in the file (a page LMDB freed may still hold an
    older copy, and the first copy in the file need not be the live one). Only inside the
    block: the payload's bytes may also occur in other records, whose neighbours are no
    entry's first bytes."""
    env = Env(store_path)
    try:
        with env.read() as txn:
            cur = txn.cursor(db=env.db["entries"])
            block = next(bytes(v) for _k, v in cur if payload in bytes(v))
    finally:
        env.close()
    j = block.find(payload)
    # \x01, then an array whose first item is the publish time, a uint64 (0xcf); the time is
    # the simulated clock's (fill), whose bytes hold no such run.
    while not (block[j] == codec.PLAIN and block[j + 1] & 0xF0 == 0x90 and block[j + 2] == 0xCF):
        j -= 1
    raw = bytearray(open(data(store_path), "rb").read())
    at = raw.find(block)
    assert at >= 0, "the live block is not in the file in one piece"
    while at >= 0:
        raw[at + j] = 0xFF
        at = raw.find(block, at + 1)
    with open(data(store_path), "r+b") as f:
        f.write(raw)


def test_deep_and_salvage_report_an_undecodable_record(run_proc, store_path, tmp_path):
    fill(store_path, 300)
    flip_message(store_path, b"m-0123")
    line = one_line(run_proc("read", "t", "-n", "300", "-m", "earliest"))
    assert line.startswith(f"error: {data(store_path)} is damaged: a record cannot be decoded")
    assert "run `pulsarctl doctor`" in line
    # Plain doctor reads every record back, as read does, and finds the one read trips over
    # (issue 27, item 9: it used to say the store was fine).
    code, rows = doctor_rows(run_proc)
    assert code == 1
    assert any("the record (1, 299) of its entries database cannot be decoded (entry 123 of its "
               "block" in f for f in failing(rows)), rows
    code, rows = doctor_rows(run_proc, "--deep")
    assert code == 1
    bad = failing(rows)
    # The 300 entries were appended together: one block (store/ledger.py) under the key of its
    # last entry. The report names the block and the entry in it.
    assert any(b.startswith("records: entries: 1 of 1 records read; 1 cannot be decoded: "
                            "(1, 299) (entry 123 of its block cannot be decoded") for b in bad), bad
    new = str(tmp_path / "saved")
    code, rows = doctor_rows(run_proc, "--salvage", new)
    assert code == 1
    summary = rows[-1]
    assert summary["check"] == "salvage" and not summary["ok"]
    assert summary["detail"].startswith(f"copied {rows_copied(rows)} records to {new}; "
                                        "1 could not be saved")
    assert any("lost 1 of its 300 entries (123)" in f for f in failing(rows)), failing(rows)
    # The salvaged store opens and says what it lacks; what is on either side reads.
    line = one_line(run_proc("--store", new, "read", "t", "-n", "300", "-m", "earliest"))
    assert line.startswith("error: entry 1:123 is missing; run `pulsarctl doctor`")
    r = pok(run_proc("--store", new, "read", "t", "-n", "176", "-m", "1:123"))
    assert r.stdout.count("got message") == 176 and "content:m-0124" in r.stdout
    r = pok(run_proc("--store", new, "topics", "get-message-by-id", "t", "-l", "1", "-e", "122"))
    assert "content:m-0122" in r.stdout
    code, rows = doctor_rows(run_proc, "--store", new, "--deep")
    assert code == 1 and any("lost 1 of its 300 entries (123)" in f for f in failing(rows))
    # A salvage never writes over something that is there.
    one_line(run_proc("doctor", "--salvage", new), code=4)


def rows_copied(rows) -> int:
    n = 0
    for r in rows:
        if r["check"].startswith("salvaged: "):
            read = int(r["detail"].split(" of ")[0])
            bad = r["detail"].split("; ")[1:]
            n += read - sum(int(b.split()[0]) for b in bad if "cannot be decoded" in b)
    return n


# -- a full disk ----------------------------------------------------------------------------------
def on_small_fs(tmp_path, script: str, size_kb: int = 1024) -> subprocess.CompletedProcess:
    """Run a shell script with $FS a directory on a tmpfs of size_kb, $PY the pulsarctl command
    and $FILL a command that fills the file system, in a private mount namespace (the mount is
    gone when the script ends). Where mounting is not allowed, the commands run with the disk's
    limit simulated instead: a file-size limit (so LMDB's writes really stop short) and a
    free-space probe that counts what $FS holds."""
    fs = tmp_path / "fs"
    fs.mkdir()
    env = dict(os.environ, FS=str(fs), NO_COLOR="1",
               FILL='dd if=/dev/zero of="$FS/fill" bs=4096 2> /dev/null')
    env.pop("PULSARCTL_STORE", None)
    if not os.environ.get("PULSARCTL_TEST_SIMULATE_FULL_DISK"):
        try:
            r = subprocess.run(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                 f'mount -t tmpfs -o size={size_kb}k tmpfs "$FS" || exit 97\n'
                 f'PY="{sys.executable} -m pulsarctl"\n{textwrap.dedent(script)}'],
                capture_output=True, text=True, timeout=120, env=env)
        except FileNotFoundError:
            r = None
        if r is not None and r.returncode != 97 and "unshare failed" not in r.stderr:
            return r
    sim = textwrap.dedent(f"""
        import os, resource, runpy, signal, sys
        LIMIT, ROOT = {size_kb * 1024}, {str(fs)!r}
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))
        def used():
            return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(ROOT)
                       for f in fs)
        class St:
            f_frsize = f_bsize = 4096
            def __init__(self):
                self.f_bfree = self.f_bavail = max(0, LIMIT - used()) // 4096
        real = os.posix_fallocate
        def fallocate(fd, off, n):
            if max(0, off + n - os.fstat(fd).st_size) > max(0, LIMIT - used()):
                raise OSError(28, "No space left on device")
            return real(fd, off, n)
        os.statvfs, os.posix_fallocate = (lambda p: St()), fallocate
        sys.argv = ["pulsarctl", *sys.argv[1:]]
        runpy.run_module("pulsarctl", run_name="__main__", alter_sys=True)
    """)
    wrapper = tmp_path / "sim_pulsarctl.py"
    wrapper.write_text(sim)
    env["FILL"] = f'head -c {size_kb * 1024} /dev/zero > "$FS/fill"'
    return subprocess.run(
        ["sh", "-c", f'PY="{sys.executable} {wrapper}"\n{textwrap.dedent(script)}'],
        capture_output=True, text=True, timeout=120, env=env)


def test_a_full_disk_says_so_and_half_writes_nothing(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(os.urandom(2 << 20))
    r = on_small_fs(tmp_path, f"""
        S="$FS/s"
        $PY --store "$S" produce t -m kept > /dev/null || exit 11
        $PY --store "$S" produce t -f {big} 2> "$FS/../err1"; echo "rc1=$?"
        $PY --store "$S" read t -n 5 -m earliest --idle-timeout 0.5s; echo "rc2=$?"
        $PY --store "$S" doctor -o json > "$FS/../doctor.json"; echo "rc3=$?"
        eval "$FILL"
        $PY --store "$FS/new" produce t -m x 2> "$FS/../err2"; echo "rc4=$?"
    """)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    out = r.stdout
    err1 = (tmp_path / "err1").read_text()
    assert "rc1=1" in out, (out, err1)
    assert err1 == (f"error: disk full writing {tmp_path}/fs/s/data.mdb: free space or move "
                    "the store (--store)\n")                      # was "Input/output error"
    assert "rc2=0" in out and out.count("got message") == 1 and "content:kept" in out
    assert "rc3=0" in out, json.loads((tmp_path / "doctor.json").read_text())
    err2 = (tmp_path / "err2").read_text()
    assert "rc4=1" in out, (out, err2)                             # was 135: SIGBUS
    assert err2 in (f"error: disk full writing {tmp_path}/fs/new/{f}: free space or move the "
                    "store (--store)\n" for f in ("lock.mdb", "data.mdb")), err2


# -- what doctor tells ----------------------------------------------------------------------------
def test_doctor_says_which_setting_chose_the_store(run_proc, store_path, tmp_path):
    fill(store_path, 1)

    def setting(*args, **env):
        r = run_proc(*args, "doctor", "-o", "json", env_extra=env)
        return next(row["detail"] for row in json.loads(r.stdout) if row["check"] ==
                    "store setting")

    assert setting() == "chosen by PULSARCTL_STORE"
    assert setting("--store", store_path) == "chosen by --store"
    cfg = tmp_path / "cfg"
    (cfg / "pulsarctl").mkdir(parents=True)
    (cfg / "pulsarctl" / "config.toml").write_text(f'store = "{store_path}"\n')
    assert setting(PULSARCTL_STORE="", XDG_CONFIG_HOME=str(cfg)) == (
        f"chosen by config file {cfg}/pulsarctl/config.toml")
    assert setting(PULSARCTL_STORE="", XDG_CONFIG_HOME=str(tmp_path / "none"),
                   XDG_DATA_HOME=str(tmp_path / "data")) == "chosen by default"


def test_doctor_reports_a_simulated_clock_and_the_daemon(run_proc, store_path):
    from pulsarctl import daemon

    fill(store_path, 1)
    rows = {r["check"]: r for r in doctor_rows(run_proc)[1]}
    assert rows["clock"]["detail"] == "real"
    assert rows["daemon"]["detail"].startswith("not running")
    b = Broker(store_path)
    try:
        b.clock.simulate(START_MS)
    finally:
        b.close()
    fd = os.open(os.path.join(store_path, daemon.LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)          # a daemon, as far as anyone sees
        code, found = doctor_rows(run_proc)
        rows = {r["check"]: r for r in found}
    finally:
        os.close(fd)
    assert code == 0, failing(found)
    assert rows["clock"]["detail"].startswith("simulated, at 2026-01-01T00:00:00")
    assert rows["daemon"]["detail"] == f"running, pid {os.getpid()}"
