"""pulsarctl.broker.dispatch.selectors: the Key_Shared selectors against §9.2 / §12.3 of
pulsar-semantics.md, Pulsar 4.x's rules, and properties over any sequence of adds/removes."""
from __future__ import annotations

import json
import random

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from pulsarctl.broker.dispatch.selectors import (
    AUTO_SPLIT, CONSISTENT_HASHING, POLICIES, STICKY, AutoSplitSelector, ConsistentHashingSelector,
    ConsumerAssignError, StickySelector, make_selector, parse_sticky_ranges, slot_of,
    validate_sticky_ranges)
from pulsarctl.broker.dispatch.selectors import sticky_key_hash
from pulsarctl.errors import Conflict, InvalidValue

NAMES = st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h"])
OPS = st.lists(st.tuples(st.sampled_from(["add", "remove"]), NAMES), max_size=25)
FAST = settings(max_examples=40, deadline=None)


def owners(sel, top: int) -> list:
    """Slot -> owner, 0..top, from consumer_ranges (None where nobody is)."""
    arr = [None] * (top + 1)
    for c, ranges in sel.consumer_ranges().items():
        for s, e in ranges:
            assert arr[s:e + 1] == [None] * (e - s + 1), "ranges overlap"
            arr[s:e + 1] = [c] * (e - s + 1)
    return arr


def sample_slots(seed=0, n=300):
    rnd = random.Random(seed)
    return [0, 1, 2, 65534, 65535] + [rnd.randrange(65536) for _ in range(n)]


def roundtrip(sel, codec):
    state = sel.to_state()
    if codec == "json":
        data = json.loads(json.dumps(state))
    else:
        data = msgpack.unpackb(msgpack.packb(state), raw=False)
    return make_selector(sel.policy, data)


# -- §12.3 AutoSplit ---------------------------------------------------------------------------
AUTO_TABLE = [  # key, slot, owner with C1..C3, owner with C1..C4
    ("Order-3459134", 6067, "C3", "C3"),
    ("key1", 293, "C3", "C3"),
    ("key2", 14772, "C3", "C3"),
    ("my-key", 47409, "C1", "C4"),
    ("hello", 64071, "C1", "C1"),
]


def test_auto_split_table_12_3():
    sel = make_selector(AUTO_SPLIT)
    for c in ("C1", "C2", "C3"):
        sel.add_consumer(c)
    assert sel.to_state()["ranges"] == [[16384, "C3"], [32768, "C2"], [65536, "C1"]]
    for key, slot, three, _ in AUTO_TABLE:
        assert slot_of(AUTO_SPLIT, key.encode()) == slot
        assert sel.select(slot) == three
        assert sel.select_key(key.encode()) == three
    sel.add_consumer("C4")
    assert sel.to_state()["ranges"] == [[16384, "C3"], [32768, "C2"], [49152, "C4"],
                                        [65536, "C1"]]
    for key, slot, _, four in AUTO_TABLE:
        assert sel.select(slot) == four


def test_auto_split_split_and_ranges():
    sel = AutoSplitSelector()
    assert sel.select(5) is None
    sel.add_consumer("C1")
    assert sel.consumer_ranges() == {"C1": [(0, 65536)]}
    sel.add_consumer("C2")  # the new consumer takes the LOWER half
    assert sel.consumer_ranges() == {"C2": [(0, 32768)], "C1": [(32769, 65536)]}
    assert sel.select(32768) == "C2" and sel.select(32769) == "C1"
    sel.add_consumer("C3")  # tie between two 32768-slot ranges: the lowest one splits
    assert sel.to_state()["ranges"] == [[16384, "C3"], [32768, "C2"], [65536, "C1"]]
    sel.add_consumer("C3")  # the same consumer again changes nothing
    assert len(sel) == 3 and "C3" in sel


def test_auto_split_remove_merges_right():
    sel = AutoSplitSelector()
    for c in ("C1", "C2", "C3", "C4"):
        sel.add_consumer(c)
    sel.remove_consumer("C2")  # (16384, 32768] goes to C4, the consumer on its right
    assert sel.to_state()["ranges"] == [[16384, "C3"], [49152, "C4"], [65536, "C1"]]
    assert sel.select(20000) == "C4"
    sel.remove_consumer("C1")  # the top consumer: the one below moves up to 65536
    assert sel.to_state()["ranges"] == [[16384, "C3"], [65536, "C4"]]
    sel.remove_consumer("nobody")
    sel.remove_consumer("C3")
    sel.remove_consumer("C4")
    assert sel.to_state()["ranges"] == [] and sel.select(1) is None


def test_auto_split_no_more_range():
    sel = AutoSplitSelector(range_size=4)
    for c in "abcd":
        sel.add_consumer(c)
    assert sel.to_state()["ranges"] == [[1, "c"], [2, "b"], [3, "d"], [4, "a"]]
    with pytest.raises(ConsumerAssignError) as e:
        sel.add_consumer("e")
    assert isinstance(e.value, Conflict) and e.value.exit_code == 4
    assert e.value.message == "No more range can assigned to new consumer, assigned consumers 4"
    assert "e" not in sel and len(sel) == 4
    with pytest.raises(ValueError):
        AutoSplitSelector(range_size=6)


@given(OPS)
@FAST
def test_auto_split_properties(ops):
    sel, live = AutoSplitSelector(), set()
    for op, name in ops:
        if op == "add":
            sel.add_consumer(name)
            live.add(name)
        else:
            sel.remove_consumer(name)
            live.discard(name)
        assert set(sel.consumers()) == live
        ranges = sel.consumer_ranges()
        assert set(ranges) == live
        flat = sorted((s, e, c) for c, rs in ranges.items() for s, e in rs)
        if live:  # slots 0..65536 (Pulsar's bounds), each exactly once, one range per consumer
            assert all(len(rs) == 1 for rs in ranges.values())
            assert flat[0][0] == 0 and flat[-1][1] == 65536
            assert all(a[1] + 1 == b[0] for a, b in zip(flat, flat[1:]))
            for s, e, c in flat:
                assert sel.select(s) == c and sel.select(e) == c
        else:
            assert flat == []
        for slot in sample_slots(len(ops), 40):
            got = sel.select(slot)
            assert (got in live) if live else got is None
    again = roundtrip(sel, "json")
    assert again.to_state() == sel.to_state()
    assert all(again.select(s) == sel.select(s) for s in sample_slots(1, 100))


# -- ConsistentHashing -------------------------------------------------------------------------
def test_consistent_hashing_points_and_slot():
    sel = ConsistentHashingSelector()
    sel.add_consumer("c1")
    pts = {sticky_key_hash(f"c1\0{0}\0{i}".encode(), 1, 65535) for i in range(100)}
    assert set(sel._ring) == pts  # points at makeStickyKeyHash(name \0 nameIndex \0 i)
    assert all(1 <= p <= 65535 for p in pts)
    assert slot_of(CONSISTENT_HASHING, b"Order-3459134") == 20788
    assert slot_of(CONSISTENT_HASHING, b"key1") == 7357
    assert sel.select(20788) == "c1"
    assert sel.consumer_ranges() == {"c1": [(1, 65535)]}


def test_consistent_hashing_select_is_ceiling_then_first():
    sel = ConsistentHashingSelector()
    for c in ("c1", "c2", "c3"):
        sel.add_consumer(c)
    keys = sorted(sel._ring)
    first = sel._ring[keys[0]][0]
    for lower, k in zip([0] + keys, keys):  # every slot in (lower, k] belongs to point k
        want = sel._ring[k][0]
        assert {sel.select(s) for s in (lower + 1, (lower + k + 1) // 2, k)} == {want}
    assert keys[-1] < 65535
    assert sel.select(keys[-1] + 1) == sel.select(65535) == first  # wraps to the first point


def test_consistent_hashing_ranges_match_select_everywhere():
    sel = ConsistentHashingSelector()
    for c in ("c1", "c2", "c3", "c4"):
        sel.add_consumer(c)
    arr = owners(sel, 65535)
    assert arr[0] is None  # slot 0 is STICKY_KEY_HASH_NOT_SET
    assert all(sel.select(s) == arr[s] for s in range(1, 65536))


def test_consistent_hashing_collision_fallback():
    # c0 and c1 (name index 0) both have a point at slot 46822.
    sel = ConsistentHashingSelector()
    sel.add_consumer("c0")
    sel.add_consumer("c1")
    assert sel._ring[46822] == ["c0", "c1"]
    assert sel.select(46822) == "c0"  # the first consumer keeps the point
    sel.remove_consumer("c0")
    assert sel.select(46822) == "c1"  # the colliding one takes over
    assert sel.consumer_ranges() == {"c1": [(1, 65535)]}
    other = ConsistentHashingSelector()
    other.add_consumer("c1")
    other.add_consumer("c0")
    assert other.select(46822) == "c1"


def test_consumer_name_index_tracker():
    sel = ConsistentHashingSelector()
    sel.add_consumer("x1", consumer_name="worker")
    sel.add_consumer("x2", consumer_name="worker")
    assert [c[2] for c in sel.to_state()["consumers"]] == [0, 1]
    sel.remove_consumer("x1")
    sel.add_consumer("x3", consumer_name="worker")  # the lowest free index again
    assert sel.to_state()["consumers"] == [["x2", "worker", 1], ["x3", "worker", 0]]
    # Same points as a lone "worker" with index 0: a rejoining name gets its old slots back.
    lone = ConsistentHashingSelector()
    lone.add_consumer("worker")
    x3_points = {p for p, o in sel._ring.items() if "x3" in o}
    assert x3_points == set(lone._ring)
    again = roundtrip(sel, "msgpack")
    assert again.to_state() == sel.to_state()
    assert again._ring == sel._ring


@given(OPS)
@FAST
def test_consistent_hashing_properties(ops):
    sel, live = ConsistentHashingSelector(), set()
    before = owners(sel, 65535)
    for op, name in ops:
        if op == "add":
            sel.add_consumer(name)
            live.add(name)
        else:
            sel.remove_consumer(name)
        after = owners(sel, 65535)
        if op == "add":  # only slots that go to the new consumer move
            assert all(a == b or b == name for a, b in zip(before, after))
        else:  # only the removed consumer's slots move
            live.discard(name)
            assert all(a == b or a == name for a, b in zip(before, after))
        assert set(sel.consumers()) == live
        assert after[0] is None
        assert all(c in live for c in after[1:]) if live else set(after) == {None}
        for slot in sample_slots(len(ops), 30):
            got = sel.select(slot)
            if slot:
                assert got == after[slot]
            assert (got in live) if live else got is None
        before = after
    again = roundtrip(sel, "json")
    assert again.to_state() == sel.to_state()
    assert owners(again, 65535) == before


# -- Sticky ------------------------------------------------------------------------------------
def test_sticky_select_and_ranges():
    sel = make_selector(STICKY)
    sel.add_consumer("a", ranges=[(0, 99), (200, 299)])
    sel.add_consumer("b", ranges=parse_sticky_ranges("100-150"))
    assert sel.select(0) == "a" and sel.select(99) == "a" and sel.select(250) == "a"
    assert sel.select(100) == "b" and sel.select(150) == "b"
    assert sel.select(151) is None and sel.select(300) is None  # uncovered slots wait
    assert sel.consumer_ranges() == {"a": [(0, 99), (200, 299)], "b": [(100, 150)]}
    sel.remove_consumer("a")
    assert sel.select(50) is None and sel.consumers() == ["b"]
    assert StickySelector().select(5) is None


def test_sticky_touching_ranges_are_merged_in_report():
    sel = StickySelector()
    sel.add_consumer("a", ranges=[(0, 9), (10, 19)])
    assert sel.consumer_ranges() == {"a": [(0, 19)]}


def test_sticky_conflict_with_another_consumer():
    sel = StickySelector()
    sel.add_consumer("a", ranges=[(0, 32767)])
    for ranges in ([(32767, 40000)], [(100, 200)], [(40000, 50000), (0, 0)], [(0, 65535)]):
        with pytest.raises(ConsumerAssignError) as e:
            sel.add_consumer("b", ranges=ranges)
        assert e.value.exit_code == 4
        assert e.value.message == "Range conflict with consumer a"
        assert "[0, 32767]" in e.value.hint
    assert sel.consumers() == ["a"]
    sel.add_consumer("b", ranges=[(32768, 65535)])
    assert sel.select(65535) == "b"


def test_sticky_reports_the_consumer_pulsar_finds_first():
    sel = StickySelector()
    sel.add_consumer("a", ranges=[(0, 10)])
    sel.add_consumer("b", ranges=[(20, 30)])
    with pytest.raises(ConsumerAssignError, match="consumer b"):
        sel.add_consumer("c", ranges=[(25, 26), (5, 6)])
    with pytest.raises(ConsumerAssignError, match="consumer a"):
        sel.add_consumer("c", ranges=[(5, 25)])  # floor entry first


def test_sticky_readd_replaces_own_ranges():
    sel = StickySelector()
    sel.add_consumer("a", ranges=[(0, 10), (11, 20)])
    sel.add_consumer("b", ranges=[(21, 30)])
    sel.add_consumer("a", ranges=[(5, 15)])  # overlapping its old ranges is fine
    assert sel.consumer_ranges() == {"a": [(5, 15)], "b": [(21, 30)]}
    with pytest.raises(ConsumerAssignError, match="consumer b"):
        sel.add_consumer("a", ranges=[(5, 25)])  # hidden behind its own old ranges
    assert sel.consumer_ranges() == {"a": [(5, 15)], "b": [(21, 30)]}


@pytest.mark.parametrize("ranges, message", [
    ([], "Ranges for KeyShared policy must not be empty."),
    (None, "Ranges for KeyShared policy must not be empty."),
    ([(5, 3)], "Fixed hash range start > end for range: [5,3]"),
    ([(0, 65536)], "Ranges must be [0, 65535] but provided range is [0, 65536]"),
    ([(-1, 5)], "Ranges must be [0, 65535] but provided range is [-1, 5]"),
    ([(0, 100), (50, 150)], "Consumer's own ranges conflict: [0,100] overlaps with [50,150]"),
    ([(50, 150), (0, 50)], "Consumer's own ranges conflict: [0,50] overlaps with [50,150]"),
    ([(1, 2, 3)], "malformed hash range (1, 2, 3)"),
])
def test_sticky_validation(ranges, message):
    with pytest.raises(InvalidValue) as e:
        validate_sticky_ranges(ranges)
    assert e.value.exit_code == 2
    assert e.value.message == message
    assert "START-END" in e.value.hint
    with pytest.raises(InvalidValue):
        StickySelector().add_consumer("a", ranges=ranges)


def test_parse_sticky_ranges():
    assert parse_sticky_ranges("0-32767,32768-65535") == [(0, 32767), (32768, 65535)]
    assert parse_sticky_ranges(" 5 - 5 , 7-9") == [(5, 5), (7, 9)]
    for bad in ("", "  ", "x", "1-", "-5", "1-2-3", "1-2,", "1:2", "0-10,5-20", "0-70000",
                "١-٢"):
        with pytest.raises(InvalidValue) as e:
            parse_sticky_ranges(bad)
        assert e.value.exit_code == 2


@st.composite
def range_lists(draw):
    n = draw(st.integers(1, 3))
    out = []
    for _ in range(n):
        s = draw(st.integers(0, 65535))
        out.append((s, draw(st.integers(s, min(65535, s + 20000)))))
    return out


@given(st.lists(st.tuples(NAMES, range_lists(), st.booleans()), max_size=12))
@FAST
def test_sticky_properties(steps):
    sel, model = StickySelector(), {}
    for name, ranges, remove in steps:
        if remove:
            sel.remove_consumer(name)
            model.pop(name, None)
            continue
        own = sorted(ranges)
        own_overlap = any(a[1] >= b[0] for a, b in zip(own, own[1:]))
        others = [(s, e) for c, rs in model.items() if c != name for s, e in rs]
        clash = any(max(s, os_) <= min(e, oe) for s, e in ranges for os_, oe in others)
        try:
            sel.add_consumer(name, ranges=ranges)
        except InvalidValue:
            assert own_overlap
            continue
        except ConsumerAssignError:
            assert clash and not own_overlap
            continue
        assert not own_overlap and not clash
        model[name] = ranges

    def owner(slot):
        hits = [c for c, rs in model.items() for s, e in rs if s <= slot <= e]
        assert len(hits) <= 1
        return hits[0] if hits else None

    probes = sample_slots(len(steps), 60)
    for rs in model.values():
        for s, e in rs:
            probes += [s - 1, s, e, e + 1]
    for slot in probes:
        if 0 <= slot <= 65535:
            assert sel.select(slot) == owner(slot)
    again = roundtrip(sel, "msgpack")
    assert again.to_state() == sel.to_state()
    assert all(again.select(s) == sel.select(s) for s in probes if 0 <= s <= 65535)


# -- factory -----------------------------------------------------------------------------------
def test_make_selector_and_slot_of():
    assert POLICIES == ("auto-split", "consistent-hashing", "sticky")
    assert isinstance(make_selector("auto-split"), AutoSplitSelector)
    assert isinstance(make_selector("consistent-hashing"), ConsistentHashingSelector)
    assert isinstance(make_selector("sticky"), StickySelector)
    for bad in ("AUTO_SPLIT", "hash", ""):
        with pytest.raises(InvalidValue) as e:
            make_selector(bad)
        assert e.value.exit_code == 2 and "auto-split, consistent-hashing, sticky" in e.value.hint
        with pytest.raises(InvalidValue):
            slot_of(bad, b"k")
    assert slot_of(STICKY, b"Order-3459134") == 6067
    assert slot_of(AUTO_SPLIT, b"k179888") == 1  # 0 -> 1
    with pytest.raises(ValueError):
        make_selector(STICKY, AutoSplitSelector().to_state())


def test_state_is_plain_data():
    sels = [make_selector(p) for p in POLICIES]
    sels[0].add_consumer("a")
    sels[1].add_consumer("a")
    sels[2].add_consumer("a", ranges=[(0, 10)])

    def plain(x):
        if isinstance(x, dict):
            return all(isinstance(k, str) and plain(v) for k, v in x.items())
        if isinstance(x, list):
            return all(plain(v) for v in x)
        return isinstance(x, (int, str))

    for sel in sels:
        assert plain(sel.to_state())
        assert json.loads(json.dumps(sel.to_state())) == sel.to_state()
        for codec in ("json", "msgpack"):
            again = roundtrip(sel, codec)
            assert type(again) is type(sel)
            assert again.consumer_ranges() == sel.consumer_ranges()
