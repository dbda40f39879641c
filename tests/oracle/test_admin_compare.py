"""Issue 28, item 4: the real pulsar-admin against serve's admin REST.

admin_script/commands.txt (tenants, namespaces and their policies, permissions, topics and
partitions, subscriptions, stats, stats-internal, peek, examine, reset-cursor, skip,
clear-backlog, expire, compaction, schemas) runs against the real Apache Pulsar standalone and
against `pulsarctl serve`; the answers (exit code, stdout, stderr's first line, and every HTTP
request pulsar-admin made with the status it got) are compared after normalising times, ids,
addresses, rates and sizes (admin_script/normalise.py). A difference is a failure unless
ALLOWED below explains it.

By hand (inside `tests/oracle/pulsar.sh netns`): `python -m admin_script` from tests/oracle
(admin_script/__main__.py) runs one target and prints the table of differences.
"""
from __future__ import annotations

import os
import uuid

import pytest

from admin_script import compare, script
from admin_script.compare import Allowed
from admin_script.normalise import Context
from serve_procs import start_serve, stop_all

# Every difference left after normalising that is not a bug: pulsarctl's documented stronger
# behaviour, a fact of its storage layout, or a quirk of the real one that a client cannot
# rely on. Each names the commands (a regular expression), the paths in the answer, and why.
ALLOWED: list[Allowed] = [
    # -- errors: the same status, pulsarctl's words ------------------------------------------
    Allowed(r"^(tenants (create|get|delete)|namespaces (create|permissions|set-retention|delete)"
            r"|topics (create|create-subscription|skip|clear-backlog) )", "stderr",
            "the same HTTP status (compared on its own), serve's reason in pulsarctl's words: "
            "its errors name what they are about and what is wrong (ARCHITECTURE.md, habit 4: "
            "\"tenant 'x' does not exist\" where Pulsar says \"Tenant does not exist\")"),
    Allowed(r"^topics delete ", "stdout",
            "pulsar-admin topics delete prints the failure on stdout (and exits 0): the same 404, "
            "serve's reason in pulsarctl's words"),
    Allowed(r"^schemas upload .*avro", "stderr",
            "the same 409; Pulsar answers an incompatible schema with Jersey's error page (its "
            "message under 'message'), so pulsar-admin prints 'HTTP 409 {', where serve "
            "answers Pulsar's usual {\"reason\": ...}"),
    Allowed(r"^schemas compatibility .*avro", "*",
            "a schema of another type than the topic's: Pulsar's check throws its "
            "IncompatibleSchemaException out as a 500 ('--- An unexpected error occurred in the "
            "server ---'); serve answers 202 with isCompatibility false, as for any "
            "incompatible schema"),
    # -- what the standalone has that a store does not ----------------------------------------
    Allowed(r"^tenants list$", "stdout",
            "the standalone makes a tenant 'pulsar' for its system namespace (pulsar/system: "
            "transaction coordinator, heartbeat); serve runs neither and has no such tenant"),
    # -- storage layout --------------------------------------------------------------------------
    Allowed(r"^topics (partitioned-)?stats-internal ",
            "stdout.*cursors.*.cursorLedger*",
            "Pulsar keeps a cursor's mark-delete position in a ledger of its own (cursorLedger, "
            "cursorLedgerLastEntry); the store keeps a cursor as a record, so -1, as Pulsar "
            "shows a cursor without a ledger"),
    Allowed(r"^topics (partitioned-)?stats-internal ",
            "stdout.*cursors.*.lastLedgerSwitchTimestamp",
            "the time the cursor's ledger was last switched: there is no cursor ledger (\"\")"),
    Allowed(r"^topics (partitioned-)?stats-internal ",
            "stdout.*cursors.s2.*",
            "a cursor opened at the earliest position when the topic had no entry yet: Pulsar "
            "shows its read position as (first ledger, -1) until it reads, the same next entry "
            "serve shows as (first ledger, 0); numberOfEntriesSinceFirstNotAckedMessage, which "
            "counts (mark-delete, read position], follows (0 there, 1 here)"),
    Allowed(r"^topics (partitioned-)?stats-internal ",
            "stdout.*cursors.ps.*",
            "a cursor opened at the earliest position: Pulsar shows its read position as "
            "(first ledger, -1) until it reads (see s2 above)"),
    # -- compaction ------------------------------------------------------------------------------
    Allowed(r"^topics compaction-status .*--wait-complete", "http",
            "Pulsar compacts in the background and pulsar-admin polls until SUCCESS (two GETs, "
            "or more, unless it is done already); serve compacts within the PUT, so the first GET "
            "says SUCCESS", sometimes=True),
    Allowed(r"^topics stats-internal persistent://\{ns\}/c1", "stdout.cursors.__compaction",
            "Pulsar's compactor reads the topic through a durable cursor __compaction; "
            "pulsarctl's compaction keeps its horizon in its own record (broker/compaction.py), "
            "not in a cursor"),
    Allowed(r"^topics stats-internal persistent://\{ns\}/c1", "stdout.compactedLedger.*",
            "Pulsar writes the compacted copy to a ledger of its own; pulsarctl keeps it as "
            "records beside the topic, with no ledger id (-1, as for a topic never compacted)"),
    Allowed(r"^topics stats-internal persistent://\{ns\}/c1", "stdout.waitingCursorsCount",
            "the __compaction cursor waits for new entries in Pulsar, when the stats are read "
            "before it settles; there is no such cursor here", sometimes=True),
    Allowed(r"^topics subscriptions persistent://\{ns\}/c1", "stdout",
            "Pulsar lists its compactor's cursor __compaction (see above), and 'nope', which "
            "its peek made (see below)"),
    # -- documented pulsarctl behaviour ----------------------------------------------------------
    Allowed(r"^topics peek-messages persistent://\{ns\}/c1 --subscription nope", "*",
            "Pulsar's peek creates a subscription that does not exist (at the earliest "
            "position) and reads from it; pulsarctl's peek never creates or changes anything "
            "(CLI.md: peek-messages) and serve's REST answers 404 Subscription not found, which "
            "pulsar-admin takes for the end of the messages"),
    # -- the real Pulsar's own timing --------------------------------------------------------------
    Allowed(r"^topics stats persistent://\{ns\}/t1", "stdout.subscriptions.s2.totalMsgExpired",
            "Pulsar counts expired messages when the cursor's new mark-delete position is "
            "persisted, after the expiry request has been answered: a stats read right after "
            "it finds 0 or 10", sometimes=True),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    store = tmp_path_factory.mktemp("admin-serve") / "store"
    env = dict(os.environ, PULSARCTL_STORE=str(store), NO_COLOR="1")
    s = start_serve(env)
    yield s
    stop_all([s])


def run_on(name, web_port, service_url, broker_port, tmp_path_factory):
    tenant = f"adm-{uuid.uuid4().hex[:8]}"
    work = tmp_path_factory.mktemp(f"admin-{name}")
    target = script.Target(name, web_port, service_url)
    results = script.run(target, tenant, work, broker_port)
    return compare.Run([compare.record_of(r) for r in results],
                       Context(tenant, str(work), web_port, broker_port))


def test_the_script_is_long_enough():
    assert len(script.admin_commands()) >= 60


def _record(line, command, stdout, rc=0, http=()):
    return {"line": line, "command": command, "rc": rc, "stdout": stdout, "stderr": "",
            "http": list(http)}


def test_the_comparer_normalises_ids_and_times_and_catches_the_rest():
    """What the normaliser takes away (the run's tenant, ports, ledger ids, times, sizes,
    rates) never shows as a difference; a value that differs does, and ALLOWED-like entries
    set it apart."""
    real_ctx = Context("adm-aaaa", "/tmp/a", 8080, 6650)
    ours_ctx = Context("adm-bbbb", "/tmp/b", 8090, 6660)
    real = compare.Run([
        _record(1, "topics stats-internal persistent://{ns}/t",
                {"lastConfirmedEntry": "17:4", "ledgers": [{"ledgerId": 17, "size": 551}],
                 "lastLedgerCreatedTimestamp": "2026-11-28T02:39:11.018Z",
                 "owner": "127.0.0.1:8080", "topic": "persistent://adm-aaaa/ns1/t"},
                http=["GET /admin/v2/persistent/adm-aaaa/ns1/t/internalStats 200"]),
        _record(2, "topics stats persistent://{ns}/t",
                {"msgRateIn": 3.5, "msgBacklog": 10, "type": "None"}),
        _record(3, "topics peek-messages persistent://{ns}/t --subscription s",
                "Message ID: 17:0\nPublish time: 1795833553922\nEvent time: 0"),
    ], real_ctx)
    ours = compare.Run([
        _record(1, "topics stats-internal persistent://{ns}/t",
                {"lastConfirmedEntry": "3:4", "ledgers": [{"ledgerId": 3, "size": 491}],
                 "lastLedgerCreatedTimestamp": "2026-11-28T02:40:00.000Z",
                 "owner": "127.0.0.1:8090", "topic": "persistent://adm-bbbb/ns1/t"},
                http=["GET /admin/v2/persistent/adm-bbbb/ns1/t/internalStats 200"]),
        _record(2, "topics stats persistent://{ns}/t",
                {"msgRateIn": 0.0, "msgBacklog": 9, "type": "Exclusive"}),
        _record(3, "topics peek-messages persistent://{ns}/t --subscription s",
                "Message ID: 3:0\nPublish time: 1795833600000\nEvent time: 0"),
    ], ours_ctx)
    diffs = compare.differences(real, ours)
    assert [(d.line, d.path, d.real, d.serve) for d in diffs] == [
        (2, "stdout.msgBacklog", 10, 9), (2, "stdout.type", "None", "Exclusive")]
    left, used = compare.unexplained(diffs, [Allowed(r"^topics stats ", "stdout.type", "why")])
    assert [d.path for d in left] == ["stdout.msgBacklog"] and len(used) == 1


def test_pulsar_admin_answers_alike_from_real_pulsar_and_serve(real_pulsar, served,
                                                               tmp_path_factory):
    http_port = int(served.http_url.rsplit(":", 1)[1])
    real = run_on("real", real_pulsar.web_port, real_pulsar.service_url,
                  real_pulsar.broker_port, tmp_path_factory)
    ours = run_on("serve", http_port, served.url, served.port, tmp_path_factory)
    diffs = compare.differences(real, ours)
    left, used = compare.unexplained(diffs, ALLOWED)
    report = tmp_path_factory.getbasetemp() / "admin-compare.txt"
    report.write_text(compare.table(diffs))
    assert not left, (f"{len(left)} differences no entry of ALLOWED explains (all of them in "
                      f"{report}):\n{compare.table(left)}")
    stale = [a for a in ALLOWED if a not in used and not a.sometimes]
    assert not stale, f"entries of ALLOWED that explain nothing any more: {stale}"
