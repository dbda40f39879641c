"""The Broker is the data plane, administration is on its noun objects (issue 15): at most 40
public methods, each defined in the class body of service.py (no method swapped in after it),
and every noun reachable as the README says."""
import inspect

from pulsarctl.broker import service
from pulsarctl.broker.service import Broker

NOUNS = ("tenants", "namespaces", "topics", "policies", "schemas", "clock", "chores", "offloader",
         "scans")


def public(cls):
    return [n for n in dir(cls) if not n.startswith("_")]


def test_broker_has_at_most_40_public_attributes():
    names = public(Broker)
    assert len(names) <= 40, names


def test_every_broker_method_is_written_in_its_class_body():
    """Reading Broker.publish tells you where it runs: nothing replaces it after the class."""
    for name, member in vars(Broker).items():
        fn = inspect.unwrap(getattr(member, "fget", None) or getattr(member, "func", None)
                            or member) if callable(member) or isinstance(
                                member, property) or hasattr(member, "func") else None
        if fn is None or not inspect.isfunction(fn):
            continue
        assert fn.__qualname__ == f"Broker.{fn.__name__}", (name, fn.__qualname__)
        assert inspect.getmodule(fn) is service, (name, inspect.getmodule(fn))


def test_the_nouns_and_handles(broker):
    for noun in NOUNS:
        obj = getattr(broker, noun)
        assert getattr(broker, noun) is obj  # made once per Broker
        assert public(type(obj)), noun
    broker.publish("t", [])
    sub = broker.subscription("t", "s")
    assert (str(sub.topic), sub.name) == ("persistent://public/default/t", "s")
    assert str(broker.dlq("t-s-DLQ").topic) == "persistent://public/default/t-s-DLQ"


def test_non_persistent_calls_run_on_the_other_store(broker):
    """One explicit step, owner_of: a noun method naming a non-persistent topic runs on the
    Broker over the tmpfs store, and the persistent store never sees the topic."""
    np_topic = "non-persistent://public/default/np"
    assert broker.owner_of(np_topic) is not broker
    assert broker.owner_of("persistent://public/default/p") is broker
    broker.topics.create(np_topic)
    assert broker.topics.exists(np_topic)
    assert broker._read(lambda ctx: ctx.ledgers.names(ctx.txn)) is not None
    persistent_names = broker._read(lambda ctx: [n for n, _ in ctx.ledgers.names(ctx.txn)])
    assert not any("np" in str(n) for n in persistent_names)
    assert np_topic in broker.topics.list("public/default")
