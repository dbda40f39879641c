"""The benchmark commands run and report what they measured (small sizes: speed is quoted
from full-size runs, not asserted here)."""
from __future__ import annotations

import os

from cli_helpers import ok, pjson

from pulsarctl import perf_compare


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


def test_perf_compare_sets_each_path_beside_its_limit(cli, store_path):
    """Every row has both rates and their ratio (the peer rows without --service-url have no
    limit); the commands ran as real processes on a scratch store, never the user's."""
    r = pjson(cli("perf", "compare", "-n", "300", "--api-messages", "200", "--sends", "20",
                  "-o", "json"))
    rows = {row["workload"]: row for row in r["rows"]}
    start = [name for name, _ in perf_compare.EVERYDAY] + ["startComplete"]
    assert list(rows) == ["produceStdin", "consumeAck", "apiSend", "apiSendAsync",
                          "apiConsumeAck", *start]
    # start-up: each everyday command's CPU beside a bare `import lmdb`, and their ratio
    for name in start:
        row = rows[name]
        assert row["pulsarctl"] > 0 and row["limit"] > 0 and row["rounds"] == 3, row
        assert abs(row["ratio"] - row["pulsarctl"] / row["limit"]) < 0.05 * row["ratio"] + 0.01
        assert row["unit"] == ("ms wall" if name == "startComplete" else "ms CPU")
    assert rows["startTopicsStat"]["goal"] == 4.0 and rows["startComplete"]["goalMs"] == 100
    assert "`pulsarctl topics stats t`" in rows["startTopicsStat"]["what"]
    for name in ("produceStdin", "consumeAck", "apiSend"):
        row = rows[name]
        assert row["pulsarctl"] > 0 and row["limit"] > 0
        assert row["ratio"] == round(row["pulsarctl"] / row["limit"], 3) or \
            abs(row["ratio"] - row["pulsarctl"] / row["limit"]) < 0.01
    assert rows["produceStdin"]["goal"] == 0.5 and rows["consumeAck"]["goal"] == 0.3
    assert rows["apiSend"]["goalRate"] == 2000
    assert rows["apiSendAsync"]["limit"] is None and rows["apiSendAsync"]["pulsarctl"] > 0
    assert not os.path.exists(store_path)
    text = ok(cli("perf", "compare", "-n", "100", "--api-messages", "50", "--sends", "5")).stdout
    assert "produceStdin" in text and "ratio" in text
    assert "startTopicsStat" in text and "ms CPU" in text


def test_the_raw_limits_store_and_read_back_what_they_were_given(tmp_path):
    from store import limits
    from store.env import Env

    env = Env(str(tmp_path / "raw"))
    try:
        assert limits.appends(env, (b"m%d\n" % i for i in range(2500)), per_txn=1000) == 2500
        out: list[bytes] = []
        assert limits.read_and_ack(env, 2500, out.append) == sum(len(b"m%d" % i)
                                                                 for i in range(2500))
        assert out[0] == b"m0\n" and out[-1] == b"m2499\n" and len(out) == 2500
        limits.sync_commits(env, 3, 10)
        with env.read() as txn:
            assert sum(1 for _ in env.cursor(txn, "acked")) == 2500
            assert sum(1 for _ in env.cursor(txn, "entries")) == 2503
    finally:
        env.close()


def test_perf_compare_refuses_bad_sizes(cli):
    r = cli("perf", "compare", "-n", "0")
    assert r.exit_code == 2 and "-n" in r.stderr
