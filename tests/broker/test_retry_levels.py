"""TDMQ delay levels for reconsume-later (../shared/reference/002): level N of
messageDelayLevel, and the level-increment mode where retry k waits level k."""
import json

import pytest

from pulsarctl.client import Client
from pulsarctl.errors import InvalidValue
from pulsarctl.messages import OutgoingMessage


def _retry_consumer(broker, sub="s"):
    broker.publish("t", [OutgoingMessage(b"m")])
    return Client(broker=broker).subscribe("t", sub, "Shared", "Earliest", enable_retry=True,
                                           lease_ms=30 * 86_400_000)


def _delays(broker, clock, consumer, rounds, **kw):
    out = []
    for _ in range(rounds):
        m = consumer.receive(timeout_millis=2000)
        if m.properties().get("DELAY_TIME") is not None:
            out.append((int(m.properties()["RECONSUMETIMES"]), int(m.properties()["DELAY_TIME"])))
        consumer.reconsume_later(m, **kw)
        clock.advance(3 * 3_600_000)
    return out


def test_level_increment_waits_one_level_longer_each_retry(broker, clock):
    c = _retry_consumer(broker)
    assert _delays(broker, clock, c, 4, level_increment=True) == [
        (1, 1000), (2, 5000), (3, 10000)]


def test_fixed_level_and_levels_past_the_end(broker, clock):
    c = _retry_consumer(broker)
    assert _delays(broker, clock, c, 2, delay_level=3) == [(1, 10000)]
    c2 = _retry_consumer(broker, "s2")
    m = c2.receive(timeout_millis=2000)
    c2.reconsume_later(m, delay_level=99)   # past the last level: the last one (2h)
    clock.advance(3 * 3_600_000)
    got = [c2.receive(timeout_millis=2000).properties() for _ in range(2)]
    assert [p.get("DELAY_TIME") for p in got if "DELAY_TIME" in p] == [str(2 * 3_600_000)]


def test_configured_level_list(broker, clock):
    broker.policies.update_setting("messageDelayLevel", "2s 4s")
    c = _retry_consumer(broker)
    assert _delays(broker, clock, c, 3, level_increment=True) == [(1, 2000), (2, 4000)]


def test_level_zero_is_refused_and_nothing_moves(broker, clock):
    c = _retry_consumer(broker)
    m = c.receive(timeout_millis=2000)
    with pytest.raises(InvalidValue) as e:
        c.reconsume_later(m, delay_level=0)
    assert e.value.exit_code == 2
    assert broker.topics.list("public/default") == ["persistent://public/default/t"] or \
        broker.topics.stats("t")["subscriptions"]["s"]["unackedMessages"] == 1


def test_cli_flags(cli):
    assert cli("produce", "t", "-m", "x").exit_code == 0
    assert cli("topics", "create-subscription", "t", "-s", "s", "-m", "earliest").exit_code == 0
    r = cli("receive", "t", "-s", "s", "-t", "Shared", "--enable-retry", "-o", "ndjson")
    mid = json.loads(r.stdout.splitlines()[0])["messageId"]
    bad = cli("reconsume-later", "t", "-s", "s", mid, "--delay", "1s", "--delay-level", "2")
    assert bad.exit_code == 2 and bad.stderr.startswith("error: give one of")
    ok = cli("reconsume-later", "t", "-s", "s", mid, "--delay-level", "2", "-o", "json")
    assert ok.exit_code == 0 and json.loads(ok.stdout) == {"retry": 1, "dlq": 0}
    r = cli("read", "t-s-RETRY", "-m", "earliest", "-o", "ndjson")
    assert json.loads(r.stdout)["properties"]["DELAY_TIME"] == "5000"
    assert cli("brokers", "update-dynamic-config", "--config", "messageDelayLevel",
               "--value", "1s nope").exit_code == 2
