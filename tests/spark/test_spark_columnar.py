"""spark/_columnar.py reads stored entries into Arrow columns with Arrow kernels. Whatever it
reads must be exactly what the Python path (codec.decode_many + record_batch) makes, and what
it does not read it must hand back (None) rather than guess."""
from __future__ import annotations

import random

import pytest

pa = pytest.importorskip("pyarrow")

from pulsarctl.spark import _arrow, _columnar, _field_walk  # noqa: E402
from pulsarctl.spark._access import IdColumns  # noqa: E402
from store import codec, keys  # noqa: E402
from store.records import record_problem  # noqa: E402

SCHEMA = _arrow.arrow_schema()
TOPIC = "persistent://public/default/t"


def as_pieces(values: list, seed: int = 0) -> list:
    """values as store/ledger.py's scan_pieces might hand them over: runs of them in blocks
    (codec.pack_block), some with neighbours outside the read on either side (lo > 0, hi <
    the block's count), some alone."""
    rnd = random.Random(seed)
    out, i = [], 0
    while i < len(values):
        k = rnd.choice([1, 2, 3, 7, 40])
        run = values[i:i + k]
        if len(run) == 1 and rnd.random() < 0.5:
            out.append((run[0], 0, 1))
        else:
            before = [codec.encode([0, "n", 0, b"neighbour"])] * rnd.choice([0, 0, 2])
            after = [codec.encode([1, "n", 1, b"after"])] * rnd.choice([0, 0, 1])
            out.append((codec.pack_block(before + run + after), len(before),
                        len(before) + len(run)))
        i += len(run)
    return out


def both(entries, schema=SCHEMA, runs=None, lo=None, hi=None):
    """(columnar batch or None, the same read from blocks of entries or None, Python path
    batch) for the encoded entries."""
    values = [codec.encode(e) for e in entries]
    runs = IdColumns(runs or [(7, 0, len(values))])
    python = _arrow.record_batch(schema, TOPIC, -1, runs, codec.decode_many(values), lo, hi)
    out = []
    for cols in (_columnar.decode(values, *_arrow.fields_for(schema)),
                 _columnar.decode_pieces(as_pieces(values, len(values)),
                                         *_arrow.fields_for(schema))):
        out.append(None if cols is None else
                   _arrow.record_batch(schema, TOPIC, -1, runs, cols, lo, hi))
    return out[0], out[1], python


def assert_same(entries, **kw):
    fast, blocks, python = both(entries, **kw)
    assert fast is not None, "the columnar decoder refused entries it should read"
    assert blocks is not None, "the columnar decoder refused blocks of entries it should read"
    for got in (fast, blocks):
        got.validate(full=True)
        assert got.schema == python.schema
        assert got.to_pylist() == python.to_pylist()
        assert got.equals(python)


def entry(i, **over):
    e = [1_790_000_000_000 + i, "standalone-0-0", i, b"x" * 10, {"source": "bench"},
         f"key-{i}", None, None]
    for k, v in over.items():
        e[int(k[1:])] = v
    while e and e[-1] is None:  # messages.py leaves unset trailing fields off
        e.pop()
    return e


def test_plain_entries_read_the_same_as_the_python_path():
    assert_same([entry(i) for i in range(50)])


def test_every_integer_encoding():
    ints = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, -1, -32, -33,
            -128, -129, -32768, -32769, -2**31, -2**31 - 1, -2**63]
    assert_same([entry(i, f2=v) for i, v in enumerate(ints)])
    # Publish and event times of every size, and a publish time of zero.
    assert_same([entry(i, f0=v, f7=v) for i, v in enumerate([0, 5, 200, 70_000, 2**40])])


def test_mixed_widths_read_alike():
    # A producer's first sequence ids (fixint, uint8, uint16 in one chunk), negative fixints
    # too, and mixes of signed and unsigned widths of every size.
    assert_same([entry(i) for i in range(300)])
    assert_same([entry(i, f2=v) for i, v in enumerate([-32, -1, 0, 127, 128, 255, 256, 65535,
                                                       -5, 65534, 300, 7] * 5)])
    ints = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, -1, -32, -33, -128, -129,
            -32768, -32769, -2**31, -2**31 - 1, -2**63, 2**63 - 1]
    assert_same([entry(i, f2=v) for i, v in enumerate(ints * 3)])


def test_uniform_encodings_read_alike():
    # One header for the whole chunk: each integer width, str8 strings, bin16 payloads.
    for v in (5, 200, 60_000, 4_000_000_000, 2**40, -5, -100, -30_000, -2**31, -2**40):
        assert_same([entry(i, f2=v) for i in range(20)])
    assert_same([entry(i, f1="p" * 40, f5="k" * 200) for i in range(20)])
    assert_same([entry(i, f1="q" * 31, f5="k" * (i + 12)) for i in range(20)])  # fixstr
    assert_same([entry(i, f3=b"y" * 300) for i in range(20)])


def test_strings_of_every_length_and_unicode():
    keys = ["", "k", "a" * 31, "a" * 32, "a" * 255, "a" * 256, "é" * 40_000, "键", None]
    assert_same([entry(i, f5=k, f1=(k or "p")) for i, k in enumerate(keys)])


def test_payloads_of_every_length():
    sizes = [0, 1, 31, 255, 256, 65_535, 65_536, 200_000]
    assert_same([entry(i, f3=bytes([i]) * s) for i, s in enumerate(sizes)])


def test_properties_nil_empty_many_and_mixed():
    props = [None, {"a": "1"}, {f"k{j}": f"v{j}" for j in range(20)},  # map16
             {"é": "ü", "": ""}, None, {"x": "y", "z": "w"}]
    assert_same([entry(i, f4=p) for i, p in enumerate(props)])
    # All nil: null maps, as the Python path makes them.
    assert_same([entry(i, f4=None) for i in range(5)])
    # Every entry has the same number of properties, more than one.
    assert_same([entry(i, f4={"a": str(i), "b": "c" * i}) for i in range(10)])


def test_properties_alike_in_every_entry_are_read_once_and_checked(monkeypatch):
    """A chunk whose entries all hold the same properties is read from its first entry's
    map, after every entry's bytes were compared with it; any difference, anywhere, goes
    to the walk of each item."""
    calls = []
    real = _columnar._map_run
    monkeypatch.setattr(_columnar, "_map_run", lambda *a: calls.append(1) or real(*a))
    for props in ({"source": "bench"}, {"a": "1", "b": "é" * 40, "c": ""},
                  {"k" * 40: "v" * 300}, {f"k{j}": "v" for j in range(15)}):
        calls.clear()
        assert_same([entry(i, f4=props) for i in range(30)])
        assert calls, f"alike properties {props} were walked item by item"
    for entries in (
        # alike at both ends, not in between; the same length with other bytes; other keys
        [entry(i, f4={"source": "bench" if i != 13 else "bencH"}) for i in range(30)],
        [entry(i, f4={"source": f"b{i % 29 % 10}"}) for i in range(30)],
        [entry(i, f4={f"k{i % 29 % 10}": "v"}) for i in range(30)],
        [entry(i, f4={"a": "1"} if i % 2 else {"a": "1", "b": "2"}) for i in range(30)],
    ):
        calls.clear()
        assert_same(entries)
        assert not calls, "properties that differ were read as alike"
    # What the Python path would read otherwise (a key twice, a value that is nil or not a
    # string) is left to the walk: no items.
    twice = bytes([0x82, 0xA1]) + b"a" + bytes([0xA1]) + b"1" + bytes([0xA1]) + b"a" + \
        bytes([0xA1]) + b"2"
    assert _field_walk._map_items(memoryview(twice), 0) == (None, 0)
    assert _field_walk._map_items(memoryview(bytes([0x81, 0xA1]) + b"a" + bytes([0xC0])), 0) \
        == (None, 0)
    assert _field_walk._map_items(memoryview(bytes([0x81, 0xA1]) + b"a" + bytes([0x05])), 0) \
        == (None, 0)
    assert _field_walk._map_items(memoryview(bytes([0x81, 0xA1]) + b"a"), 0) == (None, 0)
    assert _field_walk._map_items(memoryview(bytes([0x81, 0xA1]) + b"a" + bytes([0xA1, 0xFF])),
                                  0) == (None, 0)
    assert _field_walk._map_items(memoryview(bytes([0x81, 0xD9, 1]) + b"a" + bytes([0xA1]) +
                                             b"b"), 0) == ([("a", "b")], 6)


def test_constant_columns_are_kept_few_and_sliced():
    from pulsarctl import arrow_columns

    arrow_columns._CONSTANTS.clear()
    a = arrow_columns.constant("persistent://public/default/t", pa.string(), 5)
    assert a.to_pylist() == ["persistent://public/default/t"] * 5
    assert arrow_columns.constant("x", pa.string(), 40_000).to_pylist() == ["x"] * 40_000
    assert arrow_columns.constant("x", pa.string(), 3).to_pylist() == ["x"] * 3
    for i in range(40):  # a read of many topics keeps at most 16
        assert arrow_columns.constant(f"t{i}", pa.string(), 2).to_pylist() == [f"t{i}"] * 2
        assert len(arrow_columns._CONSTANTS) <= 16


def test_entries_with_fewer_and_more_fields():
    entries = [
        [1, "p", 0, b"a"],                                   # no properties or key
        entry(1),
        entry(2, f6=b"ordering", f7=1_790_000_000_123),      # ordering key, event time
        entry(3, f7=0),                                      # event time 0 is unset
        entry(4) + [None, None, 1_790_000_999_000],          # deliverAt (9 fields)
        [2, "p", 1, b"b", None, None, "ok-as-str"],          # ordering key as str
    ]
    assert_same(entries)


def test_random_entries(seed=7):
    rnd = random.Random(seed)

    def s(n):
        return "".join(rnd.choice("abcé键") for _ in range(n))

    def one(i):
        e = [rnd.choice([0, rnd.randrange(2**41), 1_790_000_000_000 + i]),
             rnd.choice([s(rnd.randrange(40)), "standalone-0-1"]),
             rnd.choice([i, rnd.randrange(-2**40, 2**40), -1]),
             bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 3, 40, 300]))),
             rnd.choice([None, {s(3): s(5) for _ in range(rnd.randrange(1, 18))}]),
             rnd.choice([None, s(rnd.randrange(70))]),
             rnd.choice([None, b"ok"]),
             rnd.choice([None, 0, rnd.randrange(2**41)])]
        cut = rnd.choice([4, 5, 6, 8, 8, 8])
        e = e[:cut]
        while len(e) > 4 and e[-1] is None:
            e.pop()
        return e

    for _ in range(20):
        assert_same([one(i) for i in range(rnd.randrange(1, 60))])


def test_narrow_schemas_and_time_bounds():
    entries = [entry(i, f0=1000 + i) for i in range(30)]
    for ddl in (["value"], ["__publishTime"], ["__key", "__sequenceId"],
                ["__messageProperties"], ["__eventTime", "__topic", "__messageId"]):
        schema = pa.schema([SCHEMA.field(n) for n in ddl])
        assert_same(entries, schema=schema)
    assert_same(entries, lo=1005, hi=1020)


def test_message_ids_across_ledgers_and_partitions():
    entries = [entry(i) for i in range(12)]
    values = [codec.encode(e) for e in entries]
    cols = _columnar.decode(values, *_arrow.fields_for(SCHEMA))
    runs = IdColumns([(3, 998, 2), (4, 0, 9), (12_345_678_901, 10**9, 1)])
    ids = _arrow.record_batch(SCHEMA, TOPIC + "-partition-2", 2, runs, cols).column(3)
    assert ids.to_pylist() == ["3:998:2", "3:999:2"] + [f"4:{e}:2" for e in range(9)] + [
        "12345678901:1000000000:2"]


def test_message_ids_of_any_runs_and_batches_match_their_text():
    """arrow_columns writes ids from a table of four-digit tails: runs that cross a multiple
    of 10,000, start below it, or hold ids of any length, and batches of any size (past the
    table too) and prefix length, must read as f"{ledger}:{entry}:{partition}[:{index}]"."""
    from pulsarctl.arrow_columns import _run_ids, entry_ids

    rnd = random.Random(5)
    for case in range(150):
        runs = [(rnd.randint(0, 10**12), rnd.choice([0, 9_995, rnd.randint(0, 10**6),
                                                     rnd.randint(0, 10**13)]),
                 rnd.choice([0, 1, 7, 10_000, rnd.randint(0, 25_000)]))
                for _ in range(rnd.randint(0, 3))]
        part = rnd.choice([-1, 0, 31])
        got = _run_ids(runs, part)
        got.validate(full=True)
        assert got.to_pylist() == [f"{lid}:{e}:{part}" for lid, e0, k in runs
                                   for e in range(e0, e0 + k)], (case, runs)
        n = rnd.choice([1, 2, 1000, 10_000, 10_001, rnd.randint(1, 3000)])
        ids = [(rnd.randint(0, 10**9), rnd.choice([5, 99, 100, rnd.randint(0, 10**13)]), n)
               for _ in range(rnd.randint(1, 4))] + [(7, 3, 0)]  # a plain entry after
        got = entry_ids(ids, part)
        got.validate(full=True)
        assert got.to_pylist() == [f"{lid}:{e}:{part}:{i}" for lid, e, m in ids
                                   for i in range(m)] + [f"7:3:{part}"], (case, ids)


@pytest.mark.parametrize("bad", [
    entry(0) + [None, None, None, 1, 100],    # compression metadata: the Python path
    entry(0, f2=2**64 - 1),                   # a uint64 beyond a Spark bigint
    entry(0, f4={"n": 1}),                    # a property that is not a string
    entry(0, f3="payload as str"),            # payloads are binaries
    entry(0, f1=7),                           # a producer name that is not a string
])
def test_what_it_does_not_read_goes_back_to_the_python_path(bad):
    values = [codec.encode(entry(1)), codec.encode(bad)]
    assert _columnar.decode(values, *_arrow.fields_for(SCHEMA)) is None


def test_other_encodings_and_broken_entries_go_back():
    fields = _arrow.fields_for(SCHEMA)
    assert _columnar.decode([codec.encode_compressed(entry(0))], *fields) is None
    good = codec.encode(entry(0))
    assert _columnar.decode([good[:-3]], *fields) is None          # cut short
    assert _columnar.decode([good, b"\x01\xc0"], *fields) is None   # not an array
    assert _columnar.decode([b"\x01\x95\xc4\xff"], *fields) is None  # a length past the end
    # Invalid UTF-8 where a string is expected.
    raw = bytearray(codec.encode(entry(0, f5="abc")))
    raw[raw.index(b"abc")] = 0xFF
    assert _columnar.decode([bytes(raw)], *fields) is None
    assert _columnar.decode([], *fields) is None


def test_a_split_read_from_a_real_store_uses_it_and_matches(tmp_path, monkeypatch):
    """Messages published through the broker (keys, properties, event and delivery times,
    ordering keys, two producers, ledgers of 7 entries) read by splits.read_split through the
    columnar decoder, then again with it turned off: the same batches."""
    from pulsarctl.broker import Broker
    from pulsarctl.clock import SimulatedClock
    from pulsarctl.messages import OutgoingMessage
    from pulsarctl.spark import _access as access
    from pulsarctl.spark import splits

    path = str(tmp_path / "store")
    clock = SimulatedClock(1_790_000_000_000)
    b = Broker(path, clock)
    b.policies.update_setting("managedLedgerMaxEntriesPerLedger", "7")
    for i in range(60):
        m = OutgoingMessage(f"m-{i}".encode() * (i % 7), {"n": str(i)} if i % 3 else None,
                            key=f"k{i}" if i % 4 else None, event_time=i % 2 and 1000 + i,
                            ordering_key=b"ok" if i % 5 == 0 else None,
                            deliver_at=clock.now_ms() + 10 if i % 11 == 0 else 0)
        b.publish(NS_T, [m], producer_name="p1" if i < 30 else "producer-two")
        clock.advance(1)
    b.close()
    part = access.resolve_parts(access.broker(path), "names", [access.parse_topic(NS_T)])[0]
    split = splits.Split(part.name, part.partition, part.ml_id, part.first, part.next)
    seen = []
    real = _columnar.decode
    monkeypatch.setattr(_columnar, "decode", lambda *a: seen.append(real(*a)) or seen[-1])
    fast = list(splits.read_split(path, splits.SCHEMA, split, chunk=16))
    assert seen and all(c is not None for c in seen)
    monkeypatch.setattr(_columnar, "decode", lambda *a: None)
    slow = list(splits.read_split(path, splits.SCHEMA, split, chunk=16))
    assert sum(x.num_rows for x in fast) == 60
    assert [x.to_pylist() for x in fast] == [x.to_pylist() for x in slow]


NS_T = "persistent://public/default/columnar"


def test_a_split_of_blocks_of_entries_reads_them_whole_and_matches(tmp_path, monkeypatch):
    """Messages published in bulk are stored in blocks (store/ledger.py): read_split reads
    them through decode_pieces, chunks starting and ending inside blocks and ledgers, and gives
    what the Python path gives."""
    from pulsarctl.broker import Broker
    from pulsarctl.clock import SimulatedClock
    from pulsarctl.messages import OutgoingMessage
    from pulsarctl.spark import _access as access
    from pulsarctl.spark import splits

    path = str(tmp_path / "store")
    clock = SimulatedClock(1_790_000_000_000)
    b = Broker(path, clock)
    b.policies.update_setting("managedLedgerMaxEntriesPerLedger", "70")
    n = 0
    for size in (1, 45, 3, 1, 120, 9):
        b.publish(NS_T, [OutgoingMessage(f"m-{i}".encode() * (i % 5), {"n": str(i)},
                                         key=f"k{i}" if i % 4 else None)
                         for i in range(n, n + size)])
        n += size
        clock.advance(1)
    b.close()
    part = access.resolve_parts(access.broker(path), "names", [access.parse_topic(NS_T)])[0]
    split = splits.Split(part.name, part.partition, part.ml_id, part.first + 2, part.next - 1)
    seen = []
    real = _columnar.decode_pieces
    monkeypatch.setattr(_columnar, "decode_pieces",
                        lambda *a: seen.append(real(*a)) or seen[-1])
    fast = list(splits.read_split(path, splits.SCHEMA, split, chunk=16))
    assert seen and all(c is not None for c in seen)
    monkeypatch.setattr(_columnar, "decode_pieces", lambda *a: None)
    monkeypatch.setattr(_columnar, "decode", lambda *a: None)
    slow = list(splits.read_split(path, splits.SCHEMA, split, chunk=16))
    assert sum(x.num_rows for x in fast) == n - 3
    assert [x.to_pylist() for x in fast] == [x.to_pylist() for x in slow]


def test_broken_block_headers_never_crash_and_never_disagree():
    """Bytes flipped or cut in a block's header or body: decode_pieces hands the chunk back or
    reads exactly what the Python path reads from the same bytes."""
    rnd = random.Random(5)
    fields = _arrow.fields_for(SCHEMA)
    values = [codec.encode(entry(i)) for i in range(6)]
    good = codec.pack_block(values)
    agreed = refused = damaged = 0
    for _ in range(300):
        v = bytearray(good)
        at = rnd.randrange(min(len(v), 40)) if rnd.random() < 0.6 else rnd.randrange(len(v))
        if rnd.random() < 0.7:
            v[at] = rnd.randrange(256)
        else:
            del v[at:at + rnd.randrange(1, 4)]
        piece = (bytes(v), 1, 5)
        cols = _columnar.decode_pieces([piece], *fields)
        if cols is None:
            refused += 1
            continue
        for a in cols.arrays.values():
            a.validate(full=True)
        # The store must be able to read the block too: no entry Spark sees is one a
        # consumer would be told is damaged.
        recs = codec.decode_many(codec.block_entries(piece[0], 1, 5))
        if record_problem("entries", keys.pair(1, 5), piece[0]) is not None:
            # A byte changed inside the prefix the header says the entries share: damage
            # `doctor --deep` reports. Spark takes the shared fields from the first entry, a
            # consumer reads the changed byte; neither is the message that was written.
            damaged += 1
            continue
        runs = IdColumns([(1, 0, 4)])
        try:
            python = _arrow.record_batch(SCHEMA, TOPIC, -1, runs, recs)
        except pa.ArrowInvalid:  # a time out of Spark's range: the Python path refuses it
            continue
        assert _arrow.record_batch(SCHEMA, TOPIC, -1, runs, cols).to_pylist() \
            == python.to_pylist()
        agreed += 1
    assert agreed and refused


def test_corrupt_entries_never_crash_and_never_disagree():
    """Bytes flipped, cut or inserted at random in real entries: the decoder either hands the
    chunk back (None) or reads it exactly as the Python path does. Nothing it builds points
    outside its buffer (every result passes Arrow's full validation)."""
    rnd = random.Random(11)
    fields = _arrow.fields_for(SCHEMA)
    runs = IdColumns([(1, 0, 8)])
    base = [codec.encode(entry(i, f5="k" * (i % 3), f7=i % 2 and 10**12)) for i in range(8)]
    agreed = refused = 0
    for _ in range(400):
        values = list(base)
        for _m in range(rnd.randrange(1, 4)):
            i = rnd.randrange(len(values))
            v = bytearray(values[i])
            op = rnd.randrange(3)
            at = rnd.randrange(len(v))
            if op == 0:
                v[at] = rnd.randrange(256)
            elif op == 1:
                del v[at:at + rnd.randrange(1, 6)]
            else:
                v[at:at] = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 4)))
            values[i] = bytes(v)
        cols = _columnar.decode(values, *fields)
        if cols is None:
            refused += 1
            continue
        for a in cols.arrays.values():
            a.validate(full=True)
        try:
            recs = codec.decode_many(values)
            python = _arrow.record_batch(SCHEMA, TOPIC, -1, runs, recs)
        except Exception:  # noqa: BLE001 - the Python path may refuse what it cannot read
            continue
        fast = _arrow.record_batch(SCHEMA, TOPIC, -1, runs, cols)
        fast.validate(full=True)
        assert fast.to_pylist() == python.to_pylist()
        agreed += 1
    assert refused and agreed  # both kinds of outcome were exercised
