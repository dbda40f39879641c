"""The lessons, in the order `lesson list` shows them: each is data (steps: a real pulsarctl
command line, what Pulsar did, why, the rule, and what is pulsarctl's own), written in the
module of its subject.

Every lesson runs on a new store, so its message ids are known in advance (a topic's first
ledger is numbered in the order topics are created: the first topic's messages are 1:0:-1,
1:1:-1, ...) and steps name them as a learner would, copied from the output above them."""
from __future__ import annotations

from pulsarctl.lessons.acknowledgement import ack_timeout, batch_index_ack, cumulative_ack
from pulsarctl.lessons.flow_control import permits_and_priority
from pulsarctl.lessons.model import Lesson
from pulsarctl.lessons.redelivery import delayed_delivery, nack_backoff_and_dlq, retry_letter
from pulsarctl.lessons.retention import ttl_retention_quota
from pulsarctl.lessons.subscription_types import failover, key_shared, shared_vs_exclusive

LESSONS: tuple[Lesson, ...] = (
    shared_vs_exclusive(), failover(), key_shared(), cumulative_ack(), ack_timeout(),
    nack_backoff_and_dlq(), retry_letter(), delayed_delivery(),
    batch_index_ack(), ttl_retention_quota(), permits_and_priority(),
)
