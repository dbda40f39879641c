"""The lesson on how much a consumer gets: flow permits, the receiver queue, the unacked limit
that blocks a consumer, and priority levels.

Each step says what Pulsar 4.x does, and why, citing the class or setting it follows (read in
apache/pulsar: CommandFlow and Consumer.flowPermits, ConsumerImpl's receiver queue,
maxUnackedMessagesPerConsumer, AbstractDispatcherMultipleConsumers.getNextConsumer,
AbstractDispatcherSingleActiveConsumer.pickAndScheduleActiveConsumer); where pulsarctl goes
beyond Pulsar, or falls short of it, the step says so apart (ours)."""
from __future__ import annotations

from pulsarctl.lessons.model import Builder, Lesson, Question


def permits_and_priority() -> Lesson:
    b = Builder("tasks", "work")
    lead = ("tasks", "lead")
    some = "receive tasks -s work -t Shared --consumer-name {} -n 0 --idle-timeout 100ms"
    b.simulate()
    b.step("produce tasks -m t1 -m t2 -m t3 -m t4 -m t5 -m t6",
           "Six messages: 1:0:-1 to 1:5:-1.", "They will be shared out.", "MessageIdImpl",
           look=None)
    b.step("topics create-subscription tasks -s work -m earliest",
           "Subscription work starts before t1.",
           "-m earliest puts its mark-delete position before the first message.",
           "PersistentTopic.createSubscription (MessageId.earliest)")
    b.step("receive tasks -s work -t Shared --consumer-name a -n 1",
           "a asks for one message and gets t1, though six wait.",
           "A consumer is sent only what it has permits for: it grants the broker N permits "
           "(a FLOW command) and the broker dispatches at most N. receive -n 1 grants one, as "
           "pulsar-client consume does (its --queue-size defaults to 0: one permit a receive).",
           "CommandFlow.messagePermits; Consumer.flowPermits")
    b.step(some.format("b"),
           "b takes the five that are left: -n 0 asks for a whole receiver queue, 1000 "
           "permits, at a time.",
           "A client consumer's receiverQueueSize (default 1000) is its first FLOW: the broker "
           "pushes that many into its queue before the application asks, and the client asks "
           "for more when half is consumed. One consumer can so hold a whole backlog while "
           "others idle; a small queue shares slow work out fairly.",
           "ConsumerConfigurationData.receiverQueueSize; ConsumerImpl.increaseAvailablePermits")
    b.step("subscriptions consumers tasks work",
           "a holds 1 message, b holds 5: everything is pending for someone.",
           "A message pending for one consumer goes to no other until it is acked, nacked, or "
           "its consumer goes away.",
           "Consumer.pendingAcks")
    b.step("subscriptions close-consumer tasks work b",
           "b is closed: its five messages go back to dispatch, uncounted.",
           "A consumer that goes away gives back what it held; that is not a redelivery "
           "request, so no redelivery count rises.",
           "PersistentDispatcherMultipleConsumers.removeConsumer: addMessageToReplay")
    b.step("topics set-max-unacked-messages-per-consumer tasks --max 2",
           "No consumer of a Shared or Key_Shared subscription of tasks may hold more than 2 "
           "unacked messages (Pulsar's default is 50,000).",
           "A consumer that reaches the limit is blocked, whatever its permits, until acks "
           "bring it down to half the limit.",
           "maxUnackedMessagesPerConsumer; Consumer.blockedConsumerOnUnackedMsgs")
    b.step(some.format("b"),
           "b comes back and gets t2 and t3 only: at 2 unacked messages it is blocked.",
           "Its permits would allow 1000; the unacked limit stops dispatch first.",
           "Consumer.blockedConsumerOnUnackedMsgs")
    b.step(some.format("c"),
           "c gets t4 and t5, and is blocked too.",
           "The limit is per consumer: each may hold 2.",
           "maxUnackedMessagesPerConsumer")
    b.step("ack tasks -s work 1:1:-1",
           "b acks t2: it holds 1, half the limit, so it is unblocked.",
           "A blocked consumer is unblocked when its unacked messages fall to half the limit "
           "or below.",
           "Consumer.updateBlockedConsumerOnUnackedMsgs (unacked <= max / 2)")
    b.step(some.format("b"), "b gets t6, the last one.", "It may hold 2 again: t3 and t6.",
           "maxUnackedMessagesPerConsumer")
    b.step("receive tasks -s lead -t Failover -p Earliest --consumer-name b --priority 1 -n 1",
           "On a Failover subscription lead, b (priority level 1) is alone, so it is active: "
           "it gets t1.",
           "Each subscription has its own cursor: t1 is new to lead.",
           "PersistentDispatcherSingleActiveConsumer", look=lead)
    b.step("receive tasks -s lead -t Failover --consumer-name a --priority 0 -n 1",
           "a joins with priority level 0, the highest: it becomes the active consumer, the "
           "cursor rewinds, and a gets t1.",
           "Failover picks the active consumer among the consumers of the highest priority "
           "level only (0 is the highest); the hash ring decides within that level.",
           "AbstractDispatcherSingleActiveConsumer.pickAndScheduleActiveConsumer", look=lead)
    b.step("subscriptions consumers tasks lead",
           "a is active (priority 0), b stands by (priority 1).",
           "Priority levels order Shared dispatch the same way: the broker gives messages to "
           "the consumers of the highest level that have permits, and to a lower level only "
           "when none of them has any.",
           "AbstractDispatcherMultipleConsumers.getNextConsumer (ConsumerPrioritySelector)",
           look=lead,
           ours="on Shared subscriptions consumers pull: each receive is served when it asks, "
                "whatever its level, as Pulsar serves it while no consumer of a higher level "
                "has permits (zero-queue consumers between receives). Two consumers running "
                "side by side share the backlog here, where Pulsar would feed the higher "
                "level first.")
    return b.lesson(
        "permits-and-priority",
        "Flow permits, the receiver queue, the unacked limit and priority levels",
        Question("Who got 1:3:-1 on work first, why did it come back, and who got it then?",
                 "1:3:-1", "tasks", "work",
                 answer=("consumer b", "b closed", "consumer c")))
