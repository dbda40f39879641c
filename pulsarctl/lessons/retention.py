"""The lesson on how long messages stay: message TTL, retention of acknowledged messages, and
backlog quotas.

Each step says what Pulsar 4.x does, and why, citing the class or setting it follows (read in
apache/pulsar: PersistentMessageExpiryMonitor, ManagedLedgerImpl's ledger trimming,
BacklogQuotaManager, ServerCnx's producer check); where pulsarctl goes beyond Pulsar, the step
says so apart (ours)."""
from __future__ import annotations

from pulsarctl.lessons.model import Builder, Lesson, Question


def ttl_retention_quota() -> Lesson:
    b = Builder("events", "app")
    quota = ("clicks", "slow")
    b.simulate()
    b.step("brokers update-dynamic-config --config managedLedgerMaxEntriesPerLedger --value 2",
           "Ledgers now roll over every 2 entries (Pulsar's default is 50,000), so this "
           "lesson's topic gets several.",
           "A topic is a chain of ledgers, and retention deletes whole ledgers, never single "
           "messages; the ledger being written is never deleted.",
           "managedLedgerMaxEntriesPerLedger; ManagedLedgerImpl.internalTrimLedgers",
           look=None)
    b.step("topics create-subscription events -s app",
           "Subscription app exists before any message, so all that is published is in its "
           "backlog.", "A new subscription starts at the end of the topic (Latest).",
           "subscriptionInitialPosition=Latest")
    b.step("topics set-message-ttl events -t 1m",
           "Messages of events expire one minute after they were published, unless acked "
           "before.",
           "TTL acknowledges, for each subscription, what it did not ack in time: it bounds "
           "the backlog and keeps nothing.",
           "PersistentMessageExpiryMonitor; topic policy messageTTLInSeconds")
    b.step("topics set-retention events -t 10m -s -1",
           "Messages every subscription has acked are kept 10 minutes, whatever their size.",
           "Without retention (0/0, the default) a ledger is deleted as soon as every "
           "subscription is past it.",
           "RetentionPolicies (retentionTimeInMinutes, retentionSizeInMB)")
    b.step("produce events -m e1 -m e2 -m e3",
           "e1 and e2 fill ledger 1 (1:0:-1, 1:1:-1); e3 starts ledger 2 (2:0:-1).",
           "Ledger 1 is closed at 10:00:00, when it is full.", "ManagedLedgerImpl: rollover")
    b.step("clock advance 30s", "Thirty seconds pass.", "Nothing is a minute old yet.",
           "PersistentMessageExpiryMonitor")
    b.step("produce events -m e4", "e4 (2:1:-1) is published at 10:00:30.",
           "TTL counts from each message's own publish time.", "MessageMetadata.publish_time")
    b.step("clock advance 31s",
           "At 10:01:01, e1 to e3 are over a minute old: they expire on app, whose mark-delete "
           "moves to 2:0; e4, 31 s old, stays.",
           "A message has expired when now > publish time + TTL; expiry mark-deletes the "
           "subscription up to its newest expired message.",
           "PersistentMessageExpiryMonitor.expireMessages",
           ours="TTL is applied on every daemon tick, `clock advance` and fetch; Pulsar checks "
                "every messageExpiryCheckIntervalInMinutes (5), so a message may outlive its "
                "TTL by up to 5 minutes there.")
    b.step("read events -m earliest -n 4",
           "A reader still reads e1 to e4: nobody needs e1 to e3 any more, but retention "
           "keeps their ledgers.",
           "A reader has no durable cursor: it reads what the ledgers hold, acked or not.",
           "ReaderImpl (non-durable cursor)")
    b.step("clock advance 10m",
           "At 10:11:01 e4 has expired too, and ledger 1, closed at 10:00:00, is past its 10 "
           "minutes of retention: it is deleted, e1 and e2 with it.",
           "Retention time counts from when a ledger was closed; ledger 2 is the one being "
           "written, so it stays.",
           "ManagedLedgerImpl.hasLedgerRetentionExpired")
    b.step("read events -m earliest -n 2",
           "The reader now starts at e3 (2:0:-1): e1 and e2 are gone.",
           "Earliest is the first entry the topic still holds.",
           "ManagedLedgerImpl.getFirstPosition")
    b.step("topics create-subscription clicks -s slow",
           "A second topic, clicks, with a subscription slow that will never read.",
           "Its backlog will only grow.", "subscriptionInitialPosition=Latest", look=quota)
    b.step("topics set-backlog-quota clicks -p producer_exception -l 100",
           "The backlog of any subscription of clicks may hold about 100 bytes "
           "(destination_storage, the estimated size); beyond it, a new producer is refused.",
           "Pulsar checks the quota when a producer connects (and every "
           "backlogQuotaCheckIntervalInSeconds, 60 s, for those connected): each produce here "
           "is a new producer.",
           "BacklogQuota; ServerCnx.handleProducer", look=quota)
    b.step("produce clicks -m aaaaaaaaaa -m bbbbbbbbbb -m cccccccccc -m dddddddddd",
           "Four messages, 3:0:-1 to 4:1:-1 (ledger ids run on across the store's topics): the "
           "producer connected under the limit, and its sends pass it.",
           "The quota is checked when the producer connects, not for each message.",
           "ServerCnx.handleProducer: isBacklogQuotaExceeded", look=quota)
    b.step("produce clicks -m late",
           "Refused (exit 1): slow's backlog is over 100 bytes, and the policy is "
           "producer_exception.",
           "producer_exception fails the producer at once (ProducerBlockedQuotaExceeded"
           "Exception). producer_request_hold refuses with a retriable error instead: the "
           "producer keeps trying until its send timeout (30 s), and goes on if the backlog "
           "shrinks meanwhile.",
           "BacklogQuota.RetentionPolicy; ServerError.ProducerBlockedQuotaExceededException",
           look=quota, exit_code=1)
    b.step("topics set-backlog-quota clicks -p consumer_backlog_eviction -l 100",
           "Now the quota evicts instead: producers are never refused.",
           "consumer_backlog_eviction drops the oldest messages of the slowest subscription.",
           "BacklogQuota.RetentionPolicy.consumer_backlog_eviction", look=quota)
    b.step("produce clicks -m late",
           "late is published (5:0:-1), and slow's two oldest messages, 3:0 and 3:1, are "
           "skipped: its backlog was brought under 90 bytes first.",
           "Eviction skips the slowest cursor's oldest entries until the backlog is under 90% "
           "of a size limit (a message_age limit expires them instead).",
           "BacklogQuotaManager.dropBacklogForSizeLimit", look=quota,
           ours="eviction runs when a producer publishes; Pulsar evicts on its periodic check "
                "(backlogQuotaCheckIntervalInSeconds, 60 s), so a backlog may overshoot the "
                "limit until then.")
    return b.lesson(
        "ttl-retention-quota",
        "TTL expires unacked messages, retention keeps acked ones, backlog quotas cap a backlog",
        Question("When and why did 2:0:-1 (e3) leave app's backlog?", "2:0:-1", "events", "app",
                 answer=("10:01:01", "expired on subscription app", "TTL 1m")))
