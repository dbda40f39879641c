"""A subscription's state is one named record (issue 29 item 7): broker/subscription_state.py's
SubscriptionState, a view over the map the cursor stores. It reads and writes the very keys every
release wrote (the old store's cursors read the same values and write back the same bytes), a key
it does not know stays in the map and is saved back, and no other module touches the map: the
type, the counters and the flags are each said once. Untyped (made by create-subscription) a
subscription shows "None" and reads as Exclusive; its first consumer types it.
Real LMDB in tmp_path, a simulated clock."""
from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

from store import codec
from store.env import Env
from pulsarctl.broker import subscription_state as state
from pulsarctl.broker.subscription_state import SubscriptionState
from pulsarctl.messages import OutgoingMessage
import old_store

ROOT = Path(__file__).resolve().parents[2]
LEASE = 600_000
FULL = "persistent://public/default/"

# Every field with the key it is stored under, and a value of its type.
FIELDS = {
    "created": ("created", 5), "out": ("out", 7), "out_bytes": ("outBytes", 70),
    "last_ack": ("lastAck", 11), "last_consumed": ("lastConsumed", 12),
    "last_expire": ("lastExpire", 13), "last_mark_delete_advanced": ("lastMarkDeleteAdvanced", 14),
    "expired": ("expired", 3), "redelivered": ("redelivered", 4), "type": ("type", "Shared"),
    "policy": ("policy", {"ackTimeoutMs": 30000}), "active": ("active", "c1"),
    "key_shared": ("ks", {"policy": "auto-split", "members": ["c1"], "state": None}),
    "blocked_subscription": ("blockedSub", True), "blocked_consumers": ("blocked", ["c2"]),
    "counted": ("counted", True), "nacked": ("nacked", True), "held_to": ("heldTo", 0),
    "batch_acks": ("batchAcks", True), "batch_queued": ("batchQueued", True),
    "letter_producers": ("dlqProducers", {FULL + "t-s-DLQ": "t-s-c1-DLQ-x"}),
    "letter_round_robin": ("letterRR", 9),
}


# -- the record and its stored map ----------------------------------------------------------------
def test_every_field_is_named_and_the_table_here_lists_them_all():
    known = {name for name, v in vars(SubscriptionState).items() if isinstance(v, state._Key)}
    assert known == set(FIELDS)
    for name, (key, _value) in FIELDS.items():
        field = getattr(SubscriptionState, name)
        assert field.key == key and field.name == name and len(field.doc) > 20
    # Each counter Pulsar's stats report says Pulsar's name for it.
    for name, pulsar in (("out", "msgOutCounter"), ("out_bytes", "bytesOutCounter"),
                         ("last_ack", "lastAckedTimestamp"),
                         ("last_consumed", "lastConsumedTimestamp"),
                         ("last_expire", "lastExpireTimestamp"),
                         ("last_mark_delete_advanced", "lastMarkDeleteAdvancedTimestamp"),
                         ("expired", "totalMsgExpired"),
                         ("blocked_subscription", "blockedSubscriptionOnUnackedMsgs")):
        assert pulsar in getattr(SubscriptionState, name).doc, name


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_a_field_reads_and_writes_its_key(name):
    key, value = FIELDS[name]
    stored = {"someKeyOfALaterRelease": [1, 2]}
    s = SubscriptionState.from_stored(stored)
    setattr(s, name, value)
    assert stored == {"someKeyOfALaterRelease": [1, 2], key: value}
    assert SubscriptionState.from_stored(dict(stored)).__getattribute__(name) == value
    delattr(s, name)
    assert stored == {"someKeyOfALaterRelease": [1, 2]}
    delattr(s, name)  # forgetting what is not there changes nothing


def test_absent_fields_read_their_defaults_and_a_mutable_default_is_fresh():
    s = SubscriptionState.from_stored({})
    assert (s.out, s.out_bytes, s.last_ack, s.last_consumed, s.last_expire,
            s.last_mark_delete_advanced, s.expired, s.redelivered, s.letter_round_robin) == \
        (0,) * 9
    assert (s.type, s.active, s.key_shared, s.held_to) == (None,) * 4
    assert not (s.counted or s.nacked or s.batch_acks or s.batch_queued
                or s.blocked_subscription)
    s.policy["ackTimeoutMs"] = 1  # a changed default is not stored ...
    s.blocked_consumers.append("c1")
    assert s.policy == {} and s.blocked_consumers == [] and s.to_stored() == {}


def test_flags_and_optional_entries_are_stored_only_while_they_say_something():
    stored = {"out": 0}
    s = SubscriptionState.from_stored(stored)
    s.batch_acks = s.nacked = s.blocked_subscription = True
    s.held_to, s.blocked_consumers, s.type = 0, ["c1"], "Failover"
    assert stored == {"out": 0, "batchAcks": True, "nacked": True, "blockedSub": True,
                      "heldTo": 0, "blocked": ["c1"], "type": "Failover"}
    s.batch_acks = s.nacked = s.blocked_subscription = False
    s.held_to, s.blocked_consumers, s.type = None, [], None
    assert stored == {"out": 0}
    # The active consumer is stored even when there is none any more (as it was written).
    s.active = None
    assert stored == {"out": 0, "active": None}


def test_round_trip_keeps_the_map_its_order_and_unknown_keys():
    stored = {"type": "Shared", "created": 1, "out": 2, "outBytes": 3, "lastAck": 0,
              "lastConsumed": 4, "policy": {"maxRedeliverCount": 1},
              "fromANewerRelease": {"x": 1}, "nacked": True}
    raw = codec.encode(stored)
    s = SubscriptionState.from_stored(stored)
    assert s.to_stored() is stored and codec.encode(s.to_stored()) == raw
    s.out += 5
    s.last_consumed = 9
    s.counted = True
    assert codec.encode(s.to_stored()) == codec.encode(
        {"type": "Shared", "created": 1, "out": 7, "outBytes": 3, "lastAck": 0,
         "lastConsumed": 9, "policy": {"maxRedeliverCount": 1},
         "fromANewerRelease": {"x": 1}, "nacked": True, "counted": True})


def test_a_new_subscription_starts_with_the_map_it_always_had():
    assert SubscriptionState.new(1000, {"maxRedeliverCount": 3}).to_stored() == \
        {"created": 1000, "out": 0, "outBytes": 0, "lastAck": 0, "lastConsumed": 0,
         "policy": {"maxRedeliverCount": 3}}


# -- through the broker ---------------------------------------------------------------------------
def _cursor(ctx, name="s", topic="t"):
    info = ctx.ledgers.info(ctx.txn, ctx.ledgers.lookup(ctx.txn, FULL + topic))
    return info, ctx.cursors.get(ctx.txn, info.ml_id, name)


def test_an_untyped_subscription_reads_exclusive_and_shows_none(broker):
    broker.publish("t", [])
    broker.subscription("t", "s").create()

    def look(ctx):
        c = _cursor(ctx)[1]
        return state.stored_type(c), state.type_of(c), state.shown_type(c), \
            state.single_active(c)
    assert broker._read(look) == (None, "Exclusive", "None", True)
    broker.subscribe("t", "s", "c1", "Shared", "Earliest", lease_ms=LEASE, fetch=0)
    assert broker._read(look) == ("Shared", "Shared", "Shared", False)


def test_a_key_the_record_does_not_know_survives_every_save(broker, clock):
    """A newer release's key, written beside ours, is still there after a consume, acks, a
    nack and its redelivery and an expiry (each of which saves the cursor)."""
    broker.publish("t", [OutgoingMessage(b"m%d" % i) for i in range(4)])
    broker.subscribe("t", "s", "c1", "Shared", "Earliest", lease_ms=LEASE, fetch=0)

    def plant(ctx):
        _info, c = _cursor(ctx)
        c.props["fromANewerRelease"] = {"kept": [1, "two"]}
        ctx.cursors.save(ctx.txn, c)
    broker._write(plant)
    got = broker.fetch("t", "s", "c1", 4)
    broker.ack("t", "s", [got[0].message_id()])
    broker.nack("t", "s", [got[1].message_id()])
    clock.advance(60_000)
    broker.fetch("t", "s", "c1", 4)
    broker.subscription("t", "s").expire_messages(0)

    def look(ctx):
        c = _cursor(ctx)[1]
        s = state.state(c)
        return c.props.get("fromANewerRelease"), s.out, s.redelivered, s.counted, s.type
    kept, out, redelivered, counted, typ = broker._read(look)
    assert kept == {"kept": [1, "two"]}
    assert (out, redelivered, counted, typ) == (5, 1, True, "Shared")


# -- a store written by release 0.1.0 -------------------------------------------------------------
@pytest.fixture(scope="module")
def old_cursors(tmp_path_factory):
    root = tmp_path_factory.mktemp("old")
    env = Env(str(old_store.unpack(root)), readonly=True, create=False)
    with env.read() as txn:
        rows = [(bytes(k[8:]).decode(), bytes(v))
                for k, v in txn.cursor(db=env.db["cursors"])]
    env.close()
    return rows


def test_every_subscription_of_an_old_store_reads_its_keys_and_writes_back_the_same_bytes(
        old_cursors):
    assert len(old_cursors) >= 10
    for _name, raw in old_cursors:
        record = codec.decode(raw)
        stored = record[4]
        s = SubscriptionState.from_stored(stored)
        for field, (key, _value) in FIELDS.items():
            if key in stored:
                assert getattr(s, field) == stored[key], (field, stored)
        assert set(stored) <= {key for key, _v in FIELDS.values()}, stored
        assert codec.encode(record[:4] + [s.to_stored()]) == raw


def test_an_old_stores_subscriptions_read_the_same_values(old_cursors):
    by_name = {}
    for name, raw in old_cursors:
        by_name.setdefault(name, SubscriptionState.from_stored(codec.decode(raw)[4]))
    dl, ex, fo, ks, retry = (by_name[n] for n in ("dl", "ex", "fo", "ks", "retry"))
    assert (dl.type, dl.out, dl.out_bytes, dl.nacked, dl.counted, dl.created,
            dl.last_consumed) == ("Shared", 2, 2, True, True, 1767225600000, 1767225602000)
    assert dl.policy == {"negativeAckRedeliveryDelayMs": 1000, "maxRedeliverCount": 1}
    assert (ex.type, ex.batch_acks, ex.batch_queued, ex.counted) == \
        ("Exclusive", True, True, False)
    assert (fo.type, fo.active, fo.out_bytes) == ("Failover", "f1", 5)
    assert ks.key_shared["members"] == ["k1"] and ks.key_shared["policy"] == "auto-split"
    assert (retry.last_ack, retry.policy["enableRetry"], retry.held_to) == \
        (1767225602000, True, None)


# -- the record is the one place ------------------------------------------------------------------
# The record's own module reads the map; store/cursor.py keeps it (opaque, never looked into).
OWNERS = {"pulsarctl/broker/subscription_state.py", "store/cursor.py"}


def props_uses(relpath: str, code: str) -> list[str]:
    """Where code touches a cursor's stored map (any `<x>.props`) outside the owners: to read a
    key, write one, or hand the map on."""
    if relpath in OWNERS:
        return []
    return [f"{relpath}:{n.lineno}" for n in ast.walk(ast.parse(code))
            if isinstance(n, ast.Attribute) and n.attr == "props"]


def test_no_module_but_the_record_touches_the_stored_map():
    found = []
    for pkg in ("pulsarctl", "store"):
        for p in sorted((ROOT / pkg).rglob("*.py")):
            relpath = p.relative_to(ROOT).as_posix()
            found += props_uses(relpath, p.read_text("utf-8"))
    assert not found, found


@pytest.mark.parametrize("code", [
    'x = c.props.get("out", 0)',
    'c.props["lastAck"] = now',
    'c.props.pop("blocked", None)',
    'p = c.props\np.get("type")',
    'if (c0.props.get("policy") or {}).get("ackTimeoutMs"): pass',
    'f(cursor.props)',
])
def test_the_map_check_catches(code):
    assert props_uses("pulsarctl/broker/dispatch/shared.py", code)


@pytest.mark.parametrize("relpath, code", [
    ("pulsarctl/broker/stats.py", "s = state(c)\nx = s.out"),
    ("pulsarctl/broker/dlq.py", "props = dict(m.properties_ or {})\nprops.get(REAL_TOPIC)"),
    ("pulsarctl/broker/subscription_state.py", 'c.props.get("type")'),
    ("store/cursor.py", "self.props = props"),
])
def test_the_map_check_allows(relpath, code):
    assert not props_uses(relpath, code)


def test_no_module_reads_the_type_property_itself():
    found = []
    for p in sorted((ROOT / "pulsarctl").rglob("*.py")):
        if p.name == "subscription_state.py":
            continue
        toks = list(tokenize.generate_tokens(io.StringIO(p.read_text("utf-8")).readline))
        for i, t in enumerate(toks[:-3]):
            # props.get("type" ...) / props["type"] / props.setdefault("type" ...)
            if t.string == "props" and toks[i + 1].string in (".", "["):
                rest = toks[i + 2:i + 5]
                if any(x.string in ('"type"', "'type'") for x in rest):
                    found.append(f"{p.relative_to(ROOT)}:{t.start[0]}")
    assert not found, found


def test_the_ack_timeout_is_read_in_one_place():
    """The stored policy names it ackTimeoutMs (consumer_policy.py's table); the broker asks
    unacked.timeout_ms, not the key (dispatch, Key_Shared and the redelivery's history read it
    each by the key before)."""
    found = []
    for p in sorted((ROOT / "pulsarctl").rglob("*.py")):
        relpath = p.relative_to(ROOT).as_posix()
        if relpath in ("pulsarctl/consumer_policy.py", "pulsarctl/broker/unacked.py"):
            continue
        for n in ast.walk(ast.parse(p.read_text("utf-8"))):
            if isinstance(n, ast.Constant) and n.value == "ackTimeoutMs":
                found.append(f"{relpath}:{n.lineno}")
    assert not found, found
