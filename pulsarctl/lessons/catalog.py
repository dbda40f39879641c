"""The lessons, as data: each step is a real pulsarctl command line, what Pulsar did, why, and
the rule (Pulsar's class, setting or table; /work/shared/pulsar-semantics.md has the sources).

Every lesson runs on a new store, so its message ids are known in advance (a topic's first
ledger is numbered in the order topics are created: the first topic's messages are 1:0:-1,
1:1:-1, ...) and steps name them as a learner would, copied from the output above them."""
from __future__ import annotations

from pulsarctl.lessons.model import Builder, Lesson, Question
from pulsarctl.names import dlq_topic, retry_topic


def shared_vs_exclusive() -> Lesson:
    b = Builder("orders", "audit")
    b.simulate()
    b.step("produce orders -m o1 -m o2 -m o3 -m o4",
           "Four messages are appended to the topic's ledger: ids 1:0:-1 to 1:3:-1.",
           "An id is ledger:entry:partition; -1 says the topic is not partitioned.",
           "MessageIdImpl.toString", look=None)
    b.step("receive orders -s audit -t Exclusive -p Earliest --consumer-name c1 -n 2",
           "c1 is the one consumer of Exclusive subscription audit; it holds o1 and o2, "
           "pending until acked.",
           "receive does not ack: a delivered message stays pending for its consumer, and "
           "Earliest starts the new subscription before o1.",
           "PersistentSubscription; subscriptionInitialPosition=Earliest")
    b.step("receive orders -s audit -t Exclusive --consumer-name c2",
           "The broker refuses c2 with ConsumerBusy: \"Exclusive consumer is already "
           "connected\" (exit 4).",
           "An Exclusive subscription admits one consumer; a second waits until the first "
           "disconnects (or its lease ends).",
           "AbstractDispatcherSingleActiveConsumer.internalAddConsumer", exit_code=4)
    b.step("receive orders -s work -t Shared -p Earliest --consumer-name c1 -n 2",
           "A second subscription, work, has its own cursor: c1 gets o1 and o2 again there.",
           "Every subscription gets every message; acks on one never move another's cursor.",
           "ManagedCursor: one cursor per subscription", look=("orders", "work"))
    b.step("receive orders -s work -t Shared --consumer-name c2 -n 2",
           "c2 is admitted to work and gets o3 and o4: a Shared subscription spreads messages "
           "over its consumers.",
           "Shared dispatches each message to one consumer with permits, round robin, so order "
           "across consumers is not kept.",
           "PersistentDispatcherMultipleConsumers", look=("orders", "work"))
    b.step("ack orders -s work 1:2:-1",
           "o3 is acked on work and leaves its backlog; audit still has it.",
           "An ack is per subscription and per message: Shared consumers ack one by one.",
           "PersistentSubscription.acknowledgeMessage", look=("orders", "work"))
    return b.lesson(
        "shared-vs-exclusive", "Exclusive admits one consumer, Shared spreads messages over many",
        Question("Who holds 1:3:-1 on work, and why was c2 admitted to work but refused on audit?",
                 "1:3:-1", "orders", "work"))


def failover() -> Lesson:
    b = Builder("my-topic", "fo")
    b.simulate()
    b.step("produce my-topic -m m1 -m m2 -m m3 -m m4",
           "Four messages on a non-partitioned topic: 1:0:-1 to 1:3:-1.",
           "A Failover subscription will deliver them, in order, to one active consumer.",
           "MessageIdImpl", look=None)
    b.step("receive my-topic -s fo -t Failover -p Earliest --consumer-name c1 -n 2",
           "c1 is the only consumer, so it is the active one: it gets m1 and m2.",
           "Failover has one active consumer per topic (or partition); the others stand by.",
           "PersistentDispatcherSingleActiveConsumer")
    b.step("receive my-topic -s fo -t Failover --consumer-name c2 -n 1 --idle-timeout 100ms",
           "c2 is admitted but gets nothing: it stands by while c1 is active.",
           "On a non-partitioned topic the active consumer is picked on a hash ring of consumer "
           "names: murmur3 of the topic's name lands on c1 of {c1, c2}.",
           "pickAndScheduleActiveConsumer, consistent hash ring (Pulsar 3.0+, PR #19502)")
    b.step("subscriptions consumers my-topic fo",
           "The consumers of fo: c1 active, c2 standing by.",
           "Both are connected; only the active one is dispatched to.",
           "PersistentDispatcherSingleActiveConsumer.getActiveConsumer")
    b.step("subscriptions close-consumer my-topic fo c1",
           "c1 disconnects with m1 and m2 unacked; c2 becomes the active consumer.",
           "When the active consumer changes, the cursor rewinds to the first unacked message.",
           "AbstractDispatcherSingleActiveConsumer: rewind on active consumer change")
    b.step("receive my-topic -s fo -t Failover --consumer-name c2 -n 4",
           "c2 gets m1 to m4, in their original order: m1 and m2 a second time.",
           "Failover keeps order by rewinding; it tracks no redelivery count, so m1 still says 0.",
           "RedeliveryTrackerDisabled (Exclusive, Failover)")
    return b.lesson(
        "failover", "Failover: one active consumer, the others standing by; a rewind on change",
        Question("How many times was 1:0:-1 delivered, to whom, and why is its redelivery count "
                 "still 0?", "1:0:-1", "my-topic", "fo"))


def key_shared() -> Lesson:
    b = Builder("orders", "ks")
    b.simulate()
    b.step("topics create-subscription orders -s ks",
           "Subscription ks exists before any message, so its consumers can join first.",
           "A new subscription starts at the end of the topic (Latest).",
           "subscriptionInitialPosition=Latest")
    join = "receive orders -s ks -t Key_Shared --consumer-name {} -n 0 --idle-timeout 10ms"
    b.step(join.format("C1"),
           "C1 joins Key_Shared subscription ks; alone, it owns every hash slot [0, 65536].",
           "A message goes to the consumer whose range holds murmur3(key) % 65536.",
           "HashRangeAutoSplitStickyKeyConsumerSelector")
    b.step(join.format("C2"),
           "C2 joins: the biggest range is split in two; C2 takes the lower half [0, 32768].",
           "Auto-split gives a new consumer the lower half of the biggest range; C1 keeps "
           "(32768, 65536].",
           "HashRangeAutoSplitStickyKeyConsumerSelector.addConsumer")
    b.step(join.format("C3"),
           "C3 joins: the lowest of the two biggest ranges is split; C3 takes [0, 16384].",
           "On a tie the lowest range is split; C2 keeps (16384, 32768].",
           "HashRangeAutoSplitStickyKeyConsumerSelector.addConsumer")
    b.step("subscriptions consumers orders ks",
           "The three consumers and the key hash ranges each owns.",
           "Each slot of [0, 65536] belongs to exactly one consumer.",
           "Key_Shared auto-split hash ranges")
    b.step("produce orders -k Order-3459134 -m order-1 -m order-2",
           "Two messages with key Order-3459134: 1:0:-1 and 1:1:-1.",
           "murmur3(\"Order-3459134\") % 65536 = 6067, a slot in C3's range [0, 16384].",
           "StickyKeyConsumerSelectorUtils.makeStickyKeyHash")
    b.step("produce orders -k hello -m greeting",
           "One message with key hello: 1:2:-1.",
           "murmur3(\"hello\") % 65536 = 64071, a slot in C1's range (32768, 65536].",
           "StickyKeyConsumerSelectorUtils.makeStickyKeyHash")
    b.step("receive orders -s ks -t Key_Shared --consumer-name C3 -n 2",
           "C3 gets both messages of key Order-3459134, in order.",
           "A key is never processed by two consumers at once: its slot decides.",
           "PersistentStickyKeyDispatcherMultipleConsumers")
    b.step("receive orders -s ks -t Key_Shared --consumer-name C1 -n 1",
           "C1 gets the greeting.", "Slot 64071 is in C1's range.",
           "HashRangeAutoSplitStickyKeyConsumerSelector.select (ceiling entry)")
    sticky = ("receive orders -s st -t Key_Shared -p Earliest --key-shared-policy sticky "
              "--sticky-ranges {} --consumer-name {} -n 0 --idle-timeout 10ms")
    b.step(sticky.format("0-32767", "S1"),
           "Sticky subscription st: S1 claims slots 0-32767 and gets the two orders (slot "
           "6067); the greeting (64071) is in no one's range.",
           "With sticky ranges nothing is split for you: a message whose slot no consumer "
           "covers waits.",
           "HashRangeExclusiveStickyKeyConsumerSelector", look=("orders", "st"))
    b.step(sticky.format("16384-40000", "S2"),
           "S2 asks for 16384-40000 and is refused: \"Range conflict with consumer S1\" "
           "(exit 4).",
           "Sticky ranges must not overlap another consumer's.",
           "HashRangeExclusiveStickyKeyConsumerSelector.addConsumer", look=("orders", "st"),
           exit_code=4)
    b.step(sticky.format("32768-65535", "S2"),
           "S2 claims 32768-65535 and at once gets the greeting that was waiting.",
           "Slot 64071 is now covered, so the message is dispatched to its owner.",
           "HashRangeExclusiveStickyKeyConsumerSelector.select", look=("orders", "st"))
    return b.lesson(
        "key-shared", "Key_Shared: keys hashed to slots, auto-split ranges and sticky ranges",
        Question("Why did 1:2:-1 go to C1 at once on ks but wait on st until S2 joined?",
                 "1:2:-1", "orders", "st"))


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
           "Failover ack cumulatively.",
           "ConsumerBase.isCumulativeAcknowledgementAllowed", look=("orders", "sh"),
           exit_code=4)
    return b.lesson(
        "cumulative-ack", "Cumulative acks move the mark-delete position (Exclusive, Failover)",
        Question("What acked 1:0:-1 on ex, and when was 1:3:-1 acked?", "1:0:-1", "orders",
                 "ex"))


def ack_timeout() -> Lesson:
    b = Builder("jobs", "w")
    b.simulate()
    b.step("produce jobs -m j1 -m j2", "Two messages: 1:0:-1 and 1:1:-1.",
           "One will be acked in time, one not.", "MessageIdImpl", look=None)
    b.step("receive jobs -s w -t Shared -p Earliest -n 2 --ack-timeout 10s",
           "The consumer holds both, each due back 10 s after delivery unless acked.",
           "With ackTimeout set, the client redelivers what it did not ack in time.",
           "UnAckedMessageTracker (ackTimeoutMillis; off by default)")
    b.step("ack jobs -s w 1:0:-1", "j1 is acked in time: its timer is gone.",
           "An ack (or a nack) removes a message from the ack-timeout tracker.",
           "UnAckedMessageTracker.remove")
    b.step("clock advance 9s", "Nine seconds pass: nothing fires yet.",
           "j2's timeout has not come.", "UnAckedMessageTracker: ackTimeout")
    b.step("clock advance 1s", "The ack timeout fires: j2 waits for redelivery.",
           "The consumer asks the broker to redeliver it; its redelivery count becomes 1.",
           "redeliverUnacknowledgedMessages; InMemoryRedeliveryTracker")
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
        Question("When and why was 1:1:-1 delivered a second time?", "1:1:-1", "jobs", "w"))


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
           "Backoff for count 0 is the minimum, 1 s; the deadline is rounded down to 256 ms "
           "(10:00:00.768).",
           "NegativeAcksTracker (trimLowerBit, precision 8 bits)")
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
           "redelivery; the original is acked.",
           "ConsumerImpl.processPossibleToDLQ")
    b.step(f"read {dlq_topic('jobs', 'w')} -m earliest",
           "The dead letter, a new message on jobs-w-DLQ, says where it came from.",
           "REAL_TOPIC, ORIGIN_MESSAGE_ID and REAL_SUBSCRIPTION are copied into its properties.",
           "DeadLetterPolicy (default topic <topic>-<subscription>-DLQ)")
    return b.lesson(
        "nack-backoff-and-dlq",
        "Negative acks: redelivery with a growing backoff, then the dead letter topic",
        Question("How many times was 1:0:-1 delivered before it was dead-lettered, with which "
                 "delays, and what is its id on the DLQ?", "1:0:-1", "jobs", "w"))


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
           "TDMQ's delay levels (messageDelayLevel: 1s 5s 10s 30s 1m ...): retry N waits "
           "level N.",
           "reconsumeLater: RECONSUMETIMES, DELAY_TIME; TDMQ messageDelayLevel", look=retry)
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
                 "with which delays?", "3:0:-1", dlq))


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
           "Exclusive and Failover ignore the delay.",
           "DelayedDeliveryTest.testDelayedDelivery", look=("reminders", "audit"))
    b.step("clock advance 30s", "30 s pass: later is due on mail.",
           "The delayed index releases it to the dispatcher.",
           "InMemoryDelayedDeliveryTracker")
    b.step("receive reminders -s mail -t Shared",
           "The Shared consumer gets later now.", "Delayed messages go out in id order when due.",
           "DelayedDeliveryTest.testOrderingDispatch")
    return b.lesson(
        "delayed-delivery", "Delayed delivery: held back on Shared, ignored by Failover",
        Question("When did 1:0:-1 become deliverable on mail, and why did audit get it at once?",
                 "1:0:-1", "reminders", "mail"))


LESSONS: tuple[Lesson, ...] = (
    shared_vs_exclusive(), failover(), key_shared(), cumulative_ack(), ack_timeout(),
    nack_backoff_and_dlq(), retry_letter(), delayed_delivery(),
)
