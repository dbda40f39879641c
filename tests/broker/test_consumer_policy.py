"""ConsumerPolicy (pulsarctl/consumer_policy.py): one record from the flags, the Python API's
arguments or the store, to the stored dict, checked once. The stored dict is exactly the one
this release has always written (names, values, order), so stores read as they did."""
from __future__ import annotations

import pytest

import pulsarctl
from pulsarctl.client.client import ConsumerDeadLetterPolicy
from pulsarctl.consumer_policy import ConsumerPolicy
from pulsarctl.errors import InvalidPolicy, InvalidValue

FULL = "persistent://public/default/"

EVERY_FLAG = dict(nack_delay="2s", nack_backoff="1s:60s:3", max_redeliver_count=4,
                  dead_letter_topic="dead", initial_subscription_name="keep",
                  ack_timeout="10s", ack_timeout_tick="200ms", ack_timeout_backoff="1s:1m",
                  enable_retry=True, retry_letter_topic="again")


def test_every_flag_to_the_stored_dict_in_the_order_the_command_line_wrote_it():
    stored = ConsumerPolicy.from_flags(**EVERY_FLAG).to_store()
    assert list(stored.items()) == [
        ("negativeAckRedeliveryDelayMs", 2000),
        ("negativeAckBackoff", [1000, 60000, 3.0]),
        ("maxRedeliverCount", 4),
        ("deadLetterTopic", FULL + "dead"),
        ("initialSubscriptionName", "keep"),
        ("ackTimeoutMs", 10000),
        ("ackTimeoutTickMs", 200),
        ("ackTimeoutBackoff", [1000, 60000, 2.0]),
        ("enableRetry", True),
        ("retryLetterTopic", FULL + "again"),
    ]


def test_flags_left_out_are_not_stored_so_the_stored_values_stay():
    assert ConsumerPolicy.from_flags().to_store() == {}
    assert ConsumerPolicy.from_flags(max_redeliver_count=2).to_store() == {"maxRedeliverCount": 2}
    # a retry letter topic turns retry on; 0 turns the ack timeout off (stored as 0)
    assert ConsumerPolicy.from_flags(retry_letter_topic="r", ack_timeout="0").to_store() == {
        "ackTimeoutMs": 0, "enableRetry": True, "retryLetterTopic": FULL + "r"}


def test_the_nack_delay_is_raised_to_the_minimum_from_both_sides():
    assert ConsumerPolicy.from_flags(nack_delay="10ms").nack_delay_ms == 100
    assert ConsumerPolicy.from_client(negative_ack_redelivery_delay_ms=10).nack_delay_ms == 100


def test_the_store_round_trip_keeps_values_and_order():
    for policy in (ConsumerPolicy.from_flags(**EVERY_FLAG),
                   ConsumerPolicy.from_client(negative_ack_redelivery_delay_ms=500,
                                              unacked_messages_timeout_ms=2000,
                                              enable_retry=True)):
        stored = policy.to_store()
        again = ConsumerPolicy.from_store(stored)
        assert again == policy
        assert list(again.to_store().items()) == list(stored.items())


def test_from_store_leaves_out_names_it_does_not_know():
    p = ConsumerPolicy.from_store({"somethingElse": 1, "maxRedeliverCount": 3})
    assert p == ConsumerPolicy(max_redeliver_count=3)
    assert p.to_store() == {"maxRedeliverCount": 3}
    assert ConsumerPolicy.from_store(None) == ConsumerPolicy()


def test_the_python_api_stores_its_names_in_its_own_order():
    p = ConsumerPolicy.from_client(negative_ack_redelivery_delay_ms=1000,
                                   negative_ack_backoff=(100, 1000, 2.0),
                                   dead_letter_policy=ConsumerDeadLetterPolicy(3, "d", "i"),
                                   unacked_messages_timeout_ms=5000, retry_letter_topic="r")
    assert list(p.to_store().items()) == [
        ("negativeAckRedeliveryDelayMs", 1000), ("negativeAckBackoff", [100, 1000, 2.0]),
        ("maxRedeliverCount", 3), ("deadLetterTopic", "d"), ("initialSubscriptionName", "i"),
        ("enableRetry", True), ("retryLetterTopic", "r"), ("ackTimeoutMs", 5000)]


def test_merge_puts_the_values_given_over_and_keeps_the_rest():
    base = ConsumerPolicy.from_store({"ackTimeoutMs": 2000, "maxRedeliverCount": 1})
    merged = base.merge(ConsumerPolicy(max_redeliver_count=5, nack_delay_ms=300))
    assert list(merged.to_store().items()) == [
        ("ackTimeoutMs", 2000), ("maxRedeliverCount", 5), ("negativeAckRedeliveryDelayMs", 300)]
    assert base.merge(None) is base
    assert base.merge({"maxRedeliverCount": 7}).max_redeliver_count == 7


@pytest.mark.parametrize("flags, message", [
    (dict(ack_timeout="500ms"), "Ack timeout should be greater than 1000 ms"),
    (dict(ack_timeout="2s", ack_timeout_tick="50ms"), "Ack timeout tick should be at least 100 ms"),
    (dict(max_redeliver_count=0), "--max-redeliver-count must be greater than 0"),
    (dict(max_redeliver_count=-5), "--max-redeliver-count must be greater than 0"),
    (dict(nack_delay="zzz"), "--nack-delay"),
    (dict(nack_backoff="5s:1s"), "backoff maximum 1s is below the minimum 5s"),
])
def test_bad_flags_are_refused_with_exit_2(flags, message):
    with pytest.raises(InvalidValue) as ei:
        ConsumerPolicy.from_flags(**flags)
    assert message in str(ei.value)
    assert ei.value.exit_code == 2


def test_the_python_api_checks_with_its_own_names():
    with pytest.raises(InvalidPolicy, match="^max_redeliver_count must be greater than 0"):
        ConsumerDeadLetterPolicy(0)
    with pytest.raises(InvalidPolicy, match="^max_redeliver_count must be greater than 0"):
        ConsumerPolicy(max_redeliver_count=0).validate({"max_redeliver_count":
                                                        "max_redeliver_count"})
    with pytest.raises(InvalidValue, match="greater than 1000 ms"):
        ConsumerPolicy.from_client(unacked_messages_timeout_ms=999)


def test_the_broker_stores_a_consumer_policy_as_its_dict(broker):
    policy = ConsumerPolicy.from_flags(nack_delay="1s", max_redeliver_count=2,
                                       dead_letter_topic="d")
    broker.subscribe("t", "s", "c", "Shared", lease_ms=60_000, settings=policy)
    assert broker.subscription("t", "s").policy() == policy.to_store()
    # a later consumer's policy changes only what it gives
    broker.subscribe("t", "s", "c2", "Shared", lease_ms=60_000,
                     settings=ConsumerPolicy(max_redeliver_count=5))
    assert broker.subscription("t", "s").policy() == {**policy.to_store(), "maxRedeliverCount": 5}


def test_the_client_takes_a_consumer_policy_and_pulsar_clients_arguments_over_it(broker):
    client = pulsarctl.Client(broker=broker)
    client.subscribe("t", "s", settings=ConsumerPolicy(max_redeliver_count=2, nack_delay_ms=500),
                     negative_ack_redelivery_delay_ms=700).close()
    assert broker.subscription("t", "s").policy() == {"negativeAckRedeliveryDelayMs": 700,
                                                    "maxRedeliverCount": 2}
    client.close()
