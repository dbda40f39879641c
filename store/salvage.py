"""`doctor --deep` and `doctor --salvage` at the store's level: every record read back and
decoded while a read transaction pins the pages (record_check), LMDB's structure and the
ledgers' continuity (deep_check), and a copy of every record that still decodes into a new
store (salvage). Apart from store/env.py, which opens LMDB; only env.py imports lmdb."""
from __future__ import annotations

import os
import struct
from contextlib import contextmanager

from store import codec, keys, records
from store.env import DATABASES, Env, verify_structure
from store.errors import StoreError
from store.ledger import LedgerInfo
from store.ledger_row import location_of


@contextmanager
def _pinned(path: str):
    """Hold a read transaction on the store while its file is read without LMDB, so that no
    commit reuses the pages being read; nothing is held when the store cannot be opened (a
    damaged store is read as it lies)."""
    try:
        env = Env(path, readonly=True, create=False)
    except StoreError:
        yield None, None
        return
    try:
        with env.read() as txn:
            yield env, txn
    finally:
        env.close()


def record_check(path: str) -> records.DeepReport:
    """Every page and every record of the store read back and decoded (store/records.py's
    read_all), holding a read transaction so that no commit reuses the pages being read: what
    plain `doctor` checks. A command fails on any record it reads that fails here (a large
    value's pages hold no header past their first, so only decoding finds garbage written over
    them); and the free list, which every write reads. `doctor --deep` adds LMDB's structure
    and the ledgers' continuity."""
    path = os.path.abspath(path)
    with _pinned(path):
        return records.read_all(path, DATABASES, free_list=True)


def deep_check(path: str) -> records.DeepReport:
    """Read every record of the store at path (store/records.py's read_all) and check LMDB's
    structure: what `doctor --deep` reports."""
    path = os.path.abspath(path)
    with _pinned(path) as (env, txn):
        rep = records.read_all(path, DATABASES)
        if rep.inspection.state not in ("absent", "new") and not rep.problems:
            rep.structure = verify_structure(path)
        # Through LMDB only a file the walk and the verifier found whole: it trusts its pages.
        if env is not None and not rep.problems and not rep.structure \
                and not any(d.bad for d in rep.dbs.values()):
            rep.problems.extend(_ledger_gaps(txn, env, _ledgers(txn, env)))
    return rep


# The id counters of the meta database and where the ids they hand out appear in keys (the first
# eight bytes of each key of those databases).
_COUNTERS = {
    b"next_ledger_id": ("owners", "entries"),
    b"next_ml_id": ("mledgers", "history"),
    b"next_cursor_id": ("acked", "pending", "replay", "redelivery", "delayed", "timers"),
}
_SALVAGE_BATCH = 5000
_SALVAGE_BYTES = 32 << 20


def salvage(src: str, dst: str) -> records.DeepReport:
    """Copy every record of the store at src that can still be read and decoded into a new
    store at dst (as sqlite's .recover does), in batches of write transactions; the report says
    what could not be saved. The id counters of the new store are raised past every id its
    records use, so that nothing new takes the id of something salvaged."""
    src, dst = os.path.abspath(src), os.path.abspath(dst)
    out = Env(dst, create=True)
    try:
        batch: list = []
        size = [0]
        top = {c: 0 for c in _COUNTERS}
        owners = {db: c for c, dbs in _COUNTERS.items() for db in dbs}

        def flush():
            if batch:
                out.write(lambda txn: [txn.put(k, v, db=out.db[name]) for name, k, v in batch])
                batch.clear()
                size[0] = 0

        def on_record(name, key, value):
            if name == "meta" and key == b"format":
                return                      # the new store has its own
            c = owners.get(name)
            if c is not None and len(key) >= 8:
                top[c] = max(top[c], int.from_bytes(key[:8], "big"))
            batch.append((name, key, value))
            size[0] += len(key) + len(value)
            if len(batch) >= _SALVAGE_BATCH or size[0] >= _SALVAGE_BYTES:
                flush()

        def on_bad(name, key, value):
            # A damaged block of entries loses only its entries that do not decode: the
            # others are saved as entries of their own.
            if name == "entries" and value and codec.is_block(value):
                for k, v in records.block_remains(key, value):
                    on_record(name, k, v)

        with _pinned(src):
            rep = records.read_all(src, DATABASES, on_record, on_bad)
        flush()

        rep.problems.extend(out.write(_reconcile, out))

        def raise_counters(txn):
            meta = out.db["meta"]
            for counter, highest in top.items():
                raw = txn.get(counter, db=meta)
                now = int.from_bytes(raw, "big") if raw is not None and len(raw) == 8 else 1
                if highest + 1 > now:
                    txn.put(counter, (highest + 1).to_bytes(8, "big"), db=meta)
        out.write(raise_counters)
    finally:
        out.close()
    return rep


def _ranges(ids: list[int]) -> str:
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    shown = ", ".join(out[:5])
    return shown + (f" and {len(out) - 5} more ranges" if len(out) > 5 else "")


def _reconcile(txn, out: Env) -> list[str]:
    """After a salvage, in the new store: what the copied records point at that was not saved.
    A managed ledger whose own record was lost cannot be read (nothing says where its entries
    are): its name and its entries are left out, so the name starts again empty. The owners
    index is rebuilt from the ledger records. Entries lost inside a saved ledger are named by
    ledger and entry id: reading them fails with LedgerError (skip past them)."""
    db, u64, unpack = out.db, keys.u64, keys.unpack_u64
    problems: list[str] = []
    mls = _ledgers(txn, out)
    for k, v in list(txn.cursor(db=db["names"])):
        ml = unpack(v)
        if ml not in mls:
            txn.delete(k, db=db["names"])
            problems.append(f"managed ledger {k.decode(errors='replace')!r} (id {ml}): its "
                            "record was lost, so its entries cannot be found: it is left out")
    owner = {row[0]: ml for ml, info in mls.items() for row in info.ledgers}
    orphans = 0
    for k, v in list(txn.cursor(db=db["owners"])):
        if unpack(v) not in mls:
            txn.delete(k, db=db["owners"])
            orphans += out.delete_prefix(txn, "entries", k)
    for lid, ml in owner.items():
        txn.put(u64(lid), u64(ml), db=db["owners"])
    # Entries of ledgers no saved record holds (their owner record was lost too).
    cur = txn.cursor(db=db["entries"])
    stray = []
    if cur.first():
        for k in cur.iternext(keys=True, values=False):
            lid = unpack(k[:8])
            if lid not in owner and (not stray or stray[-1] != lid):
                stray.append(lid)
    for lid in stray:
        orphans += out.delete_prefix(txn, "entries", u64(lid))
    if orphans:
        problems.append(f"{orphans} entries belonged to managed ledgers whose record was "
                        "lost: they are left out")
    return problems + _ledger_gaps(txn, out, mls)


def _ledgers(txn, env: Env) -> dict[int, LedgerInfo]:
    out = {}
    for k, v in txn.cursor(db=env.db["mledgers"]):
        out[keys.unpack_u64(k)] = LedgerInfo.from_record(keys.unpack_u64(k), codec.decode(v))
    return out


def _ledger_gaps(txn, env: Env, mls: dict[int, LedgerInfo]) -> list[str]:
    """Entries a managed ledger's record says its ledgers hold that are not there."""
    problems = []
    for info in mls.values():
        for row in info.ledgers:
            if location_of(row):
                continue                            # offloaded: its entries live elsewhere
            lid, n = row[0], row[2]
            prefix = keys.u64(lid)
            cur = txn.cursor(db=env.db["entries"])
            have = []
            if cur.set_range(prefix):
                for k, v in cur:
                    if not k.startswith(prefix):
                        break
                    last = keys.unpack_pair(k)[1]
                    try:  # a block holds the entries up to the id in its key
                        held = codec.block_count(v) if codec.is_block(v) else 1
                    except (IndexError, struct.error):
                        held = 1
                    have.extend(range(last - held + 1, last + 1))
            if len(have) < n:
                present = set(have)
                lost = [e for e in range(n) if e not in present]
                problems.append(f"managed ledger {info.name!r}: ledger {lid} lost {len(lost)} "
                                f"of its {n} entries ({_ranges(lost)}): reading them fails; "
                                "skip past them")
    return problems
