"""What LMDB alone does on this disk: the work `pulsarctl perf compare` sets pulsarctl's paths
beside, as their limit. Each function does the bare store operations a path cannot do without
(append, read and mark acked, commit one message), with no topics, cursors or codec; the caller
times it (store/ never reads the time).

The whole-command limits run as their own process, as the commands they are set beside do
(`python -m store.limits append PATH < lines`, `python -m store.limits consume PATH N OUT`):
an interpreter start, the lmdb import, reading standard input or writing each message out.

The keys are 8-byte big-endian counters in the store's own "entries" and "acked" databases of a
scratch store, so the B-tree, the page size and the fsync are the ones pulsarctl pays for."""
from __future__ import annotations

import struct
import sys

from store.env import Env

_KEY = struct.Struct(">Q")
PER_TXN = 1000


def appends(env: Env, lines, per_txn: int = PER_TXN) -> int:
    """Each of lines (bytes; a trailing newline is dropped) appended at the end of "entries",
    per_txn to a committed (fsync'd) transaction: what producing them in batches of per_txn
    cannot do without. Returns how many."""
    db = env.db["entries"]
    pack = _KEY.pack
    it = iter(lines)
    done = 0

    def chunk(txn, first, values):
        put = txn.put
        for i, v in enumerate(values, first):
            put(pack(i), v.rstrip(b"\n"), db=db)

    while True:
        values = [v for _, v in zip(range(per_txn), it)]
        if not values:
            return done
        env.write(chunk, done, values)
        done += len(values)


def read_and_ack(env: Env, n: int, write=None, per_txn: int = PER_TXN) -> int:
    """Read the first n values appends wrote, in order, hand each to write (with a newline) and
    mark it acked in "acked", per_txn to a committed transaction: what consuming and acking
    them one by one cannot do without. Returns the bytes read."""
    entries, acked = env.db["entries"], env.db["acked"]
    pack = _KEY.pack

    def chunk(txn, start, stop):
        got = 0
        cur = txn.cursor(db=entries)
        cur.set_key(pack(start))
        put = txn.put
        for i in range(start, stop):
            v = cur.value()
            got += len(v)
            if write is not None:
                write(v + b"\n")
            put(pack(i), b"", db=acked)
            cur.next()
        return got

    total = 0
    for start in range(0, n, per_txn):
        total += env.write(chunk, start, min(n, start + per_txn))
    return total


def sync_commits(env: Env, n: int, size: int) -> None:
    """n committed transactions of one value each: what n durable one-message sends cannot do
    without (each waits for its own fsync)."""
    db = env.db["entries"]
    value = b"y" * size
    for i in range(n):
        env.write(lambda txn, k: txn.put(k, value, db=db), _KEY.pack(1 << 62 | i))


def main(argv: list[str]) -> int:
    """append PATH (lines on standard input) | consume PATH N OUT (each message to file OUT)."""
    if len(argv) >= 2 and argv[0] == "append":
        env = Env(argv[1])
        try:
            appends(env, sys.stdin.buffer)
        finally:
            env.close()
        return 0
    if len(argv) == 4 and argv[0] == "consume":
        env = Env(argv[1])
        try:
            with open(argv[3], "wb") as out:
                read_and_ack(env, int(argv[2]), out.write)
        finally:
            env.close()
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
