"""RangeSet (store/ranges.py) against a plain Python set, on a real LMDB store in tmp_path.

Every example works on a fresh cursor id whose neighbours (cid - 1 and cid + 1) also hold
ranges, so a range set that reads past its own keys (LMDB keys sort by cursor id first) fails.
"""
from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from store import Env
from store.ranges import RangeSet

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
LIMIT = 120          # offsets in the examples lie in [0, LIMIT)
FAR = 10 ** 12       # an offset well above any example offset


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    e = Env(str(tmp_path_factory.mktemp("ranges") / "store"))
    yield e
    e.close()


_cids = itertools.count(10, 3)


def fresh_cid(env) -> int:
    """A cursor id with a range set just below (cid - 1, far offsets) and just above
    (cid + 1, offset 0) in key order."""
    cid = next(_cids)
    rs = RangeSet(env)

    def body(txn):
        rs.add(txn, cid - 1, FAR, FAR + 5)
        rs.add(txn, cid - 1, 3, 4)
        rs.add(txn, cid + 1, 0, 2)
        rs.add(txn, cid + 1, FAR, FAR)
    env.write(body)
    return cid


def neighbours_intact(rs, txn, cid) -> None:
    assert list(rs.iter(txn, cid - 1)) == [(3, 4), (FAR, FAR + 5)]
    assert list(rs.iter(txn, cid + 1)) == [(0, 2), (FAR, FAR)]


# -- the model ---------------------------------------------------------------------------------
def runs(model: set) -> list[tuple[int, int]]:
    """Maximal runs of consecutive integers of model, sorted."""
    out = []
    for o in sorted(model):
        if out and out[-1][1] == o - 1:
            out[-1] = (out[-1][0], o)
        else:
            out.append((o, o))
    return out


def model_covering(model: set, offset: int):
    for s, e in runs(model):
        if s <= offset <= e or s > offset:
            return s, e
    return None


def check_shape(stored: list[tuple[int, int]], model: set) -> None:
    for s, e in stored:
        assert s <= e, stored
    for (s1, e1), (s2, e2) in zip(stored, stored[1:]):
        assert e1 + 1 < s2, f"ranges overlap, touch or are unsorted: {stored}"
    covered = set()
    for s, e in stored:
        covered.update(range(s, e + 1))
    assert covered == model
    assert stored == runs(model)


intervals = st.tuples(st.integers(0, LIMIT - 1), st.integers(-1, 25)).map(
    lambda t: (t[0], t[0] + t[1]))  # length -1..25 past a, so b < a happens too


@SETTINGS
@given(adds=st.lists(intervals, max_size=30))
def test_add_matches_set_model(env, adds):
    rs = RangeSet(env)
    cid = fresh_cid(env)

    def body(txn):
        model: set = set()
        for a, b in adds:
            new = set(range(a, b + 1)) - model
            assert rs.add(txn, cid, a, b) == len(new), (a, b, sorted(model))
            model |= new
            check_shape(list(rs.iter(txn, cid)), model)
        neighbours_intact(rs, txn, cid)
        return model
    model = env.write(body)
    # Durable: a later transaction sees the same ranges.
    with env.read() as txn:
        check_shape(list(rs.iter(txn, cid)), model)


@SETTINGS
@given(adds=st.lists(intervals, max_size=20),
       probes=st.lists(st.tuples(st.integers(0, LIMIT + 30), st.integers(0, LIMIT + 30)),
                       max_size=10),
       points=st.lists(st.integers(0, LIMIT + 30), max_size=15))
def test_queries_match_set_model(env, adds, probes, points):
    rs = RangeSet(env)
    cid = fresh_cid(env)
    model: set = set()

    def body(txn):
        for a, b in adds:
            rs.add(txn, cid, a, b)
            model.update(range(a, b + 1))
    env.write(body)
    with env.read() as txn:
        for start, stop in probes:
            expected = [o for o in range(start, stop) if o not in model]
            assert list(rs.unacked(txn, cid, start, stop)) == expected, (start, stop)
        for o in points:
            assert rs.covering(txn, cid, o) == model_covering(model, o), o
            assert rs.contains(txn, cid, o) == (o in model), o
        r = runs(model)
        assert rs.first(txn, cid) == (r[0] if r else None)
        for start in points:
            assert list(rs.iter(txn, cid, start)) == [x for x in r if x[0] >= start]
        neighbours_intact(rs, txn, cid)


@SETTINGS
@given(adds=st.lists(intervals, max_size=20), x=st.integers(-1, LIMIT + 30))
def test_remove_through_matches_set_model(env, adds, x):
    rs = RangeSet(env)
    cid = fresh_cid(env)

    def body(txn):
        model: set = set()
        for a, b in adds:
            rs.add(txn, cid, a, b)
            model.update(range(a, b + 1))
        run = next(((s, e) for s, e in runs(model) if s <= x < e), None)
        dropped, tail = rs.remove_through(txn, cid, x)
        assert dropped == sum(1 for o in model if o <= x)
        assert tail == (run[1] if run else None)
        rest = {o for o in model if o > x}
        check_shape(list(rs.iter(txn, cid)), rest)
        assert rs.remove_through(txn, cid, x) == (0, None)  # idempotent
        neighbours_intact(rs, txn, cid)
    env.write(body)


def test_add_merges_adjacent_and_overlapping(env):
    rs = RangeSet(env)
    cid = fresh_cid(env)

    def body(txn):
        assert rs.add(txn, cid, 10, 12) == 3
        assert rs.add(txn, cid, 14, 15) == 2
        assert list(rs.iter(txn, cid)) == [(10, 12), (14, 15)]
        assert rs.add(txn, cid, 13, 13) == 1            # fills the gap: one range
        assert list(rs.iter(txn, cid)) == [(10, 15)]
        assert rs.add(txn, cid, 9, 9) == 1              # adjacent below
        assert rs.add(txn, cid, 16, 16) == 1            # adjacent above
        assert list(rs.iter(txn, cid)) == [(9, 16)]
        assert rs.add(txn, cid, 9, 16) == 0             # nothing new
        assert rs.add(txn, cid, 12, 13) == 0
        assert rs.add(txn, cid, 5, 20) == 4 + 4          # spans it on both sides
        assert list(rs.iter(txn, cid)) == [(5, 20)]
        assert rs.add(txn, cid, 30, 29) == 0            # empty interval
        assert list(rs.iter(txn, cid)) == [(5, 20)]
        assert rs.add(txn, cid, 25, 26) == 2
        assert rs.add(txn, cid, 40, 41) == 2
        assert rs.add(txn, cid, 0, 100) == 101 - 16 - 2 - 2   # swallows three ranges
        assert list(rs.iter(txn, cid)) == [(0, 100)]
        neighbours_intact(rs, txn, cid)
    env.write(body)


def test_unacked_skips_whole_ranges(env):
    rs = RangeSet(env)
    cid = fresh_cid(env)

    def body(txn):
        rs.add(txn, cid, 0, 9)
        rs.add(txn, cid, 12, 1_000_000)
        # Would take ages offset by offset; by ranges it is immediate.
        assert list(rs.unacked(txn, cid, 0, 1_000_005)) == [10, 11, 1_000_001, 1_000_002,
                                                             1_000_003, 1_000_004]
        assert list(rs.unacked(txn, cid, 5, 5)) == []
        assert list(rs.unacked(txn, cid, 11, 12)) == [11]
    env.write(body)


def test_large_offsets_keep_numeric_order(env):
    rs = RangeSet(env)
    cid = fresh_cid(env)
    big = 2 ** 40

    def body(txn):
        rs.add(txn, cid, big, big + 1)
        rs.add(txn, cid, 255, 256)
        rs.add(txn, cid, 2 ** 32, 2 ** 32)
        assert list(rs.iter(txn, cid)) == [(255, 256), (2 ** 32, 2 ** 32), (big, big + 1)]
        assert rs.covering(txn, cid, 257) == (2 ** 32, 2 ** 32)
        assert rs.remove_through(txn, cid, big) == (2 + 1 + 1, big + 1)
        assert list(rs.iter(txn, cid)) == [(big + 1, big + 1)]
    env.write(body)


def test_pop_first_and_clear(env):
    rs = RangeSet(env)
    cid = fresh_cid(env)

    def body(txn):
        for a in (1, 5, 9):
            rs.add(txn, cid, a, a)
        rs.pop_first(txn, cid)
        assert list(rs.iter(txn, cid)) == [(5, 5), (9, 9)]
        rs.clear(txn, cid)
        assert list(rs.iter(txn, cid)) == []
        assert rs.first(txn, cid) is None
        rs.pop_first(txn, cid)                  # no-op on an empty set
        assert rs.remove_through(txn, cid, 100) == (0, None)
        neighbours_intact(rs, txn, cid)
    env.write(body)


def test_a_failed_transaction_leaves_ranges_unchanged(env):
    rs = RangeSet(env)
    cid = fresh_cid(env)
    env.write(lambda txn: rs.add(txn, cid, 3, 5))

    class Boom(Exception):
        pass

    def body(txn):
        rs.add(txn, cid, 0, 50)
        raise Boom

    with pytest.raises(Boom):
        env.write(body)
    with env.read() as txn:
        assert list(rs.iter(txn, cid)) == [(3, 5)]
