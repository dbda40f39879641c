"""Lessons on who gets a message: Exclusive, Shared, Failover and Key_Shared subscriptions.

Each step says what Pulsar 4.x does, and why, citing the class or setting it follows (read in
apache/pulsar: AbstractDispatcherSingleActiveConsumer, PersistentDispatcherMultipleConsumers,
the Key_Shared selectors); where pulsarctl goes beyond Pulsar, the step says so apart (ours)."""
from __future__ import annotations

from pulsarctl.lessons.model import Builder, Lesson, Question


def shared_vs_exclusive() -> Lesson:
    b = Builder("orders", "audit")
    b.simulate()
    b.step("produce orders -m o1 -m o2 -m o3 -m o4",
           "Four messages are appended to the topic's ledger: ids 1:0:-1 to 1:3:-1.",
           "An id is ledger:entry:partition; -1 says the topic is not partitioned.",
           "MessageIdImpl.toString", look=None)
    b.step("receive orders -s audit -t Exclusive -p Earliest --consumer-name c1 -n 2",
           "c1 is the one consumer of Exclusive subscription audit; it holds o1 and o2, "
           "pending until it acks them.",
           "receive asks for two messages and does not ack them; Earliest starts the new "
           "subscription before o1 (Latest, the default, would start after o4).",
           "PersistentSubscription; subscriptionInitialPosition=Earliest")
    b.step("receive orders -s audit -t Exclusive --consumer-name c2",
           "The broker refuses c2 with ConsumerBusy: \"Exclusive consumer is already "
           "connected\" (exit 4). c2 is not queued: it must subscribe again later.",
           "An Exclusive subscription admits one consumer. Before refusing, the broker checks "
           "that the first one's connection is alive; only a dead one's place is given away.",
           "AbstractDispatcherSingleActiveConsumer.addConsumer: ConsumerBusyException",
           exit_code=4,
           ours="a receive's consumer stays connected after the command ends, until its "
                "lease runs out (--lease, 5m) or it is closed (subscriptions close-consumer): "
                "the lease stands in for a live connection.")
    b.step("receive orders -s work -t Shared -p Earliest --consumer-name c1 -n 2",
           "A second subscription, work, has its own cursor: c1 gets o1 and o2 again there.",
           "Every subscription gets every message; acks on one never move another's cursor.",
           "ManagedCursor: one cursor per subscription", look=("orders", "work"))
    b.step("receive orders -s work -t Shared --consumer-name c2 -n 2",
           "c2 is admitted to work and gets o3 and o4: a Shared subscription spreads messages "
           "over its consumers.",
           "Shared gives each message to one consumer that has permits, round robin (up to "
           "dispatcherMaxRoundRobinBatchSize=20 at a time), so order across consumers is not "
           "kept; o1 and o2 stay c1's until acked.",
           "PersistentDispatcherMultipleConsumers.trySendMessagesToConsumers",
           look=("orders", "work"))
    b.step("ack orders -s work 1:2:-1",
           "o3 is acked on work and leaves its backlog; audit still has it.",
           "An ack is per subscription and per message: Shared consumers ack one by one "
           "(a cumulative ack is refused on Shared: see lesson cumulative-ack).",
           "PersistentSubscription.acknowledgeMessage", look=("orders", "work"))
    return b.lesson(
        "shared-vs-exclusive", "Exclusive admits one consumer, Shared spreads messages over many",
        Question("Which consumer of work got 1:2:-1, and what became of it there?",
                 "1:2:-1", "orders", "work",
                 answer=("consumer c2", "acknowledged on subscription work")))


def failover() -> Lesson:
    b = Builder("my-topic", "fo")
    b.simulate()
    b.step("produce my-topic -m m1 -m m2 -m m3 -m m4",
           "Four messages on a non-partitioned topic: 1:0:-1 to 1:3:-1.",
           "A Failover subscription delivers them, in order, to one active consumer at a time.",
           "MessageIdImpl", look=None)
    b.step("receive my-topic -s fo -t Failover -p Earliest --consumer-name c2 -n 2",
           "c2 subscribes first and is alone, so it is the active consumer: it gets m1 and m2.",
           "Failover has one active consumer per topic (or per partition); the others stand by.",
           "PersistentDispatcherSingleActiveConsumer")
    b.step("receive my-topic -s fo -t Failover --consumer-name c1 -n 2 --nack-delay 1s",
           "c1 joins and becomes the active consumer although c2 was first: the cursor "
           "rewinds and c1 gets m1 and m2 (its nack delay, 1 s, is for later).",
           "On a non-partitioned topic Pulsar 4.x picks the active consumer on a hash ring of "
           "the consumers' names (100 points each): murmur3 of the topic's full name lands on "
           "c1's. Pulsar's docs, and that method's own comment, still say the first consumer "
           "to subscribe is active (the rule of 2.x); the 4.x code is what runs.",
           "AbstractDispatcherSingleActiveConsumer.pickAndScheduleActiveConsumer (hash ring "
           "since 3.0, apache/pulsar#19502)",
           ours="the cursor rewinds at once; Pulsar waits activeConsumerFailoverDelayTimeMillis "
                "(1 s) first, so that acks c2 sent just before still land.")
    b.step("subscriptions consumers my-topic fo",
           "The consumers of fo: c1 active, c2 standing by and holding nothing.",
           "Both are connected; only the active one is dispatched to. A consumer of a higher "
           "priority level (--priority; 0 is the highest) would win over the ring.",
           "PersistentDispatcherSingleActiveConsumer.getActiveConsumer")
    b.step("nack my-topic -s fo 1:0:-1",
           "c1 nacks m1: it comes back after the nack delay, 1 s.",
           "On Exclusive and Failover a redelivery cannot pick single messages: when the nack "
           "fires, the client asks for all its unacked messages again and the cursor rewinds, "
           "so m2 comes back too.",
           "ConsumerImpl.redeliverUnacknowledgedMessages (not Shared: redeliver all)")
    b.step("clock advance 1s", "The nack fires: the cursor rewinds to m1.",
           "Everything after the mark-delete position is dispatched again, in order.",
           "PersistentDispatcherSingleActiveConsumer.redeliverUnacknowledgedMessages: rewind")
    b.step("receive my-topic -s fo -t Failover --consumer-name c1 -n 4 -mp",
           "c1 gets m1 to m4 in order: m1 with redeliveryCount:[1], the others with 0.",
           "m1 was asked back by a nack; m2 only came back with the rewind.",
           "Message.getRedeliveryCount",
           ours="m1's count of 1. Pulsar's Exclusive and Failover dispatchers keep no "
                "redelivery count (RedeliveryTrackerDisabled): Pulsar would say 0 for m1 too, "
                "so a dead letter policy never fires there; pulsarctl counts on every "
                "subscription type.")
    b.step("subscriptions close-consumer my-topic fo c1",
           "c1 is closed holding m1 to m4; c2 becomes the active consumer and the cursor "
           "rewinds to the first unacked message.",
           "A consumer that goes away is not asking for a redelivery: what it held comes back "
           "uncounted, on every subscription type.",
           "AbstractDispatcherSingleActiveConsumer.removeConsumer")
    b.step("receive my-topic -s fo -t Failover --consumer-name c2 -n 4 -mp",
           "c2 gets m1 to m4 again, in their original order.",
           "Failover keeps order by rewinding; the close raised no count.",
           "AbstractDispatcherSingleActiveConsumer: rewind on active consumer change",
           ours="m1 still says 1: pulsarctl keeps counts in the store, across consumers; "
                "Pulsar says 0 throughout on Failover.")
    return b.lesson(
        "failover", "Failover: one active consumer, the others standing by; a rewind on change",
        Question("Which consumers got 1:0:-1, in which order, and with which redelivery count "
                 "did it come back after c1's nack?", "1:0:-1", "my-topic", "fo",
                 answer=("consumer c2", "consumer c1", "redelivery count 1")))


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
           "A message goes to the consumer whose range holds its key's slot, "
           "murmur3(key) % 65536.",
           "HashRangeAutoSplitStickyKeyConsumerSelector",
           ours="this selector is pulsarctl's default (--key-shared-policy auto-split). A "
                "Pulsar 4.x broker uses it for a default (AUTO_SPLIT) consumer only with "
                "subscriptionKeySharedUseConsistentHashing=false; by default (true) it places "
                "consumers on a hash ring instead: --key-shared-policy consistent-hashing.")
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
    b.step("clock advance 1m",
           "A minute passes: the greeting still waits on st.",
           "No consumer's range covers slot 64071, so no consumer is given it.",
           "HashRangeExclusiveStickyKeyConsumerSelector.select (null: no owner)",
           look=("orders", "st"))
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
        Question("1:2:-1 went to C1 at once on ks: when did it reach a consumer on st, and "
                 "which one?", "1:2:-1", "orders", "st",
                 answer=("10:01:00", "consumer S2")))
