"""Blocks of entries (store/ledger.py, store/codec.py): entries appended together share one LMDB
key; every way of reading an entry gives the bytes appended, whatever mix of blocks, lone
entries, ledgers and offsets; a lost or damaged block is found by the checks that find a lost
entry; a format 1 store (every entry under its own key) reads as before."""
from __future__ import annotations

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from store import Env, LedgerError, ManagedLedgers, StoreFormatError, codec, keys
from store.records import record_problem
from store.salvage import deep_check
from store.ledger import BLOCK_BYTES, BLOCK_ENTRIES, values_of

from simclock import START_MS as T0  # noqa: E402

NAME = "persistent://public/default/t"
N = 2 * BLOCK_ENTRIES + 88   # two full blocks and part of a third


def value(i: int, size: int = 0) -> bytes:
    return codec.encode([i, b"x" * size])


def raw_keys(env) -> list[tuple[int, int]]:
    with env.read() as txn:
        return [keys.unpack_pair(k) for k, _v in txn.cursor(db=env.db["entries"])]


def append_all(env, ml, groups) -> tuple:
    """Append each group of values in its own transaction; return the info and all values."""
    info = env.write(lambda txn: ml.open(txn, NAME, T0))
    every = []
    for g in groups:
        def run(txn, g=g):
            i = ml.info(txn, info.ml_id)
            ml.append(txn, i, g, T0)
            return i
        info = env.write(run)
        every += g
    return info, every


def every_read(env, ml, info, start=0, end=None) -> dict:
    """What each read method gives for offsets [start, end)."""
    end = info.next_offset if end is None else min(end, info.next_offset)
    with env.read() as txn:
        runs, pieces = ml.scan_pieces(txn, info, start, end)
        return {
            "read": [ml.read(txn, info, o) for o in range(start, end)],
            "position": [ml.read_position(txn, *info.position(o)) for o in range(start, end)],
            "scan": [raw for _o, _l, _e, raw in ml.scan(txn, info, start, end)],
            "ids": [(o, lid, e) for o, lid, e, _raw in ml.scan(txn, info, start, end)],
            "values": ml.scan_values(txn, info, start, end)[1],
            "pieces": values_of(pieces),
            "runs": runs,
        }


def test_entries_appended_together_share_keys_and_read_back_exactly(env):
    ml = ManagedLedgers(env)
    info, every = append_all(env, ml, [[value(i) for i in range(N)]])
    stored = raw_keys(env)
    # N small entries: blocks of BLOCK_ENTRIES, keyed by each block's last entry id.
    lid = info.ledgers[0][0]
    assert stored == [(lid, BLOCK_ENTRIES - 1), (lid, 2 * BLOCK_ENTRIES - 1), (lid, N - 1)]
    got = every_read(env, ml, info)
    for name in ("read", "position", "scan", "values", "pieces"):
        assert got[name] == every, name
    assert got["ids"] == [(o, lid, o) for o in range(N)]
    assert got["runs"] == [(lid, 0, N)]
    # Any window, starting and ending inside blocks.
    got = every_read(env, ml, info, 100, N - 70)
    assert got["scan"] == got["values"] == got["pieces"] == every[100:N - 70]


def test_a_block_stops_at_its_byte_limit_and_a_large_entry_stands_alone(env):
    ml = ManagedLedgers(env)
    big = BLOCK_BYTES // 3
    vals = [value(0, big), value(1, big), value(2, big), value(3, 3 * BLOCK_BYTES), value(4, 10),
            value(5, 10)]
    info, every = append_all(env, ml, [vals])
    lid = info.ledgers[0][0]
    # Two thirds fit with their headers under the limit, the third does not; the large entry
    # is its own key (not a block); the last two share one.
    assert raw_keys(env) == [(lid, 1), (lid, 2), (lid, 3), (lid, 5)]
    with env.read() as txn:
        kinds = [codec.is_block(v) for _k, v in txn.cursor(db=env.db["entries"])]
    assert kinds == [True, False, False, True]
    assert every_read(env, ml, info)["scan"] == every


def test_blocks_never_cross_a_ledger_and_mix_with_lone_entries(env):
    ml = ManagedLedgers(env, rollover_entries=10)
    groups = [[value(0)], [value(i) for i in range(1, 26)], [value(26)], [value(27)],
              [value(i) for i in range(28, 33)]]
    info, every = append_all(env, ml, groups)
    assert [r[2] for r in info.ledgers] == [10, 10, 10, 3]
    got = every_read(env, ml, info)
    for name in ("read", "position", "scan", "values", "pieces"):
        assert got[name] == every, name
    for start in range(0, 33, 7):
        got = every_read(env, ml, info, start, min(33, start + 9))
        assert got["scan"] == got["pieces"] == every[start:start + 9]
    # Every key lies inside its ledger: a block's first entry id is >= 0.
    with env.read() as txn:
        for k, v in txn.cursor(db=env.db["entries"]):
            lid, last = keys.unpack_pair(k)
            n = codec.block_count(v) if codec.is_block(v) else 1
            assert last - n + 1 >= 0 and last < 10


def test_past_the_end_and_trimmed_entries_read_as_none(env):
    ml = ManagedLedgers(env, rollover_entries=10)
    info, every = append_all(env, ml, [[value(i) for i in range(25)]])
    lid0 = info.ledgers[0][0]
    with env.read() as txn:
        assert ml.read(txn, info, 25) is None
        assert ml.read_position(txn, lid0, 10) is None      # past ledger 0's last entry
        assert ml.read_position(txn, 999, 0) is None
    info = env.write(lambda txn: (ml.trim(txn, info, 12), info)[1])
    with env.read() as txn:
        assert ml.read(txn, info, 3) is None
        assert ml.read_position(txn, lid0, 3) is None
        assert [r for _o, _l, _e, r in ml.scan(txn, info, 0)] == every[10:]


def test_the_block_kept_for_neighbours_is_not_read_after_its_ledger_is_deleted(env):
    ml = ManagedLedgers(env, rollover_entries=10)
    info, every = append_all(env, ml, [[value(i) for i in range(15)]])
    lid0 = info.ledgers[0][0]

    def run(txn):
        assert ml.read_position(txn, lid0, 4) == every[4]   # keeps the block
        ml.trim(txn, info, 10)
        return ml.read_position(txn, lid0, 5)
    assert env.write(run) is None


def test_a_missing_block_is_a_ledger_error_and_a_gap_deep_check_reports(env, tmp_path):
    ml = ManagedLedgers(env)
    info, every = append_all(env, ml, [[value(i) for i in range(N)]])
    lid = info.ledgers[0][0]
    with env._env.begin(write=True) as txn:
        assert txn.delete(keys.pair(lid, 2 * BLOCK_ENTRIES - 1), db=env.db["entries"])
    with env.read() as txn:
        with pytest.raises(LedgerError, match=f"{lid}:{BLOCK_ENTRIES} is missing"):
            list(ml.scan(txn, info, 0))
        with pytest.raises(LedgerError):
            ml.scan_pieces(txn, info, BLOCK_ENTRIES + 3, BLOCK_ENTRIES + 10)
        assert ml.read(txn, info, BLOCK_ENTRIES + 3) is None
        assert ml.read(txn, info, 10) == every[10]
        assert ml.read(txn, info, N - 1) == every[N - 1]
    env.close()
    rep = deep_check(env.path)
    assert any(f"lost {BLOCK_ENTRIES} of its {N} entries" in p and
               f"{BLOCK_ENTRIES}-{2 * BLOCK_ENTRIES - 1}" in p for p in rep.problems), \
        rep.problems


def test_deep_check_reads_into_blocks(env):
    ml = ManagedLedgers(env)
    info, _every = append_all(env, ml, [[value(i) for i in range(BLOCK_ENTRIES + 44)],
                                         [value(BLOCK_ENTRIES + 44)]])
    env.close()
    rep = deep_check(env.path)
    assert rep.ok, rep.problems
    assert rep.dbs["entries"].read == 3   # two blocks and a lone entry
    good = codec.pack_block([value(1), value(2)])
    assert record_problem("entries", keys.pair(1, 1), good) is None
    assert "more entries than its key" in record_problem("entries", keys.pair(1, 0), good)
    bad_inner = codec.pack_block([value(1), b"\x01\xc1"])
    assert "cannot be decoded" in record_problem("entries", keys.pair(1, 1), bad_inner)
    short = good[:-3]
    assert "cannot be decoded" in record_problem("entries", keys.pair(1, 1), short)
    # Entries appended together share their first bytes (publish time, producer); the header
    # says how many, and a block whose entry no longer starts with them is damaged, even when
    # that entry still decodes (a bulk reader takes those fields from the first entry).
    same = [codec.encode([1_790_000_000_000, "producer", i, b"x"]) for i in range(3)]
    block = codec.pack_block(same)
    assert codec.block_prefix(block) == len(codec.encode([1_790_000_000_000, "producer"]))
    assert record_problem("entries", keys.pair(1, 2), block) is None
    changed = bytearray(block)
    at = len(block) - len(same[2]) + 4    # a byte of the third entry's publish time
    changed[at] ^= 1
    why = record_problem("entries", keys.pair(1, 2), bytes(changed))
    assert why.startswith("entry 2 of its block does not start with the"), why


def test_a_format_1_store_reads_and_is_marked_2_when_opened_for_writing(tmp_path):
    path = str(tmp_path / "s")
    e = Env(path)
    ml = ManagedLedgers(e)
    info = e.write(lambda txn: ml.open(txn, NAME, T0))
    lid = info.ledgers[0][0]
    # Entries as format 1 wrote them: one key each.
    with e._env.begin(write=True) as txn:
        for i in range(5):
            txn.put(keys.pair(lid, i), value(i), db=e.db["entries"])
        txn.put(b"format", codec.encode(1), db=e.db["meta"])
    info.ledgers[0][2] = 5
    info.next_offset = 5
    e.write(lambda txn: ml._save(txn, info))
    e.close()
    e = Env(path)
    try:
        with e.read() as txn:
            assert e.get(txn, "meta", b"format") == 2
        ml = ManagedLedgers(e)
        info = e.write(lambda txn: ml.info(txn, info.ml_id))
        e.write(lambda txn: ml.append(txn, info, [value(i) for i in range(5, 9)], T0))
        with e.read() as txn:
            info = ml.info(txn, info.ml_id)
            assert [r for _o, _l, _e, r in ml.scan(txn, info, 0)] == [value(i) for i in range(9)]
            assert ml.read(txn, info, 2) == value(2)
    finally:
        e.close()
    raw = lmdb.open(path, max_dbs=20, subdir=True)
    with raw.begin(write=True) as txn:
        txn.put(b"format", codec.encode(3), db=raw.open_db(b"meta", txn=txn))
    raw.close()
    with pytest.raises(StoreFormatError, match="reads formats 1 and 2"):
        Env(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.lists(st.lists(st.integers(0, 9000), min_size=1, max_size=40), min_size=1,
                       max_size=12),
       window=st.tuples(st.integers(0, 400), st.integers(0, 400)))
def test_any_appends_read_back_through_every_reader(tmp_path_factory, groups, window):
    env = Env(str(tmp_path_factory.mktemp("s") / "store"))
    try:
        ml = ManagedLedgers(env, rollover_entries=23)
        n = [0]

        def vals(sizes):
            out = [value(n[0] + i, s) for i, s in enumerate(sizes)]
            n[0] += len(sizes)
            return out
        info, every = append_all(env, ml, [vals(g) for g in groups])
        a, b = sorted(window)
        got = every_read(env, ml, info, a, b)
        want = every[a:b]
        for name in ("read", "position", "scan", "values", "pieces"):
            assert got[name] == want, name
        assert sum(k for _l, _e, k in got["runs"]) == len(want)
    finally:
        env.close()

