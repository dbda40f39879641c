"""Retention trims a large topic and its disk space comes back: the pages the store holds fall
to near the baseline once retention lets the acknowledged ledgers go, and producing as much
again reuses the freed pages instead of growing the file."""
from __future__ import annotations

from pulsarctl.broker import Broker
from pulsarctl.messages import OutgoingMessage

MB = 1024 * 1024
PER_LEDGER = 2_000
N, SIZE = 40_000, 1024  # 40 MB of payload in 20 ledgers


def _fill(b: Broker, topic: str) -> None:
    for i in range(0, N, PER_LEDGER):
        b.publish(topic, [OutgoingMessage(bytes([i % 251]) * SIZE) for _ in range(PER_LEDGER)])


def test_retention_trims_a_large_topic_and_disk_use_returns_to_baseline(store_path, clock):
    b = Broker(store_path, clock)
    b.policies.update_setting("managedLedgerMaxEntriesPerLedger", str(PER_LEDGER))
    b.close()
    b = Broker(store_path, clock)
    try:
        topic = "persistent://public/default/big"
        b.topics.create(topic)
        b.subscription(topic, "s").create("earliest")
        b.policies.set("namespace", "public/default", "retention_policies",
                     {"retentionTimeInMinutes": 10, "retentionSizeInMB": -1})
        base = b.env.stat()["usedBytes"]
        _fill(b, topic)
        peak = b.env.stat()
        assert peak["usedBytes"] - base > N * SIZE

        b.subscription(topic, "s").clear_backlog()  # everything acknowledged; retention keeps it 10 minutes
        kept = b.env.stat()["usedBytes"]
        assert kept > base + N * SIZE * 0.9
        assert b.topics.internal_stats(topic)["numberOfEntries"] == N

        clock.advance(9 * 60_000)
        assert b.chores.enforce_policies()["trimmedLedgers"] == 0
        clock.advance(2 * 60_000)
        trimmed = b.chores.enforce_policies()["trimmedLedgers"]
        assert trimmed == N // PER_LEDGER - 1  # every closed ledger; the open one stays
        after = b.env.stat()
        # Only the open ledger (2 MB) and bookkeeping are left.
        assert after["usedBytes"] - base < PER_LEDGER * SIZE + 1 * MB, (base, after)

        _fill(b, topic)  # as much again: the freed pages are used first
        again = b.env.stat()
        assert again["fileBytes"] <= peak["fileBytes"] * 1.1 + 4 * MB, (peak, again)
        print(f"\nretention: baseline {base / MB:.1f} MB in use; after 40 MB produced "
              f"{peak['usedBytes'] / MB:.1f} MB (file {peak['fileBytes'] / MB:.1f} MB); after the "
              f"trim {after['usedBytes'] / MB:.1f} MB; after 40 MB more the file is "
              f"{again['fileBytes'] / MB:.1f} MB")
    finally:
        b.close()
