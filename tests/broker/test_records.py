"""The named stored records (pulsarctl/broker/records.py) leave the on-disk format as it was:
to_stored gives the very lists and maps the broker wrote before they had names,
from_stored(to_stored(x)) == x, a shorter list from an older release reads with defaults, and
every pending record, timer and consumer of a store written by release 0.1.0 reads and writes
back to the same bytes."""

import pytest

from store import codec, keys
from store.env import Env
from pulsarctl.broker.records import ACK_TIMEOUT, NACK, Consumer, Pending, Timer
import old_store



# -- pending records ----------------------------------------------------------------------------
@pytest.mark.parametrize("record, stored", [
    # what dispatch writes for a message (subscriptions.pending_record before: [c, at, rc])
    (Pending.delivered("c1", 1000, 0), ["c1", 1000, 0]),
    (Pending.delivered("c1", 1000, 3), ["c1", 1000, 3]),
    (Pending.delivered("c1", 1000, 2, size=1), ["c1", 1000, 2]),
    # a batch entry: [c, at, rc, 0, size]
    (Pending.delivered("c1", 1000, 1, size=4), ["c1", 1000, 1, 0, 4]),
    # what a nack writes: [c, at, rc, 1, *size]
    (Pending.delivered("c1", 1000, 2)._replace(nacked=1), ["c1", 1000, 2, 1]),
    (Pending.delivered("c1", 1000, 2, size=4)._replace(nacked=1), ["c1", 1000, 2, 1, 4]),
])
def test_pending_to_stored_is_what_the_broker_wrote(record, stored):
    assert record.to_stored() == stored
    assert codec.encode(record.to_stored()) == codec.encode(stored)
    assert Pending.from_stored(stored) == record
    assert Pending.from_stored(record.to_stored()) == record


def test_pending_fields():
    rec = Pending.from_stored(["c1", 1000, 2, 1, 4])
    assert (rec.consumer, rec.delivered_at, rec.redelivery_count, rec.nacked, rec.size) == \
        ("c1", 1000, 2, 1, 4)


def test_a_short_pending_record_reads_with_defaults():
    assert Pending.from_stored(["c1", 1000]) == Pending("c1", 1000, 0, 0, None)
    assert Pending.from_stored(["c1", 1000, 5]) == Pending("c1", 1000, 5, 0, None)
    assert Pending.from_stored(["c1", 1000, 5, 1]) == Pending("c1", 1000, 5, 1, None)
    # Written back, a record from before the count existed gains it: [c, at, 0].
    assert Pending.from_stored(["c1", 1000]).to_stored() == ["c1", 1000, 0]


# -- timers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("stored", [
    [NACK, 7, "sub", "c1", 1000],
    [ACK_TIMEOUT, 7, "sub", "c1", 1000],
    [NACK, 7, "sub", None, None],
])
def test_timer_round_trip(stored):
    timer = Timer.from_stored(stored)
    assert timer.to_stored() == stored
    assert codec.encode(timer.to_stored()) == codec.encode(stored)
    assert Timer.from_stored(timer.to_stored()) == timer
    assert (timer.kind, timer.ml_id, timer.subscription) == tuple(stored[:3])


def test_timers_schedule_writes_five_items():
    # timers.schedule wrote codec.encode([kind, c.ml_id, c.name, consumer, delivered_at])
    assert Timer(NACK, 7, "sub", "c1", 1000).to_stored() == [NACK, 7, "sub", "c1", 1000]
    assert Timer(NACK, 7, "sub").to_stored() == [NACK, 7, "sub", None, None]


def test_a_short_timer_reads_with_defaults_and_matches_no_delivery():
    timer = Timer.from_stored([NACK, 7, "sub"])
    assert timer == Timer(NACK, 7, "sub", None, None)
    assert not timer.same_delivery(Pending.delivered("c1", 1000, 0))
    assert Timer.from_stored([NACK, 7, "sub", "c1"]).same_delivery(
        Pending.delivered("c1", 1000, 0))  # no delivery time: any delivery of c1


def test_same_delivery():
    timer = Timer(ACK_TIMEOUT, 7, "sub", "c1", 1000)
    assert timer.same_delivery(Pending.delivered("c1", 1000, 0))
    assert not timer.same_delivery(Pending.delivered("c1", 2000, 1))
    assert not timer.same_delivery(Pending.delivered("c2", 1000, 0))
    assert not timer.same_delivery(None)


# -- consumers ----------------------------------------------------------------------------------
def _attach_wrote(name, since, priority, pid, pid_start, lease_ms, now, policy=None):
    """The map consumers.attach wrote before records.Consumer, for a new consumer."""
    rec = {"name": name, "since": since}
    rec.update({"name": name, "priority": priority, "pid": pid, "pidStart": pid_start,
                "leaseMs": lease_ms, "lastActive": now,
                "leaseUntil": (now + lease_ms) if lease_ms else None})
    if policy:
        rec["policy"] = policy
    return rec


@pytest.mark.parametrize("stored", [
    _attach_wrote("c1", 1000, 0, 123, 456, None, 2000),
    _attach_wrote("c1", 1000, 2, None, None, 300_000, 2000),
    _attach_wrote("c1", 1000, 0, None, None, 60_000, 2000,
                  {"keySharedPolicy": "sticky", "ranges": [[0, 100]]}),
])
def test_consumer_to_stored_is_what_attach_wrote(stored):
    rec = Consumer.from_stored(stored)
    assert rec.to_stored() == stored
    assert list(rec.to_stored()) == list(stored)  # the same keys in the same order
    assert codec.encode(rec.to_stored()) == codec.encode(stored)
    assert Consumer.from_stored(rec.to_stored()) == rec


def test_consumer_fields_and_the_stored_keys():
    rec = Consumer.from_stored(_attach_wrote("c1", 1000, 2, 123, 456, 60_000, 2000))
    assert (rec.name, rec.since, rec.priority, rec.pid, rec.pid_start, rec.lease_ms,
            rec.last_active, rec.lease_until, rec.policy) == \
        ("c1", 1000, 2, 123, 456, 60_000, 2000, 62_000, None)
    assert rec.to_stored()["leaseUntil"] == 62_000 and rec.to_stored()["pidStart"] == 456


def test_a_short_consumer_record_reads_with_defaults():
    rec = Consumer.from_stored({"name": "c1"})
    assert rec == Consumer("c1", None, 0, None, None, None, None, None, None)
    assert "since" not in rec.to_stored() and "policy" not in rec.to_stored()


# -- a store written by release 0.1.0 -----------------------------------------------------------
@pytest.fixture(scope="module")
def old_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("old")
    env = Env(str(old_store.unpack(root)), readonly=True, create=False)
    yield env
    env.close()


def _raw(env, dbname, prefix=b""):
    with env.read() as txn:
        cur = txn.cursor(db=env.db[dbname])
        if not cur.set_range(prefix):
            return []
        return [(bytes(k), bytes(v)) for k, v in cur if k.startswith(prefix)]


@pytest.mark.parametrize("dbname, record", [("pending", Pending), ("timers", Timer)])
def test_every_stored_record_of_an_old_store_writes_back_the_same_bytes(old_env, dbname, record):
    rows = _raw(old_env, dbname)
    assert rows, f"the fixture store has no {dbname} records"
    for _k, raw in rows:
        rec = record.from_stored(codec.decode(raw))
        assert codec.encode(rec.to_stored()) == raw, rec


def test_every_consumer_of_an_old_store_writes_back_the_same_bytes(old_env):
    rows = _raw(old_env, "tables", keys.tup("consumer"))
    assert len(rows) >= 4, "the fixture store has consumers of the four subscription types"
    for _k, raw in rows:
        rec = Consumer.from_stored(codec.decode(raw))
        assert codec.encode(rec.to_stored()) == raw, rec


def test_the_old_store_has_every_shape_of_pending_record(old_env):
    """So the round trip above covers a message, a nacked one and a batch entry."""
    shapes = {len(codec.decode(v)) for _k, v in _raw(old_env, "pending")}
    assert shapes == {3, 4, 5}
