"""pulsarctl.broker.hashing: the test vectors of pulsar-semantics.md §12 verbatim, Pulsar's
router and Failover tables (§3.2, §4), and the sticky key / slot rules of §9.1."""
from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings, strategies as st

from pulsarctl.broker.dispatch.failover import failover_active
from pulsarctl.broker.dispatch.selectors import (
    DEFAULT_RANGE_SIZE, NONE_KEY, sticky_key, sticky_key_hash)
from pulsarctl.broker.hashing import java_hash_code, java_string_hash, murmur3_32_hash
from pulsarctl.broker.routing import HASHING_SCHEMES, PartitionRouter, hash_key
from pulsarctl.errors import InvalidValue

import mmh3

TOPIC = "persistent://public/default/my-topic"


# -- §12: Murmur3_32 ---------------------------------------------------------------------------
@pytest.mark.parametrize("key, masked", [
    # [C] tests/HashTest.cc "Same value as Java client"
    ("k1", 2110152746), ("k2", 1479966664), ("key1", 462881061), ("key2", 1936800180),
    ("key01", 39696932), ("key02", 751761803),
])
def test_murmur3_matches_cpp_hash_test(key, masked):
    assert murmur3_32_hash(key) == masked
    assert murmur3_32_hash(key.encode()) == masked
    assert hash_key(key, "Murmur3_32Hash") == masked


# §12.1: key, unsigned, signed int, & MAX, AutoSplit slot, ConsistentHashing slot (or None)
MURMUR_TABLE = [
    ("Order-3459134", 3112179635, -1182787661, 964695987, 6067, 20788),
    ("key1", 2610364709, -1684602587, 462881061, 293, 7357),
    ("key2", 1936800180, 1936800180, 1936800180, 14772, None),
    ("my-key", 1844492593, 1844492593, 1844492593, 47409, None),
    ("test-key", 3348866371, -946100925, 1201382723, 42307, None),
    ("hello", 613153351, 613153351, 613153351, 64071, None),
    ("a", 1009084850, None, 1009084850, 27058, None),
    ("0", 3530670207, -764297089, 1383186559, 49279, None),
    ("中文", 3676729751, -618237545, 1529246103, 29079, None),
]


@pytest.mark.parametrize("key, unsigned, signed, masked, auto_slot, ch_slot", MURMUR_TABLE)
def test_murmur3_table_12_1(key, unsigned, signed, masked, auto_slot, ch_slot):
    data = key.encode()
    assert mmh3.hash(data, 0, signed=False) == unsigned
    if signed is not None:
        assert mmh3.hash(data, 0) == signed
    assert murmur3_32_hash(key) == masked
    assert sticky_key_hash(data) == auto_slot  # 4.x AutoSplit / Sticky: [0, 65535]
    assert sticky_key_hash(data, 0, 65535) == masked % 65536
    if ch_slot is not None:
        assert sticky_key_hash(data, 1, 65535) == ch_slot  # 4.x ConsistentHashing: [1, 65535]


def test_docs_example_slot_6067():
    # murmur32("Order-3459134") = 3112179635 unsigned; masking keeps the low 16 bits.
    assert 3112179635 % 65536 == 964695987 % 65536 == 6067


# -- §12: JavaStringHash -----------------------------------------------------------------------
def test_java_string_hash_cpp_vectors():
    assert java_string_hash("keykeykeykeykey1") == 434058482
    assert java_hash_code("keykeykey2") < 0
    assert java_string_hash("keykeykey2") == 42978643
    assert hash_key("keykeykey2", "JavaStringHash") == 42978643


def test_java_hash_code_utf16():
    assert java_hash_code("") == 0
    assert java_hash_code("a") == 97
    assert java_hash_code("Order-3459134") == -1064845362
    assert java_hash_code("my-key") == -1061197122
    # A supplementary character counts as its two UTF-16 code units (D83D DE00).
    assert java_hash_code("\U0001F600") == 31 * 0xD83D + 0xDE00
    assert java_hash_code("\U0001F600") == java_hash_code("\ud83d\ude00")


@given(st.text(max_size=40))
@settings(max_examples=200, deadline=None)
def test_java_hash_code_is_utf16_polynomial(s):
    units = s.encode("utf-16-le", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "little")) % 2**32
    assert java_hash_code(s) % 2**32 == h
    assert -2**31 <= java_hash_code(s) < 2**31
    assert java_string_hash(s) == h & 0x7FFFFFFF


# -- §12.2: partition for a key ----------------------------------------------------------------
# key: (JavaStringHash, partitions for n=3,4,5), (Murmur3 partitions for n=3,4,5)
PARTITION_TABLE = [
    ("key1", 3288498, (0, 2, 3), (0, 1, 1)),
    ("key2", 3288499, (1, 3, 4), (0, 0, 0)),
    ("Order-3459134", 1082638286, (2, 2, 1), (0, 3, 2)),
    ("my-key", 1086286526, (2, 2, 1), (1, 1, 3)),
    ("test-key", 999538340, (2, 0, 0), (2, 3, 3)),
    ("hello", 99162322, (1, 2, 2), (1, 3, 1)),
    ("a", 97, (1, 1, 2), (2, 2, 0)),
    ("0", 48, (0, 0, 3), (1, 3, 4)),
    ("1", 49, (1, 1, 4), (1, 3, 1)),
    ("2", 50, (2, 2, 0), (0, 3, 1)),
]


@pytest.mark.parametrize("key, jhash, java_parts, murmur_parts", PARTITION_TABLE)
def test_partition_table_12_2(key, jhash, java_parts, murmur_parts):
    assert java_string_hash(key) == jhash
    for n, want_java, want_murmur in zip((3, 4, 5), java_parts, murmur_parts):
        for mode in ("RoundRobinPartition", "SinglePartition"):
            assert PartitionRouter(n, mode, "JavaStringHash", start=0).choose(key, 0) == want_java
            assert PartitionRouter(n, mode, "Murmur3_32Hash", start=0).choose(key, 0) == \
                want_murmur


def test_key_does_not_advance_round_robin():
    r = PartitionRouter(5, start=0)
    assert [r.choose(None), r.choose("key1"), r.choose(None)] == [0, 3, 1]


def test_empty_key_is_a_key():
    assert PartitionRouter(5, start=3).choose("", 0) == 0  # hash("") = 0


# -- §3.2: round robin and single partition ----------------------------------------------------
def test_round_robin_without_key_is_i_mod_5():
    # RoundRobinPartitionMessageRouterImplTest.testChoosePartitionWithoutKey
    r = PartitionRouter(5, "RoundRobinPartition", start=0, batching=False)
    assert [r.choose(None, 0) for _ in range(12)] == [i % 5 for i in range(12)]


def test_round_robin_starts_at_start():
    r = PartitionRouter(4, start=2)
    assert [r.choose(None) for _ in range(5)] == [2, 3, 0, 1, 2]
    assert r.counter == 7


def test_round_robin_counter_wraps_like_java_int():
    r = PartitionRouter(5, start=2**31 - 1)
    first = r.choose(None)
    assert first == (2**31 - 1) % 5
    assert r.counter == -2**31  # getAndIncrement overflowed
    assert r.choose(None) == (-2**31) % 5  # signSafeMod
    assert r.counter == -2**31 + 1


def test_round_robin_batching_switches_every_window():
    r = PartitionRouter(3, start=1, batching=True, switch_ms=10)
    assert [r.choose(None, t) for t in (0, 5, 9)] == [1, 1, 1]
    assert [r.choose(None, t) for t in (10, 19, 20, 30)] == [2, 2, 0, 1]
    assert r.choose(None, 1_767_225_600_123) == (1_767_225_600_123 // 10 + 1) % 3
    assert PartitionRouter(3, start=0, batching=True, switch_ms=0).switch_ms == 1


def test_round_robin_random_start_in_range():
    starts = {PartitionRouter(4).start for _ in range(200)}
    assert starts <= {0, 1, 2, 3} and len(starts) > 1


def test_single_partition_is_sticky():
    r = PartitionRouter(7, "SinglePartition")
    p = r.choose(None, 0)
    assert 0 <= p < 7
    assert {r.choose(None, t) for t in range(0, 1000, 7)} == {p}
    assert r.choose("key1", 0) == java_string_hash("key1") % 7  # a key still wins
    assert PartitionRouter(7, "SinglePartition", start=4).choose(None) == 4


@pytest.mark.parametrize("kwargs, needle", [
    ({"mode": "CustomPartition"}, "RoundRobinPartition, SinglePartition"),
    ({"mode": "roundrobin"}, "RoundRobinPartition, SinglePartition"),
    ({"scheme": "BoostHash"}, "JavaStringHash, Murmur3_32Hash"),
])
def test_router_rejects_unknown_names(kwargs, needle):
    with pytest.raises(InvalidValue) as e:
        PartitionRouter(3, **kwargs)
    assert e.value.exit_code == 2
    assert needle in e.value.hint


def test_router_rejects_bad_sizes():
    for n in (0, -1):
        with pytest.raises(InvalidValue):
            PartitionRouter(n)
    with pytest.raises(InvalidValue):
        PartitionRouter(3, "SinglePartition", start=3)


def test_hash_key_schemes():
    assert HASHING_SCHEMES == ("JavaStringHash", "Murmur3_32Hash")
    with pytest.raises(InvalidValue) as e:
        hash_key("k", "Murmur3_32")
    assert e.value.exit_code == 2 and "JavaStringHash, Murmur3_32Hash" in e.value.hint


# -- §9.1: sticky key and slot -----------------------------------------------------------------
def test_sticky_key_precedence():
    assert sticky_key(b"ok", "pk", "prod", 7) == b"ok"  # ordering key first
    assert sticky_key(None, "pk", "prod", 7) == b"pk"
    assert sticky_key(None, "中", "prod", 7) == "中".encode()
    assert sticky_key(None, None, "standalone-0-3", 12) == b"standalone-0-3-12"
    assert sticky_key(None, None, None, None) == NONE_KEY == b"NONE_KEY"
    assert sticky_key(None, None, "prod", None) == b"NONE_KEY"
    assert sticky_key(b"", "pk", "prod", 1) == b""  # set, even empty
    assert sticky_key(None, "", "prod", 1) == b""


def test_sticky_key_base64_partition_key():
    raw = b"\x00\xffbin"
    enc = base64.b64encode(raw).decode()
    assert sticky_key(None, enc, "p", 1, partition_key_b64_encoded=True) == raw
    assert sticky_key(None, enc, "p", 1) == enc.encode()
    assert sticky_key(None, "not base64!", "p", 1, partition_key_b64_encoded=True) == NONE_KEY


def test_sticky_key_hash_never_zero():
    # murmur3("k179888") & MAX = 852623360 = 13010 * 65536: slot 0 becomes 1.
    assert murmur3_32_hash("k179888") % 65536 == 0
    assert sticky_key_hash(b"k179888") == 1
    # The [1, 65535] range reaches its top: h % 65535 = 65534 gives 65535.
    assert sticky_key_hash(b"k58168", 1, 65535) == 65535
    assert DEFAULT_RANGE_SIZE == 65536


@given(st.binary(max_size=32))
@settings(max_examples=300, deadline=None)
def test_sticky_key_hash_ranges(key):
    h = murmur3_32_hash(key)
    auto = sticky_key_hash(key)
    assert 1 <= auto <= 65535
    assert auto == (h % 65536 or 1)
    ch = sticky_key_hash(key, 1, 65535)
    assert 1 <= ch <= 65535 and ch == h % 65535 + 1


# -- §4 Failover and §12.5 ---------------------------------------------------------------------
def test_failover_ring_12_5():
    assert murmur3_32_hash(TOPIC) == 825144864
    names = ["c1", "c2"]
    assert names[failover_active(names, TOPIC, -1)] == "c1"
    names = ["c1", "c2", "c3"]
    assert names[failover_active(names, TOPIC, -1)] == "c3"


def test_failover_partitioned_table():
    # PersistentFailoverE2ETest.testSimpleConsumerEventsWithPartition, 4 partitions
    def active(names):
        return [names[failover_active(names, f"{TOPIC}-partition-{p}", p)] for p in range(4)]
    assert active(["1", "2"]) == ["1", "2", "1", "2"]
    assert active(["1", "2", "3"]) == ["1", "2", "3", "1"]
    assert active(["2", "3"]) == ["2", "3", "2", "3"]


def test_failover_single_consumer_and_empty():
    assert failover_active(["only"], TOPIC, -1) == 0
    assert failover_active(["only"], TOPIC, 3) == 0
    with pytest.raises(ValueError):
        failover_active([], TOPIC, -1)


def test_failover_consistent_hashing_for_partitions():
    # 4.x activeConsumerFailoverConsistentHashing=true: a partition uses the ring as well.
    names = ["c1", "c2", "c3"]
    part = f"{TOPIC}-partition-1"
    assert failover_active(names, part, 1, consistent_hashing=True) == \
        failover_active(names, part, -1)
    assert failover_active(names, TOPIC, -1, consistent_hashing=True) == 2


@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=6, unique=True),
       st.text(min_size=1, max_size=30))
@settings(max_examples=60, deadline=None)
def test_failover_ring_picks_an_index(names, topic):
    names.sort()
    i = failover_active(names, topic, -1)
    assert 0 <= i < len(names)
    assert failover_active(names, topic, -1) == i  # deterministic
