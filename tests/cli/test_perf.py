"""The benchmark commands run and report what they measured (small sizes: speed is quoted
from full-size runs, not asserted here)."""
from __future__ import annotations

import os

from cli_helpers import ok, pjson


def test_perf_produce_and_consume_report_rates_and_stored_bytes(cli):
    r = pjson(cli("perf", "produce", "-n", "2000", "-s", "200", "--compression", "zstd",
                  "-o", "json"))
    assert r["messages"] == 2000 and r["msgPerSec"] > 0
    assert 0 < r["storedBytesPerMessage"] < 200  # compressed
    r = pjson(cli("perf", "consume", "-n", "2000", "-t", "Shared", "-o", "json"))
    assert r["messages"] == 2000


def test_perf_timers_fires_every_timer_on_a_scratch_store(cli, store_path):
    r = pjson(cli("perf", "timers", "-n", "3000", "-o", "json"))
    assert r["fired"] == 3000 and r["timersPerSec"] > 0
    assert not os.path.exists(store_path)  # the user's store is never touched


def test_perf_delayed_dispatches_the_due_ones_past_the_delayed(cli):
    r = pjson(cli("perf", "delayed", "-n", "5000", "--due", "100", "-o", "json"))
    assert r["due"] == 100 and r["onceDue"] == 1000
    ok(cli("perf", "delayed", "-n", "100", "--due", "10"))
