"""A key sent as bytes (stored as its base64 text with Pulsar's partition_key_b64_encoded) shows
in a message record as that text with "keyEncoding": "base64", and `produce --ndjson` takes
such a record back as the same key of bytes."""
from __future__ import annotations

import json

from cli_helpers import assert_error, ok, rows

ID1 = "aWQtMQ=="   # base64 of b"id-1"


def _records(cli, *how):
    return rows(ok(cli(*how, "-o", "ndjson")).stdout)


def test_a_key_of_bytes_shows_as_base64_and_goes_back_in_as_bytes(cli):
    lines = [{"payload": "a", "key": ID1, "keyEncoding": "base64"},
             {"payload": "b", "key": ID1}]
    ok(cli("produce", "t", "--stdin", "--ndjson",
           input="".join(json.dumps(x) + "\n" for x in lines)))
    read = _records(cli, "read", "t", "-m", "earliest", "-n", "0", "--until-end")
    assert [(r["payload"], r["key"], r.get("keyEncoding")) for r in read] == \
        [("a", ID1, "base64"), ("b", ID1, None)]
    # consume prints the same records (its one-line path too)
    got = _records(cli, "consume", "t", "-s", "s", "-p", "Earliest", "-n", "2")
    assert [(r["key"], r.get("keyEncoding")) for r in got] == [(ID1, "base64"), (ID1, None)]
    # a record as printed goes back in as the same message: the key stays bytes
    ok(cli("produce", "t2", "--stdin", "--ndjson", input=json.dumps(read[0]) + "\n"))
    (again,) = _records(cli, "read", "t2", "-m", "earliest", "-n", "0", "--until-end")
    assert (again["key"], again["keyEncoding"]) == (ID1, "base64")


def test_a_bad_key_encoding_is_refused_before_anything_is_sent(cli):
    for line in ('{"payload": "x", "key": "!!", "keyEncoding": "base64"}',
                 '{"payload": "x", "keyEncoding": "base64"}',
                 '{"payload": "x", "key": "k", "keyEncoding": "hex"}'):
        assert_error(cli("produce", "t", "--stdin", "--ndjson", input=line + "\n"), 2)
    assert _records(cli, "read", "t", "-m", "earliest", "-n", "0", "--until-end") == []
