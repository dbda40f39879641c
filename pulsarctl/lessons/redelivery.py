"""Lessons on messages that come back: negative acks with a backoff and the dead letter topic,
the retry letter topic, and delayed delivery.

Each step says what Pulsar 4.x does, and why, citing the class or setting it follows (read in
apache/pulsar: NegativeAcksTracker, MultiplierRedeliveryBackoff, ConsumerImpl's dead letter and
retry paths, RetryMessageUtil, InMemoryDelayedDeliveryTracker); where pulsarctl goes beyond
Pulsar, the step says so apart (ours)."""
from __future__ import annotations

from pulsarctl.lessons.model import Builder, Lesson, Question
from pulsarctl.names import dlq_topic, retry_topic


def nack_backoff_and_dlq() -> Lesson:
    b = Builder("jobs", "w")
    b.simulate()
    b.step("produce jobs -m j1", "One message: 1:0:-1.", "It will fail three times.",
           "MessageIdImpl", look=None)
    b.step("receive jobs -s w -t Shared -p Earliest --nack-backoff 1s:10s "
           "--max-redeliver-count 2",
           "The consumer holds j1 (redelivery count 0), with a nack backoff and a dead letter "
           "policy of 2.",
           "The backoff waits min * 2^count (1 s, 2 s, 4 s ... at most 10 s).",
           "MultiplierRedeliveryBackoff; DeadLetterPolicy.maxRedeliverCount")
    b.step("nack jobs -s w 1:0:-1", "j1 is nacked: it comes back after 1 s.",
           "Backoff for count 0 is the minimum, 1 s; the deadline is rounded down to a "
           "multiple of 256 ms (10:00:00.768), so a nack may fire up to 255 ms early.",
           "NegativeAcksTracker (trimLowerBit, negativeAckPrecisionBitCnt=8)",
           ours="the nack timer is kept in the store, so it fires though no consumer process "
                "runs (Pulsar's lives in the client and dies with it). nack takes an id yet "
                "backs off by the count the message was delivered with, as Pulsar's "
                "negativeAcknowledge(Message) does (given only a MessageId, Pulsar backs off "
                "as for count 0).")
    b.step("clock advance 1s", "The nack fires: j1 waits for redelivery.",
           "The consumer asks for redelivery; the broker counts it.",
           "redeliverUnacknowledgedMessages")
    b.step("receive jobs -s w -t Shared -mp", "j1 again, redeliveryCount:[1].",
           "The count is kept per message on Shared and Key_Shared subscriptions.",
           "InMemoryRedeliveryTracker")
    b.step("nack jobs -s w 1:0:-1", "Nacked again: now it waits 2 s.",
           "Backoff for count 1 is 1 s * 2 = 2 s.", "MultiplierRedeliveryBackoff.next(1)")
    b.step("clock advance 2s", "The nack fires.", "j1 waits for its third delivery.",
           "NegativeAcksTracker")
    b.step("receive jobs -s w -t Shared -mp", "j1 a third time, redeliveryCount:[2].",
           "Count 2 = maxRedeliverCount: this is the last delivery.",
           "ConsumerImpl: possibleSendToDeadLetterTopicMessages")
    b.step("nack jobs -s w 1:0:-1", "Nacked a third time: it waits 4 s.",
           "Backoff for count 2 is 4 s.", "MultiplierRedeliveryBackoff.next(2)")
    b.step("clock advance 4s",
           "The nack fires, and j1 is moved to the dead letter topic instead of redelivered.",
           "A message delivered maxRedeliverCount + 1 times goes to the DLQ on its next "
           "redelivery: the consumer publishes it there, then acks the original.",
           "ConsumerImpl.processPossibleToDLQ",
           ours="the move is made by whichever process fires the timer, in one transaction "
                "with the ack of the original; in Pulsar the consumer's own DLQ producer "
                "makes it.")
    b.step(f"read {dlq_topic('jobs', 'w')} -m earliest",
           "The dead letter, a new message 2:0:-1 on jobs-w-DLQ, says where it came from.",
           "REAL_TOPIC, ORIGIN_MESSAGE_ID and REAL_SUBSCRIPTION (Pulsar 3.2+) are added to its "
           "properties. ORIGIN_MESSAGE_IDY_TIME holds the same id under Pulsar's old, "
           "misspelt name, deprecated but still written by the Java client beside "
           "ORIGIN_MESSAGE_ID for older readers: read ORIGIN_MESSAGE_ID.",
           "DeadLetterPolicy (default topic <topic>-<subscription>-DLQ); RetryMessageUtil."
           "SYSTEM_PROPERTY_ORIGIN_MESSAGE_ID",
           ours="the dead letter topic keeps its messages until `dlq drain`, `dlq replay` or "
                "`dlq purge`; Pulsar keeps them only for a subscription "
                "(initialSubscriptionName) or under retention.")
    return b.lesson(
        "nack-backoff-and-dlq",
        "Negative acks: redelivery with a growing backoff, then the dead letter topic",
        Question("How many times was 1:0:-1 delivered before it was dead-lettered, with which "
                 "delays, and what is its id on the DLQ?", "1:0:-1", "jobs", "w",
                 answer=("redelivery 2", "after 1s", "after 2s", "after 4s", "as 2:0:-1")))


def retry_letter() -> Lesson:
    b = Builder("pay", "billing")
    retry = (retry_topic("pay", "billing"), "billing")
    dlq = dlq_topic("pay", "billing")
    b.simulate()
    b.step("produce pay -m p1", "One message: 1:0:-1.", "Its processing will be retried.",
           "MessageIdImpl", look=None)
    consume = ("receive pay -s billing -t Shared -p Earliest --enable-retry "
               "--max-redeliver-count 2")
    b.step(consume,
           "The consumer holds p1, on a subscription with a retry letter topic "
           "(pay-billing-RETRY) and a limit of 2 retries.",
           "enableRetry subscribes to the retry topic too, with the same subscription name.",
           "ConsumerBuilder.enableRetry; RetryMessageUtil")
    b.step("reconsume-later pay -s billing 1:0:-1 --delay-level-increment",
           "p1 is copied to pay-billing-RETRY as 2:0:-1, due in 1 s (delay level 1), and the "
           "original is acked.",
           "reconsumeLater publishes a copy with RECONSUMETIMES and DELAY_TIME, delivered after "
           "the delay, and acks the original; retry N waits delay level N here.",
           "ConsumerImpl.doReconsumeLater", look=retry,
           ours="delay levels (messageDelayLevel: 1s 5s 10s 30s 1m ...) are TDMQ's, Tencent "
                "Cloud's Pulsar; Apache Pulsar's reconsumeLater takes a delay "
                "(reconsume-later --delay).")
    b.step(consume.replace(" -p Earliest", "") + " -mp",
           "p1 again, at once, as 2:0:-1, with RECONSUMETIMES=1 and DELAY_TIME=1000.",
           "A delay within the broker's tick (delayedDeliveryTickTimeMillis=1000) is delivered "
           "at once; a retry is a new message, its origin kept in ORIGIN_MESSAGE_ID.",
           "InMemoryDelayedDeliveryTracker: cutoff now + tick; reconsumeLater", look=retry)
    b.step("reconsume-later pay -s billing 2:0:-1 --delay-level-increment",
           "Retry 2 goes back to the retry topic as 2:1:-1, due in 5 s (level 2).",
           "--delay-level-increment: level = RECONSUMETIMES, so each retry waits longer.",
           "TDMQ messageDelayLevel", look=retry)
    b.step(consume.replace(" -p Earliest", "") + " --idle-timeout 100ms",
           "Nothing yet: this retry waits its 5 s.",
           "5 s is past the broker's 1 s tick, so the delayed index holds the message back.",
           "DelayedDeliveryTracker", look=retry)
    b.step("clock advance 5s", "The delay of level 2 has passed.",
           "The second retry becomes deliverable.", "DelayedDeliveryTracker", look=retry)
    b.step(consume.replace(" -p Earliest", "") + " -mp",
           "p1 a third time, as 2:1:-1, with RECONSUMETIMES=2.",
           "RECONSUMETIMES counts the retries so far.", "reconsumeLater", look=retry)
    b.step("reconsume-later pay -s billing 2:1:-1 --delay-level-increment",
           "Retry 3 is over the limit of 2: p1 goes to the dead letter topic pay-billing-DLQ.",
           "When RECONSUMETIMES would pass maxRedeliverCount, reconsumeLater sends to the DLQ, "
           "with no delay.",
           "ConsumerImpl.doReconsumeLater", look=retry)
    b.step(f"read {dlq} -m earliest",
           "The dead letter keeps the first origin (ORIGIN_MESSAGE_ID=1:0:-1) and the count.",
           "The app saw p1 max + 1 = 3 times: the original and 2 retries.",
           "RetryTopicTest: REAL_TOPIC, ORIGIN_MESSAGE_ID, RECONSUMETIMES", look=None)
    return b.lesson(
        "retry-letter", "Retry letter topic: reconsume later with TDMQ's delay levels, then DLQ",
        Question("Follow the dead letter 3:0:-1 back: which topics did it pass through, and "
                 "with which delays?", "3:0:-1", dlq,
                 answer=(retry[0], "after 1s", "after 5s", dlq)))


def delayed_delivery() -> Lesson:
    b = Builder("reminders", "mail")
    b.simulate()
    b.step("topics create-subscription reminders -s mail",
           "Subscription mail (it will be Shared).", "It starts at the end of the topic.",
           "subscriptionInitialPosition=Latest")
    b.step("topics create-subscription reminders -s audit",
           "Subscription audit (it will be Failover).", "It starts at the end of the topic.",
           "subscriptionInitialPosition=Latest", look=("reminders", "audit"))
    b.step("produce reminders -m later --deliver-after 30s",
           "1:0:-1 is stored now, deliverable at 10:00:30.",
           "deliverAfter sets deliver_at_time in the message's metadata.",
           "MessageMetadata.deliver_at_time")
    b.step("produce reminders -m now", "1:1:-1 has no delay.", "It can be delivered at once.",
           "MessageMetadata")
    b.step("receive reminders -s mail -t Shared -n 0 --idle-timeout 100ms",
           "The Shared consumer gets only now; later is held back.",
           "Shared and Key_Shared dispatchers keep delayed messages aside until they are due.",
           "DelayedDeliveryTracker (delayedDeliveryEnabled=true)")
    b.step("receive reminders -s audit -t Failover -n 2",
           "The Failover consumer gets both at once, later first.",
           "Exclusive and Failover dispatchers have no delayed-delivery tracker: they ignore "
           "the delay.",
           "PersistentDispatcherSingleActiveConsumer; DelayedDeliveryTest.testDelayedDelivery",
           look=("reminders", "audit"))
    b.step("clock advance 30s", "30 s pass: later is due on mail.",
           "The delayed index releases it to the dispatcher (it may do so up to one tick, "
           "delayedDeliveryTickTimeMillis=1000, early).",
           "InMemoryDelayedDeliveryTracker")
    b.step("receive reminders -s mail -t Shared",
           "The Shared consumer gets later now.", "Delayed messages go out in id order when due.",
           "DelayedDeliveryTest.testOrderingDispatch")
    return b.lesson(
        "delayed-delivery", "Delayed delivery: held back on Shared, ignored by Failover",
        Question("Until when was 1:0:-1 held back on mail, and who got it there?", "1:0:-1",
                 "reminders", "mail",
                 answer=("until 2026-01-01T10:00:30", "consumer cli")))
