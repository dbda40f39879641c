"""Chunks of batch entries read into Arrow columns.

A batch entry's payload holds its messages' metadata column by column (payloads, properties,
keys, ordering keys, event times, sequence ids: pulsarctl/broker/batches.py), so msgpack hands
over whole columns of an entry as Python lists (broker/unpack.py's batch_columns). They are
appended to one list per column for the chunk, each becoming one Arrow array. This is the
columnar variant of unpack.records, built on the same decoding (batch_columns, and
entries.payload for a plain entry's payload), because unpack.records makes a record per
message (unpack.expand), which would then be transposed back into columns: that made a batched
topic read nearly three times slower than a plain one.

Plain entries among them (a batch of one is stored plain) are read here too, compressed ones
decompressed. A chunk holding a chunked message's entry is left to the Python path (decode()
returns None), which joins the chunks.
"""
from __future__ import annotations

import gc

import pyarrow as pa
import pyarrow.compute as pc

from pulsarctl.arrow_columns import (
    Columns, arange as _arange, binary_array as _binary, int64 as _s,
    properties_array as _properties,
)
from pulsarctl.broker.unpack import batch_columns
from pulsarctl.entries import (
    F_COMPRESSION, F_EVENT_TIME as EVENT, F_KEY as KEY, F_NUM_MESSAGES, F_PAYLOAD as PAYLOAD,
    F_PRODUCER_NAME as PRODUCER, F_PROPERTIES as PROPS, F_PUBLISH_TIME as PUBLISH,
    F_SEQUENCE_ID as SEQ, chunk_of, payload as stored_payload,
)


def decode(runs, recs: list, need: frozenset, types: dict) -> Columns | None:
    """The fields need of every message of the entries recs (decoded records, in the order of
    runs: (ledger id, first entry id, count)), with the message ids' parts; None when an entry
    is a chunk."""
    enabled = gc.isenabled()
    gc.disable()  # lists of many small objects, no cycles: the collector would only walk them
    try:
        return _decode(runs, recs, need, types)
    finally:
        if enabled:
            gc.enable()


def _decode(runs, recs, need, types):
    pay, props, keys = [], [], []
    pub, prod, seq, events = [], [], [], []  # per entry: Arrow arrays, or (value, count)
    ids = []  # per entry: (ledger id, entry id, messages; 0 for a plain entry)
    want = {f: f in need for f in (PRODUCER, SEQ, PAYLOAD, PROPS, KEY, EVENT)}
    i = 0
    for lid, e0, k in runs:
        for e in range(e0, e0 + k):
            r = recs[i]
            i += 1
            # Read by index (pulsarctl/entries.py's constants): this runs once per entry.
            if len(r) > F_NUM_MESSAGES and r[F_NUM_MESSAGES]:  # a batch
                p, pr, ks, _okeys, ev, sq = batch_columns(r, f"{lid}:{e}")[:6]
                n = len(p)
                ids.append((lid, e, n))
                pub.append((r[PUBLISH], n))
                if want[PAYLOAD]:
                    pay += p
                if want[PRODUCER]:
                    prod.append((r[PRODUCER], n))
                if want[SEQ]:
                    seq.append(pa.array(sq, pa.int64()) if sq else
                               pc.add(_arange(n), _s(r[SEQ])))
                if want[PROPS]:
                    props += pr if pr else [None] * n
                if want[KEY]:
                    keys += ks if ks else [None] * n
                if want[EVENT]:
                    events.append(pa.array(ev, pa.int64()) if ev else (0, n))
                continue
            payload = r[PAYLOAD]
            if len(r) > F_COMPRESSION:
                if chunk_of(r) is not None:
                    return None
                payload = stored_payload(r, f"{lid}:{e}")
            ids.append((lid, e, 0))
            pub.append((r[PUBLISH], 1))
            if want[PAYLOAD]:
                pay.append(payload)
            if want[PRODUCER]:
                prod.append((r[PRODUCER], 1))
            if want[SEQ]:
                seq.append((r[SEQ], 1))
            if want[PROPS]:
                props.append(r[PROPS] if len(r) > PROPS else None)
            if want[KEY]:
                keys.append(r[KEY] if len(r) > KEY else None)
            if want[EVENT]:
                events.append((r[EVENT] if len(r) > EVENT else 0, 1))
    arrays = {PUBLISH: _runs(pub, pa.int64())}
    if want[PAYLOAD]:
        arrays[PAYLOAD] = _binary(pay, types[PAYLOAD])
    if want[PRODUCER]:
        arrays[PRODUCER] = _runs(prod, types[PRODUCER])
    if want[SEQ]:
        arrays[SEQ] = _runs(seq, pa.int64())
    if want[PROPS]:
        arrays[PROPS] = _properties(props, types[PROPS])
    if want[KEY]:
        arrays[KEY] = pa.array(keys, types[KEY])
    if want[EVENT]:
        arrays[EVENT] = _runs(events, pa.int64())
    return Columns(len(arrays[PUBLISH]), arrays, ids=ids)


def _runs(parts: list, typ) -> pa.Array:
    """One array from parts that are arrays or (value, count): count times the value (runs of
    single values become one array)."""
    out, ones = [], []
    for x in parts:
        if isinstance(x, tuple) and x[1] == 1:
            ones.append(x[0])
            continue
        if ones:
            out.append(pa.array(ones, typ))
            ones = []
        out.append(pa.repeat(pa.scalar(x[0], typ), x[1]) if isinstance(x, tuple) else x)
    if ones:
        out.append(pa.array(ones, typ))
    return out[0] if len(out) == 1 else pa.concat_arrays(out)
