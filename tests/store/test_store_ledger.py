"""Managed ledgers (store/ledger.py) on a real LMDB store in tmp_path: appends, rollover,
store-wide ledger ids, positions <-> offsets, scans across ledger boundaries, trim, delete."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from store import Env, ManagedLedgers, Position
from store.ledger import LedgerInfo

from simclock import START_MS as T0  # noqa: E402  (2026-01-01T00:00:00Z)


def value(i: int, tag: str = "a") -> bytes:
    return f"{tag}-{i}".encode()


def reload(env, ml: ManagedLedgers, info: LedgerInfo) -> LedgerInfo:
    with env.read() as txn:
        return ml.info(txn, info.ml_id)


def scan(ml, txn, info, start, end=None) -> list[tuple[int, bytes]]:
    """(offset, bytes) pairs of ml.scan; where scan also yields (ledger id, entry id) per
    entry, they must be the entry's position."""
    out = []
    for row in ml.scan(txn, info, start, end):
        if len(row) > 2:
            assert Position(*row[1:3]) == info.position(row[0]), row
        out.append((row[0], bytes(row[-1])))
    return out


def as_positions(result) -> list[Position]:
    """The positions an append returned: a list of positions, or runs of (ledger id, first
    entry id, count) in order."""
    out = []
    for r in result:
        if len(r) == 2:
            out.append(Position(*r))
        else:
            lid, e0, n = r
            out.extend(Position(lid, e) for e in range(e0, e0 + n))
    return out


def same(a: LedgerInfo, b: LedgerInfo) -> bool:
    return a.ml_id == b.ml_id and a.to_record() == b.to_record()


def test_open_creates_an_empty_first_ledger(env):
    ml = ManagedLedgers(env)
    info = env.write(lambda txn: ml.open(txn, "persistent://public/default/t", T0))
    assert len(info.ledgers) == 1
    lid = info.ledgers[0][0]
    assert info.ledgers[0][1:4] == [0, 0, 0]
    assert (info.next_offset, info.first_offset, info.entries, info.last_offset) == (0, 0, 0, -1)
    assert info.created_ms == T0
    # An empty topic already has the position (ledger, -1).
    assert info.mark_position(-1) == Position(lid, -1)
    assert info.offset(lid, -1) == -1
    assert info.offset(lid, 0) is None
    # Opening again returns the same managed ledger; nothing new is made.
    again = env.write(lambda txn: ml.open(txn, "persistent://public/default/t", T0 + 5))
    assert same(again, info)
    with env.read() as txn:
        assert ml.lookup(txn, "persistent://public/default/t") == info.ml_id
        assert ml.lookup(txn, "nope") is None
        assert ml.owner(txn, lid) == info.ml_id


def test_append_many_entries_in_one_transaction(env):
    ml = ManagedLedgers(env)
    values = [value(i) * (i % 7 + 1) for i in range(5000)]

    def body(txn):
        info = ml.open(txn, "big", T0)
        return info, as_positions(ml.append(txn, info, values, T0))
    info, positions = env.write(body)
    lid = info.ledgers[0][0]
    assert positions == [Position(lid, i) for i in range(5000)]
    info = reload(env, ml, info)
    assert info.next_offset == info.entries_added == 5000
    assert info.bytes_added == info.total_size == sum(map(len, values))
    assert info.ledgers[0][2:4] == [5000, sum(map(len, values))]
    with env.read() as txn:
        assert [v for _, v in scan(ml, txn, info, 0)] == values
        assert ml.read(txn, info, 4999) == values[4999]
        assert ml.read(txn, info, 5000) is None
        assert ml.read_position(txn, lid, 17) == values[17]


def test_rollover_after_n_entries(env):
    ml = ManagedLedgers(env, rollover_entries=4)

    def body(txn):
        info = ml.open(txn, "t", T0)
        return info, as_positions(ml.append(txn, info, [value(i) for i in range(10)], T0 + 1))
    info, positions = env.write(body)
    l1, l2, l3 = (r[0] for r in info.ledgers)
    assert [r[1:3] for r in info.ledgers] == [[0, 4], [4, 4], [8, 2]]
    assert positions == ([Position(l1, e) for e in range(4)] + [Position(l2, e) for e in range(4)]
                         + [Position(l3, e) for e in range(2)])
    assert l1 < l2 < l3
    # A full ledger stays current until the next append, which rolls over first.
    more = as_positions(env.write(lambda txn: ml.append(
        txn, ml.info(txn, info.ml_id), [value(i) for i in range(10, 12)], T0 + 2)))
    assert more == [Position(l3, 2), Position(l3, 3)]
    nxt = as_positions(env.write(
        lambda txn: ml.append(txn, ml.info(txn, info.ml_id), [b"x"], T0 + 3)))
    info = reload(env, ml, info)
    assert nxt == [Position(info.ledgers[-1][0], 0)]
    assert len(info.ledgers) == 4
    assert info.ledgers[-1][4] == T0 + 3          # created at the append that needed it


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rollover=st.integers(1, 7), batches=st.lists(st.integers(0, 15), min_size=1, max_size=8))
def test_positions_and_offsets_round_trip(tmp_path_factory, rollover, batches):
    env = Env(str(tmp_path_factory.mktemp("ml") / "store"))
    try:
        ml = ManagedLedgers(env, rollover_entries=rollover)
        info = env.write(lambda txn: ml.open(txn, "t", T0))
        got = []
        for k, n in enumerate(batches):
            vals = [value(len(got) + j) for j in range(n)]
            got += as_positions(env.write(
                lambda txn: ml.append(txn, ml.info(txn, info.ml_id), vals, T0 + k)))
        info = reload(env, ml, info)
        total = sum(batches)
        assert info.next_offset == total and len(got) == total
        # Positions: consecutive entry ids inside a ledger, a new ledger every `rollover`.
        lids = []
        for p in got:
            if p.ledger_id not in lids:
                lids.append(p.ledger_id)
        assert lids == sorted(lids)
        for o, p in enumerate(got):
            assert p == Position(lids[o // rollover], o % rollover)
            assert info.position(o) == p
            assert info.offset(p.ledger_id, p.entry_id) == o
        # (ledger, -1): the position before a ledger's first entry.
        for row in info.ledgers:
            assert info.offset(row[0], -1) == row[1] - 1
            if row[1] > 0:
                assert info.mark_position(row[1] - 1) == Position(row[0], -1)
        assert info.mark_position(-1) == Position(info.ledgers[0][0], -1)
        for o in range(total):
            if o + 1 not in [r[1] for r in info.ledgers]:
                assert info.mark_position(o) == info.position(o)
        # Entry ids past a ledger's entries name nothing.
        for row in info.ledgers:
            assert info.offset(row[0], row[2]) is None
        assert info.offset(10 ** 9, 0) is None
        # A scan from any start crosses ledger boundaries in order.
        with env.read() as txn:
            assert scan(ml, txn, info, 0) == [(o, value(o)) for o in range(total)]
            for start in range(0, total + 1, max(1, total // 5)):
                end = min(total, start + rollover + 1)
                assert scan(ml, txn, info, start, end) == [
                    (o, value(o)) for o in range(start, end)]
    finally:
        env.close()


def test_ledger_ids_unique_across_managed_ledgers(env):
    ml = ManagedLedgers(env, rollover_entries=3)
    a = env.write(lambda txn: ml.open(txn, "a", T0))
    b = env.write(lambda txn: ml.open(txn, "b", T0))
    pos = {"a": [], "b": []}
    for i in range(8):
        for name, info in (("a", a), ("b", b)):
            n = 1 + (i % 2) + (name == "b")
            def body(txn, info=info, name=name, n=n):
                cur = ml.info(txn, info.ml_id)
                start = cur.next_offset
                vals = [value(start + j, name) for j in range(n)]
                return as_positions(ml.append(txn, cur, vals, T0))
            pos[name] += env.write(body)
    a, b = reload(env, ml, a), reload(env, ml, b)
    ids_a = [r[0] for r in a.ledgers]
    ids_b = [r[0] for r in b.ledgers]
    assert len(ids_a) > 2 and len(ids_b) > 2
    assert not set(ids_a) & set(ids_b)
    assert ids_a == sorted(ids_a) and ids_b == sorted(ids_b)
    # The ids interleave, so the scans below cross keys of the other managed ledger.
    assert max(ids_a) > min(ids_b) and max(ids_b) > min(ids_a)
    with env.read() as txn:
        for lid in ids_a:
            assert ml.owner(txn, lid) == a.ml_id
        for lid in ids_b:
            assert ml.owner(txn, lid) == b.ml_id
        assert [v for _, v in scan(ml, txn, a, 0)] == [value(o, "a") for o in range(a.next_offset)]
        assert [v for _, v in scan(ml, txn, b, 0)] == [value(o, "b") for o in range(b.next_offset)]
        for o in range(a.next_offset):
            assert ml.read(txn, a, o) == value(o, "a")
    assert [a.position(o) for o in range(a.next_offset)] == pos["a"]
    assert [b.position(o) for o in range(b.next_offset)] == pos["b"]
    # Ledger ids also never repeat after a managed ledger is deleted.
    env.write(lambda txn: ml.delete(txn, ml.info(txn, a.ml_id)))
    c = env.write(lambda txn: ml.open(txn, "c", T0))
    assert c.ledgers[0][0] > max(ids_a + ids_b)
    assert c.ml_id not in (a.ml_id, b.ml_id)


def test_append_below_a_later_ledger_of_another_managed_ledger(env):
    """Ledger ids are store-wide, so a topic's current ledger can sort below a ledger another
    topic opened later and has written to. Appends to it must still all be kept."""
    ml = ManagedLedgers(env)
    a = env.write(lambda txn: ml.open(txn, "a", T0))
    b = env.write(lambda txn: ml.open(txn, "b", T0))
    assert a.ledgers[0][0] < b.ledgers[0][0]
    env.write(lambda txn: ml.append(txn, ml.info(txn, a.ml_id), [b"a0"], T0))
    env.write(lambda txn: ml.append(txn, ml.info(txn, b.ml_id), [b"b0", b"b1"], T0))
    pos = as_positions(env.write(
        lambda txn: ml.append(txn, ml.info(txn, a.ml_id), [b"a1", b"a2"], T0)))
    lid = a.ledgers[0][0]
    assert pos == [Position(lid, 1), Position(lid, 2)]
    with env.read() as txn:
        a = ml.info(txn, a.ml_id)
        assert [ml.read(txn, a, o) for o in range(3)] == [b"a0", b"a1", b"a2"]
        assert ml.read_position(txn, lid, 2) == b"a2"
        assert scan(ml, txn, a, 0) == [(0, b"a0"), (1, b"a1"), (2, b"a2")]
        b = ml.info(txn, b.ml_id)
        assert scan(ml, txn, b, 0) == [(0, b"b0"), (1, b"b1")]


def test_names_by_prefix(env):
    ml = ManagedLedgers(env)
    for n in ("persistent://p/x/a", "persistent://p/x/b", "persistent://p/y/c", "q"):
        env.write(lambda txn, n=n: ml.open(txn, n, T0))
    with env.read() as txn:
        assert [n for n, _ in ml.names(txn, "persistent://p/x/")] == [
            "persistent://p/x/a", "persistent://p/x/b"]
        assert len(list(ml.names(txn))) == 4


def filled(env, rollover: int, n: int, name="t"):
    ml = ManagedLedgers(env, rollover_entries=rollover)

    def body(txn):
        info = ml.open(txn, name, T0)
        ml.append(txn, info, [value(i, name) for i in range(n)], T0)
        return info
    return ml, env.write(body)


def test_trim_deletes_closed_ledgers_fully_below(env):
    ml, info = filled(env, 5, 17)               # ledgers of 5, 5, 5, 2
    _, other = filled(env, 5, 12, name="other")
    l1, l2, l3, l4 = (r[0] for r in info.ledgers)
    size_before = info.total_size

    assert env.write(lambda txn: ml.trim(txn, ml.info(txn, info.ml_id), 4)) == []   # 4 < 5
    assert env.write(lambda txn: ml.trim(txn, ml.info(txn, info.ml_id), 7)) == [l1]
    info = reload(env, ml, info)
    assert [r[0] for r in info.ledgers] == [l2, l3, l4]
    assert info.first_offset == 5 and info.entries == 12 and info.next_offset == 17
    assert info.total_size == size_before - sum(len(value(i, "t")) for i in range(5))
    assert info.entries_added == 17             # a counter, not what is held
    with env.read() as txn:
        for e in range(5):
            assert ml.read_position(txn, l1, e) is None
        assert ml.read(txn, info, 0) is None
        assert ml.read(txn, info, 5) == value(5, "t")
        assert [o for o, _ in scan(ml, txn, info, 0)] == list(range(5, 17))
    # Positions of trimmed entries are still known (for ids and mark-delete positions).
    assert info.position(2) == Position(l1, 2)
    assert info.mark_position(4) == Position(l2, -1)
    assert info.offset(l1, 2) == 2

    # Never the current ledger, even when every entry lies below.
    assert env.write(lambda txn: ml.trim(txn, ml.info(txn, info.ml_id), 10 ** 6)) == [l2, l3]
    info = reload(env, ml, info)
    assert [r[0] for r in info.ledgers] == [l4]
    assert info.first_offset == 15
    with env.read() as txn:
        assert scan(ml, txn, info, 0) == [(15, value(15, "t")), (16, value(16, "t"))]
    # The other managed ledger lost nothing.
    with env.read() as txn:
        o = ml.info(txn, other.ml_id)
        assert [v for _, v in scan(ml, txn, o, 0)] == [value(i, "other") for i in range(12)]
    # Appends go on from where they were.
    pos = as_positions(env.write(
        lambda txn: ml.append(txn, ml.info(txn, info.ml_id), [b"n"], T0)))
    assert pos == [Position(l4, 2)]
    assert reload(env, ml, info).next_offset == 18


def test_trim_keeps_a_full_current_ledger(env):
    ml, info = filled(env, 5, 10)               # two full ledgers; the second is current
    l1, l2 = (r[0] for r in info.ledgers)
    assert env.write(lambda txn: ml.trim(txn, ml.info(txn, info.ml_id), 10)) == [l1]
    info = reload(env, ml, info)
    assert [r[0] for r in info.ledgers] == [l2]
    with env.read() as txn:
        assert [o for o, _ in scan(ml, txn, info, 0)] == list(range(5, 10))


def test_trim_of_a_single_ledger_does_nothing(env):
    ml, info = filled(env, 100, 10)
    assert env.write(lambda txn: ml.trim(txn, ml.info(txn, info.ml_id), 50)) == []
    with env.read() as txn:
        assert len(scan(ml, txn, ml.info(txn, info.ml_id), 0)) == 10


def test_delete_removes_everything_of_the_managed_ledger(env):
    ml, info = filled(env, 4, 14)
    _, other = filled(env, 4, 6, name="other")
    env.write(lambda txn: ml.trim(txn, ml.info(txn, info.ml_id), 5))    # one ledger trimmed
    info = reload(env, ml, info)
    all_lids = [r[0] for r in info.trimmed] + [r[0] for r in info.ledgers]
    assert len(all_lids) == 4
    env.write(lambda txn: ml.delete(txn, ml.info(txn, info.ml_id)))
    with env.read() as txn:
        assert ml.lookup(txn, "t") is None
        with pytest.raises(KeyError):
            ml.info(txn, info.ml_id)
        for lid in all_lids:
            for e in range(4):
                assert ml.read_position(txn, lid, e) is None
            assert ml.owner(txn, lid) is None, f"owner record of ledger {lid} left behind"
        o = ml.info(txn, other.ml_id)
        assert [v for _, v in scan(ml, txn, o, 0)] == [value(i, "other") for i in range(6)]
        assert [n for n, _ in ml.names(txn)] == ["other"]
    # The name can be used again, for a new, empty managed ledger.
    again = env.write(lambda txn: ml.open(txn, "t", T0))
    assert again.ml_id != info.ml_id and again.next_offset == 0


def test_an_aborted_append_writes_nothing(env):
    ml, info = filled(env, 3, 4)

    class Boom(Exception):
        pass

    def body(txn):
        ml.append(txn, ml.info(txn, info.ml_id), [b"x"] * 10, T0)
        raise Boom
    with pytest.raises(Boom):
        env.write(body)
    after = reload(env, ml, info)
    assert same(after, info)
    with env.read() as txn:
        assert [o for o, _ in scan(ml, txn, after, 0)] == [0, 1, 2, 3]
    # The next ledger id was not consumed either.
    nxt = as_positions(env.write(
        lambda txn: ml.append(txn, ml.info(txn, info.ml_id), [b"y"] * 3, T0)))
    assert nxt[-1].ledger_id == info.ledgers[-1][0] + 1
