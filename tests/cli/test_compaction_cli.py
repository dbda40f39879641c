"""`topics compact` and `topics compaction-status` (broker/compaction.py)."""
from cli_helpers import assert_error, ok, pjson


def test_compact_then_status(cli):
    ok(cli("produce", "tk", "-k", "a", "-m", "a1", "-k", "a", "-m", "a2"))
    assert pjson(cli("topics", "compaction-status", "tk", "-o", "json")) == {
        "status": "NOT_RUN", "lastError": ""}
    r = ok(cli("topics", "compact", "tk"))
    assert "compacted tk: 1 message(s) kept up to 1:1" in r.stderr
    st = pjson(cli("topics", "compaction-status", "tk", "-o", "json"))
    assert st["status"] == "SUCCESS" and st["compactionHorizon"] == "1:1"
    assert st["compactedMessages"] == 1


def test_compact_refuses_a_missing_or_partitioned_topic(cli):
    assert "does not exist" in assert_error(cli("topics", "compact", "nope"), 3)
    ok(cli("topics", "create-partitioned-topic", "pt", "-p", "2"))
    assert "compact each partition" in assert_error(cli("topics", "compact", "pt"), 2)
