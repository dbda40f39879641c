"""The one vocabulary of what happens to a message: each kind of event has one name.

The name is stored in the message history (history_event.Event.kind), shown by `explain`
(JSON "event") and `--explain`, by the cursor picture (a redelivery's "reason"), kept as a
timer's kind (broker/records.py's Timer) and counted by what a move of the clock fired
(broker/fired.py). Writers and readers use these constants, never the strings, so a kind
cannot be spelt two ways. This module imports nothing: the CLI's renderers read it without
loading the broker.
"""
from __future__ import annotations

PUBLISHED = "published"
DELAYED = "delayed"              # held back by delayed delivery (deliverAt / deliverAfter)
DELIVERED = "delivered"
ACKED = "acked"
NACKED = "nacked"
ACK_TIMEOUT = "ackTimeout"       # also the ack-timeout timer's kind and what fired counts
CONSUMER_GONE = "consumerGone"
REDELIVERED = "redelivered"
RETRIED = "retried"              # moved to the retry letter topic
DEAD_LETTERED = "deadLettered"
EXPIRED = "expired"              # by the message TTL
SKIPPED = "skipped"
CLEARED = "cleared"              # clear-backlog
# Why nothing happened: a message a dispatch passed over (held: its cause in the extra), a
# consumer the subscription turned away (refused).
HELD = "held"
REFUSED = "refused"
EVENTS = (PUBLISHED, DELAYED, DELIVERED, ACKED, NACKED, ACK_TIMEOUT, CONSUMER_GONE, REDELIVERED,
          RETRIED, DEAD_LETTERED, EXPIRED, SKIPPED, CLEARED, HELD, REFUSED)

# A nack's delay timer (a Timer's kind, and what fired counts): the nack that set it is NACKED.
NACK = "nack"

