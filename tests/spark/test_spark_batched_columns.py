"""spark/_batched.py's fast paths, without Spark: a batch's column that is one value for every
message (the same properties, key, event time) becomes a run that Arrow repeats, columns the
schema does not ask for are never decoded, and next batches share their runs, message ids and
sequence ranges. Every row read must be what broker/unpack.py's records make of the entry, so
each shape of batch is here: equal maps (one key, several), mixed maps, none, keys all equal,
some None or none, event times equal, mixed or unset, explicit sequence ids, compressed
batches, batches too small for a run, null values, and plain entries (compressed too) between
them, read in chunks that cut through them."""
from __future__ import annotations

import random
from datetime import datetime, timezone

import pytest

pytest.importorskip("pyarrow")

import pyarrow as pa  # noqa: E402

from pulsarctl import compression  # noqa: E402
from pulsarctl.arrow_columns import properties_array, properties_runs  # noqa: E402
from pulsarctl.broker import Broker, topics  # noqa: E402
from pulsarctl.broker.batches import Spec  # noqa: E402
from pulsarctl.broker.unpack import records  # noqa: E402
from pulsarctl.clock import SimulatedClock  # noqa: E402
from pulsarctl.messages import OutgoingMessage  # noqa: E402
from pulsarctl.spark import _access as access  # noqa: E402
from pulsarctl.spark import _batched, splits  # noqa: E402
from store import codec  # noqa: E402

TOPIC = "persistent://public/default/shapes"
CODES = [compression.NONE, compression.LZ4, compression.ZLIB, compression.ZSTD,
         compression.SNAPPY]


def _shape(rnd, i: int, n: int, shape: str) -> list:
    """n messages of one batch, its columns made as shape says."""
    one = {"source": "bench"}
    two = {"a": "1", "b": "é" * 3, "c": ""}
    owt = {"c": "", "b": "é" * 3, "a": "1"}  # == two, its keys in another order
    out = []
    for j in range(i, i + n):
        props = {"equal": one, "equal2": two, "equal2r": owt, "none": None,
                 "mixed": rnd.choice([None, one, two, {"n": str(j)}])}[shape.split("/")[0]]
        key = {"keyed": "same-key", "nokey": None,
               "somekeys": rnd.choice([None, f"k{j % 7}", ""])}.get(shape.split("/")[1],
                                                                    f"key-{j}")
        event = {"sameevent": 1_700_000_000_123, "noevent": 0,
                 "events": rnd.choice([0, 1_700_000_000_000 + j])}[shape.split("/")[2]]
        m = OutgoingMessage(b"v%d" % j * rnd.randrange(0, 3), props, key=key, event_time=event,
                            ordering_key=rnd.choice([None, b"ok"]))
        if shape.endswith("seqs"):
            m.sequence_id = 50_000 + 7 * j
        if shape.endswith("nulls") and j % 3 == 0:
            m.payload, m.null_value = b"", True
        out.append(m)
    return out


SHAPES = ["equal/keyed/sameevent", "equal/distinct/noevent", "equal2/nokey/events",
          "equal2r/nokey/noevent",
          "none/somekeys/noevent", "mixed/distinct/events", "mixed/somekeys/sameevent/seqs",
          "equal/keyed/noevent/nulls", "none/nokey/noevent"]


def _fill(path: str, seed: int, shapes=None, size=None) -> int:
    """Batches of every shape and size (2 and 5: shorter than a run; 40 and 300), some
    compressed, plain entries between them, two producers, ledgers of 7 entries."""
    rnd = random.Random(seed)
    clock = SimulatedClock(1_790_000_000_000)
    b = Broker(path, clock)
    b.policies.update_setting("managedLedgerMaxEntriesPerLedger", "7")
    i = 0
    for round_ in range(24 if shapes is None else len(shapes)):
        shape = rnd.choice(SHAPES) if shapes is None else shapes[round_]
        n = size or rnd.choice([2, 5, 40, 300, 300])
        batches = rnd.choice([1, 1, 2, 3])
        msgs = _shape(rnd, i, n * batches, shape)
        plain = round_ % 5 == 4 and shapes is None
        b.publish(TOPIC, msgs, producer_name=f"p{round_ % 2}", compression=rnd.choice(CODES),
                  batching=None if plain else Spec(max_messages=n, max_bytes=0))
        i += len(msgs)
        if round_ % 3 == 0:
            clock.advance(2)
    b.close()
    return i


def _ms(v):
    return None if not v else datetime.fromtimestamp(v / 1000, timezone.utc)


def _expected(path: str) -> list:
    """Every message's row from unpack.records of each stored entry (the Python decoding)."""
    b = access.broker(path)

    def run(ctx):
        info = topics.lookup(ctx, access.parse_topic(TOPIC))
        runs, values = ctx.ledgers.scan_values(ctx.txn, info, info.first_offset,
                                               info.next_offset)
        rows, o = [], 0
        for lid, e0, k in runs:
            for e in range(e0, e0 + k):
                for bidx, r in records(codec.decode(values[o]), f"{lid}:{e}"):
                    r = list(r) + [None] * (8 - len(r))  # a plain entry's stops early
                    mid = f"{lid}:{e}:-1" + (f":{bidx}" if bidx >= 0 else "")
                    rows.append({
                        "value": r[3], "__key": r[5], "__topic": TOPIC, "__messageId": mid,
                        "__publishTime": _ms(r[0]), "__eventTime": _ms(r[7]),
                        "__messageProperties": list(r[4].items()) if r[4] else None,
                        "__producerName": r[1], "__sequenceId": r[2],
                        "__redeliveryCount": None})
                o += 1
        return rows
    return b._read(run)


def _read(path: str, schema=splits.SCHEMA, chunk: int = 16) -> list:
    p = access.resolve_parts(access.broker(path), "names", [access.parse_topic(TOPIC)])[0]
    split = splits.Split(p.name, p.partition, p.ml_id, p.first, p.next)
    rows = []
    for batch in splits.read_split(path, schema, split, chunk=chunk):
        batch.validate(full=True)
        for r in batch.to_pylist():
            if r.get("__messageProperties") == []:
                r["__messageProperties"] = None  # {} and None: both stored as no properties
            rows.append(r)
    return rows


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    out = []
    for seed in (11, 12, 13):
        path = str(tmp_path_factory.mktemp(f"s{seed}") / "store")
        out.append((path, _fill(path, seed), _expected(path)))
    return out


@pytest.mark.parametrize("chunk", [3, 16, 200])
def test_every_row_is_what_the_entries_records_hold(stores, monkeypatch, chunk):
    calls = []
    real = _batched.decode
    monkeypatch.setattr(_batched, "decode", lambda *a: calls.append(real(*a)) or calls[-1])
    for path, total, expected in stores:
        got = _read(path, chunk=chunk)
        assert len(got) == total == len(expected)
        for g, x in zip(got, expected):
            assert g == x
    assert calls and all(c is not None for c in calls)  # the columnar path read every chunk


def test_next_batches_of_equal_maps_keep_each_its_key_order(tmp_path):
    """Two batches whose maps are equal as dicts but stored in another key order are two runs
    (a run is extended by the same bytes only), so each row keeps its own order."""
    path = str(tmp_path / "store")
    _fill(path, 1, ["equal2/nokey/noevent", "equal2r/nokey/noevent", "equal2/nokey/noevent"],
          size=_batched.RUN_MIN)
    got = _read(path, chunk=100)
    assert got == _expected(path)
    orders = {tuple(k for k, _v in r["__messageProperties"]) for r in got}
    assert orders == {("a", "b", "c"), ("c", "b", "a")}


def test_the_fast_paths_ran(stores, monkeypatch):
    """The stores hold what the fast paths are for: runs of equal maps and keys, longer than
    one batch, and columns read as lists."""
    seen = []
    real = _batched._column
    monkeypatch.setattr(_batched, "_column", lambda *a: seen.append(real(*a)) or seen[-1])
    for path, _total, _expected in stores:
        _read(path, chunk=50)
    runs = [c[0] for c in seen if type(c[0]) is tuple]
    lists = [c[0] for c in seen if type(c[0]) is list]
    assert {"source": "bench"} in [r[0] for r in runs]
    assert "same-key" in [r[0] for r in runs]
    assert 1_700_000_000_123 in [r[0] for r in runs]
    assert lists


@pytest.mark.parametrize("names", [
    ("value",), ("__messageProperties",), ("__key", "__eventTime"),
    ("__messageId", "__sequenceId", "__producerName"), ("__publishTime",)])
def test_narrow_schemas_read_the_same_rows(stores, names):
    from pyspark.sql.types import StructType  # lazy: only this test builds a schema

    schema = StructType([f for f in splits.SCHEMA.fields if f.name in names])
    for path, total, expected in stores:
        got = _read(path, schema, chunk=16)
        assert got == [{k: r[k] for k in names} for r in expected]


def test_a_batch_the_unpacker_does_not_read_is_read_by_batch_columns():
    """Columns written empty ([] for none set, as no writer here does) or of another length
    than the payloads go to batch_columns; empty ones read as unset, as they always did."""
    from pulsarctl.entries import Entry  # lazy: only this test builds an entry by hand

    body = codec.encode([[b"a", b"b", b"c"], [], ["k", "k", "k"], None, [], [7, 8, 9]])
    rec = Entry(1_790_000_000_000, "p", 7, body, num_messages=3).to_stored()
    assert _batched._batch(rec, "1:2", (True,) * 6) == (
        3, [b"a", b"b", b"c"], None, ["k", "k", "k"], None, None, [7, 8, 9])
    body = codec.encode([[b"a", b"b"], [{"a": "1"}] * 2, ["k", "k"], None, None, None])
    rec = Entry(1_790_000_000_000, "p", 7, body, num_messages=2).to_stored()
    assert _batched._batch(rec, "1:3", (True,) * 6) == (
        2, [b"a", b"b"], ({"a": "1"}, 2, codec.pack_raw({"a": "1"})),
        ("k", 2, codec.pack_raw("k")), None, None, None)
    assert _batched._batch(rec, "1:3", (False, True, False, False, False, False)) == (
        2, None, ({"a": "1"}, 2, codec.pack_raw({"a": "1"})), None, None, None, None)


def test_properties_runs_equal_properties_array():
    """The parts of a column (lists, runs) give what one list of its values would, the text
    fallback for non-string values included (it then applies to the whole column)."""
    typ = pa.map_(pa.string(), pa.string())
    rnd = random.Random(4)
    values = [None, {}, {"a": "1"}, {"a": "1", "b": "2", "c": "é"}, {"x": None}]
    for _ in range(200):
        parts = []
        for _p in range(rnd.randrange(1, 5)):
            if rnd.random() < 0.5:
                parts.append((rnd.choice(values + [{"n": 1}]), rnd.randrange(1, 40)))
            else:
                parts.append([rnd.choice(values) for _ in range(rnd.randrange(0, 5))])
        flat = [v for p in parts for v in ([p[0]] * p[1] if type(p) is tuple else p)]
        want = properties_array(flat, typ)
        got = properties_runs(parts, typ)
        assert got.equals(want), (parts, got, want)
