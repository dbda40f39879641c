"""A managed ledger's ledger rows with their fields named (issue 29 item 7):
store/ledger_row.LedgerRow and TrimmedRow read every stored shape (a ledger in LMDB, one
offloaded, one trimmed) and give back the very list the record holds, byte for byte; readers ask
location_of, never the row's length. Real LMDB in tmp_path."""
from __future__ import annotations

from store import ManagedLedgers, codec, keys
from store.ledger_row import (
    L_CREATED, L_ENTRIES, L_FIRST, L_ID, L_LOCATION, L_SIZE, LedgerRow, TrimmedRow, location_of,
    rows,
)

from simclock import START_MS as T0


def test_each_stored_row_shape_round_trips_byte_for_byte():
    local = [7, 100, 50, 4096, T0]
    offloaded = [7, 100, 50, 4096, T0, "/off/t/ledger-7.parquet"]
    for stored in (local, offloaded):
        r = LedgerRow.from_stored(stored)
        assert (r.ledger_id, r.first_offset, r.entries, r.size, r.created_ms) == \
            (stored[L_ID], stored[L_FIRST], stored[L_ENTRIES], stored[L_SIZE], stored[L_CREATED])
        assert r.to_stored() == stored
        assert codec.encode(r.to_stored()) == codec.encode(stored)
        assert r.location == location_of(stored)
        assert r.offloaded == (len(stored) > L_LOCATION)
    assert location_of(local) is None and location_of(offloaded) == offloaded[L_LOCATION]
    t = TrimmedRow.from_stored([3, 0, 10])
    assert (t.ledger_id, t.first_offset, t.entries) == (3, 0, 10)
    assert t.to_stored() == [3, 0, 10]


def test_a_managed_ledgers_record_reads_back_byte_for_byte(env):
    """Rollover, an offloaded ledger and a trimmed one: the record the store holds re-encodes
    through the named rows to the same bytes."""
    ml = ManagedLedgers(env, rollover_entries=4)

    def body(txn):
        info = ml.open(txn, "t", T0)
        ml.append(txn, info, [b"v%d" % i for i in range(14)], T0 + 1)
        ml.trim(txn, info, 4)                       # the first ledger goes
        ml.offload(txn, info, info.ledgers[0][L_ID], 4, "/off/ledger.parquet")
        return info.ml_id
    ml_id = env.write(body)
    with env.read() as txn:
        raw = bytes(txn.get(keys.u64(ml_id), db=env.db["mledgers"]))
        info = ml.info(txn, ml_id)
    record = codec.decode(raw)
    named = [LedgerRow.from_stored(r) for r in record[1]]
    trimmed = [TrimmedRow.from_stored(r) for r in record[7]]
    assert [r.offloaded for r in named] == [True, False, False]
    assert named[0].location == "/off/ledger.parquet" and named[0].first_offset == 4
    assert [r.created_ms for r in named] == [T0 + 1] * 3
    assert [t.to_stored() for t in trimmed] == [[named[0].ledger_id - 1, 0, 4]]
    again = list(record)
    again[1] = [r.to_stored() for r in named]
    again[7] = [t.to_stored() for t in trimmed]
    assert codec.encode(again) == raw
    assert rows(info) == named
    assert ml.offloaded(info) == [info.ledgers[0]]
