"""Lessons on acknowledgements: cumulative acks and the mark-delete position, the ack timeout,
and acks of batched messages (with and without batch-index acks).

Each step says what Pulsar 4.x does, and why, citing the class or setting it follows (read in
apache/pulsar: ManagedCursorImpl, ConsumerBase, UnAckedMessageTracker, the batch acker and
acknowledgmentAtBatchIndexLevelEnabled); where pulsarctl goes beyond Pulsar, the step says so
apart (ours)."""
from __future__ import annotations

from pulsarctl.lessons.model import Builder, Lesson, Question


def cumulative_ack() -> Lesson:
    b = Builder("orders", "ex")
    b.simulate()
    b.step("produce orders -m o1 -m o2 -m o3 -m o4 -m o5",
           "Five messages: 1:0:-1 to 1:4:-1.", "They will be acked in two ways.",
           "MessageIdImpl", look=None)
    b.step("receive orders -s ex -t Exclusive -p Earliest -n 5",
           "The Exclusive consumer holds all five, pending.",
           "Nothing is acked yet: the mark-delete position is before 1:0.",
           "ManagedCursor.markDeletePosition")
    b.step("ack orders -s ex 1:3:-1",
           "o4 is acked alone: it is an individually deleted message, above the mark-delete "
           "position.",
           "A cursor keeps the acked ranges above mark-delete (individuallyDeletedMessages).",
           "ManagedCursor.individuallyDeletedMessages")
    b.step("ack orders -s ex --cumulative 1:2:-1",
           "o1, o2 and o3 are acked at once, and mark-delete moves past o4 too: only o5 is left.",
           "A cumulative ack acks everything up to the id; the acked range above it merges in.",
           "Consumer.acknowledgeCumulative; ManagedCursor.markDelete")
    b.step("subscriptions describe orders ex",
           "markDeletePosition is 1:3: everything at or below it is acked.",
           "The backlog is what lies after mark-delete and is not individually acked: o5.",
           "ManagedCursor: backlog")
    b.step("receive orders -s sh -t Shared -p Earliest -n 2",
           "A Shared subscription sh: its consumer holds o1 and o2.",
           "Shared consumers may hold any messages, not a prefix.",
           "PersistentDispatcherMultipleConsumers", look=("orders", "sh"))
    b.step("ack orders -s sh --cumulative 1:1:-1",
           "Refused: \"Cannot use cumulative acks on a non-exclusive/non-failover "
           "subscription\" (exit 4).",
           "Messages below the id may be held by other consumers, so only Exclusive and "
           "Failover ack cumulatively; the Java client refuses it itself "
           "(InvalidConfigurationException), before anything reaches the broker.",
           "ConsumerBase.isCumulativeAcknowledgementAllowed", look=("orders", "sh"),
           exit_code=4)
    return b.lesson(
        "cumulative-ack", "Cumulative acks move the mark-delete position (Exclusive, Failover)",
        Question("Which consumer held 1:0:-1 on ex, and how was it acknowledged?", "1:0:-1",
                 "orders", "ex", answer=("consumer cli", "(cumulatively)")))


def ack_timeout() -> Lesson:
    b = Builder("jobs", "w")
    b.simulate()
    b.step("produce jobs -m j1 -m j2", "Two messages: 1:0:-1 and 1:1:-1.",
           "One will be acked in time, one not.", "MessageIdImpl", look=None)
    b.step("receive jobs -s w -t Shared -p Earliest -n 2 --ack-timeout 10s",
           "The consumer holds both; each comes back unless acked within 10 s of being "
           "received.",
           "With ackTimeout set (it is off by default), the client tracks what the "
           "application received, in buckets of one tick (1 s): a message is redelivered "
           "between 10 and 11 s after it was received.",
           "UnAckedMessageTracker (ackTimeoutMillis, tickDurationMillis)")
    b.step("ack jobs -s w 1:0:-1", "j1 is acked in time: its timer is gone.",
           "An ack (or a nack) removes a message from the ack-timeout tracker.",
           "UnAckedMessageTracker.remove")
    b.step("clock advance 9s", "Nine seconds pass: nothing fires yet.",
           "j2's timeout has not come.", "UnAckedMessageTracker: ackTimeout")
    b.step("clock advance 1s", "The ack timeout fires: j2 waits for redelivery.",
           "The consumer asks the broker to redeliver it; on a Shared subscription the broker "
           "counts that: its redelivery count becomes 1.",
           "redeliverUnacknowledgedMessages; InMemoryRedeliveryTracker",
           ours="the timer is kept in the store, so it fired though no consumer process was "
                "running (receive had exited). Pulsar's lives in the consumer: had the "
                "consumer gone away, j2 would have come back at once, uncounted.")
    b.step("receive jobs -s w -t Shared -mp",
           "j2 comes back with redeliveryCount:[1].",
           "Shared subscriptions count redeliveries per message; the count is what a dead "
           "letter policy compares.",
           "Message.getRedeliveryCount")
    b.step("ack jobs -s w 1:1:-1", "j2 is acked: the subscription is empty.",
           "An ack ends the message's life on this subscription.",
           "PersistentSubscription.acknowledgeMessage")
    return b.lesson(
        "ack-timeout", "Ack timeout: what is not acked in time is delivered again",
        Question("When and why was 1:1:-1 delivered a second time, and with which count?",
                 "1:1:-1", "jobs", "w",
                 answer=("10:00:10", "ack timeout 10s", "redelivery count 1")))


def batch_index_ack() -> Lesson:
    b = Builder("batched", "w")
    batch = "--batching-max-messages 3"
    b.simulate()
    b.step(f"produce batched -m a -m b -m c {batch}",
           "The three messages go out as one batch: one entry, 1:0, holding 1:0:-1:0, "
           "1:0:-1:1 and 1:0:-1:2.",
           "A batching producer packs what it sends together into one entry; a message's id "
           "adds its index in the batch. The backlog counts entries: this batch is 1.",
           "BatchMessageContainerImpl; BatchMessageIdImpl (ledger:entry:partition:index)",
           look=None)
    b.step("receive batched -s w -t Shared -p Earliest -n 3",
           "The consumer holds all three: the entry is pending for it.",
           "The broker dispatches entries: a batch goes whole to one consumer, whose client "
           "splits it into messages.",
           "ConsumerImpl.receiveIndividualMessagesFromBatch")
    b.step("ack batched -s w 1:0:-1:0 1:0:-1:2",
           "a and c are acked, b is not: the entry stays in the backlog (acked 0,2).",
           "An entry is acked only when all its messages are. Without batch-index acks "
           "Pulsar's broker does not even see these two: the consumer keeps them in memory "
           "and acks the entry once b is acked too.",
           "BatchMessageAcker; PersistentAcknowledgmentsGroupingTracker",
           ours="the acked indexes are stored either way (the picture shows them), so an ack "
                "from another shell counts; as in Pulsar, acknowledgmentAtBatchIndexLevelEnabled "
                "decides whether a redelivery skips them.")
    b.step("redeliver-unacked batched -s w",
           "The consumer asks for its unacked messages again: the whole entry 1:0 goes back "
           "to dispatch.",
           "acknowledgmentAtBatchIndexLevelEnabled is false (Pulsar's default): a batch is "
           "redelivered whole, acked messages included.",
           "Consumer.redeliverUnacknowledgedMessages; acknowledgmentAtBatchIndexLevelEnabled")
    b.step("receive batched -s w -t Shared -n 3 -mp",
           "a, b and c all come again, with redeliveryCount:[1]: a and c a second time though "
           "they were acked.",
           "Duplicates the application must tolerate: Pulsar's docs warn that a nack, an ack "
           "timeout or a failure redelivers all the messages of a batch.",
           "Pulsar docs, Messaging: Batching")
    b.step("ack batched -s w 1:0:-1:0 1:0:-1:1 1:0:-1:2",
           "All three are acked: the entry is acked and mark-delete moves past 1:0.",
           "A batch leaves the backlog when its last message is acked.",
           "ManagedCursor.markDelete")
    b.step("brokers update-dynamic-config --config acknowledgmentAtBatchIndexLevelEnabled "
           "--value true",
           "Batch-index acks on: the broker keeps the acked indexes of each batch and "
           "dispatches only the others.",
           "The broker keeps an ack set per entry and sends it along, so the consumer skips "
           "acked messages; it costs broker memory. In Pulsar the consumer must ask for it too "
           "(enableBatchIndexAcknowledgment(true)), or it never sends index acks.",
           "acknowledgmentAtBatchIndexLevelEnabled; ConsumerBuilder."
           "enableBatchIndexAcknowledgment",
           ours="a store-wide setting, as the broker's; pulsarctl's consumers always send "
                "index acks.")
    b.step(f"produce batched -m d -m e -m f {batch}",
           "A second batch, entry 1:1: 1:1:-1:0 to 1:1:-1:2.", "It will be acked in part.",
           "BatchMessageIdImpl")
    b.step("receive batched -s w -t Shared -n 3", "The consumer holds d, e and f.",
           "One entry, pending for one consumer.", "PersistentDispatcherMultipleConsumers")
    b.step("ack batched -s w 1:1:-1:0 1:1:-1:2", "d and f are acked; e is not.",
           "The broker now records the acked indexes (its ack set).",
           "ManagedCursorImpl.batchDeletedIndexes")
    b.step("redeliver-unacked batched -s w",
           "The entry goes back to dispatch, with its ack set.",
           "The redelivery is counted for the entry, as before.",
           "Consumer.redeliverUnacknowledgedMessages")
    b.step("receive batched -s w -t Shared -n 3 -mp --idle-timeout 100ms",
           "Only e comes back (1:1:-1:1, redeliveryCount:[1]); d and f are not delivered "
           "again.",
           "The acked indexes of the batch are skipped.",
           "CommandMessage.ack_set; acknowledgmentAtBatchIndexLevelEnabled=true")
    b.step("ack batched -s w 1:1:-1:1",
           "e is acked: the batch is complete and leaves the backlog.",
           "The entry is deleted from the backlog once every index is acked.",
           "ManagedCursor.markDelete")
    return b.lesson(
        "batch-index-ack",
        "Batches: redelivered whole, or only their unacked messages with batch-index acks",
        Question("1:0:-1:0 was acked before the first redelivery: was it delivered again, and "
                 "with which redelivery count?", "1:0:-1:0", "batched", "w",
                 answer=("redelivered on subscription w", "redelivery count 1")))
