"""Guided lessons (issue 17, item 5; issue 27, item 6): every lesson runs unattended (`lesson
run NAME --yes`), each step's command succeeds (or is refused exactly as the lesson says), the
key fact of the lesson is in what the learner sees, its closing question is answered by the
command it suggests, what is pulsarctl's own is marked apart from Pulsar's rules, and the
user's store (PULSARCTL_STORE) is never touched."""
from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest

from cli_helpers import assert_error, ok, pjson

from pulsarctl.lessons import LESSONS
from pulsarctl.lessons import runner
from pulsarctl.lessons.model import Builder, Question

NAMES = ["shared-vs-exclusive", "failover", "key-shared", "cumulative-ack", "ack-timeout",
         "nack-backoff-and-dlq", "retry-letter", "delayed-delivery",
         # issue 27, item 6
         "batch-index-ack", "ttl-retention-quota", "permits-and-priority"]

# What each lesson is for, as the learner sees it in the run's text (a step's output or its
# picture): the fact that must not silently stop being true.
KEY_FACTS = {
    "shared-vs-exclusive": ["error: Exclusive consumer is already connected",
                            "1:2–1:3   ● pending   ×2      c2 since 10:00:00"],
    "failover": ["c1        yes", "c2        no", "redeliveryCount:[1]",
                 "closed consumer c1; 4 pending message(s) given back"],
    "key-shared": ["C3                0         0        [0, 16384]",
                   "1:0–1:1   ● pending   ×2      C3", "1:2       ● pending           C1",
                   "error: Range conflict with consumer S1",
                   "1:2       ● pending           S2"],
    "cumulative-ack": ["acked 3 message(s)", "markDeletePosition           1:3",
                       "error: Cannot use cumulative acks on a non-exclusive/non-failover"],
    "ack-timeout": ["fired: 1 ack timeout", "redeliveryCount:[1]"],
    "nack-backoff-and-dlq": ["nacked, due 10:00:00.768", "nacked, due 10:00:02.816",
                             "nacked, due 10:00:06.912", "redeliveryCount:[2]",
                             "redelivered (nacked at 10:00:01, nack backoff 2s)",
                             "ORIGIN_MESSAGE_ID=1:0:-1", "REAL_SUBSCRIPTION=w"],
    "retry-letter": ["RECONSUMETIMES=1, DELAY_TIME=1000", "RECONSUMETIMES=2, DELAY_TIME=5000",
                     "0 message(s) to the retry topic, 1 to the dead letter topic",
                     "RECONSUMETIMES=3"],
    "delayed-delivery": ["fired: 1 delayed", "content:later"],
    "batch-index-ack": ["batch of 3, acked 0,2",
                        "acknowledgmentAtBatchIndexLevelEnabled = True",
                        "── mark-delete 1:1 ──"],
    "ttl-retention-quota": ["fired: 3 TTL", "fired: 1 TTL",
                            "error: backlog quota destination_storage exceeded",
                            "── mark-delete 4:-1 ──"],
    "permits-and-priority": ["closed consumer b; 5 pending message(s) given back",
                             "a         yes     0", "b         no      1"],
}

# What single steps of the new lessons must (and must not) print: (the step's number, in its
# output, not in its output). The lesson's point is often what does not come.
STEP_OUTPUTS = {
    "batch-index-ack": [
        # without batch-index acks the whole batch comes back, acked messages included
        (6, ["messageId:1:0:-1:0", "messageId:1:0:-1:1", "messageId:1:0:-1:2"], []),
        # with them, only the unacked one
        (13, ["messageId:1:1:-1:1", "redeliveryCount:[1]"],
         ["messageId:1:1:-1:0", "messageId:1:1:-1:2"]),
    ],
    "ttl-retention-quota": [
        (10, ["messageId:1:0:-1", "messageId:2:1:-1"], []),   # retention keeps acked ledgers
        (12, ["messageId:2:0:-1"], ["messageId:1:0:-1"]),     # until their time is over
    ],
    "permits-and-priority": [
        (4, ["messageId:1:0:-1"], ["messageId:1:1:-1"]),      # one permit, one message
        (9, ["messageId:1:1:-1", "messageId:1:2:-1"],         # blocked at 2 unacked
         ["messageId:1:3:-1"]),
        (14, ["messageId:1:0:-1"], []),                       # priority 0 takes over
    ],
}


@pytest.fixture
def lessons_dir(tmp_path):
    return str(tmp_path / "lessons")


def _untouched(store_path):
    """The user's store: nothing was made there."""
    assert not os.path.exists(store_path), os.listdir(store_path)


@pytest.mark.parametrize("name", NAMES)
def test_every_lesson_runs_unattended_and_shows_its_key_fact(cli, store_path, lessons_dir, name):
    r = ok(cli("lesson", "run", name, "--yes", "--dir", lessons_dir))
    text = r.stdout
    lesson = next(x for x in LESSONS if x.name == name)
    assert text.count("== step ") == len(lesson.steps)
    for step in lesson.steps:
        assert f"$ {runner.shown(step.argv)}\n" in text
        assert f"  Pulsar: {step.what}\n" in text and f"[{step.rule}]\n" in text
        # what is pulsarctl's own is on a line of its own, never in Pulsar's
        assert (f"  pulsarctl, not Pulsar: {step.ours}\n" in text) == bool(step.ours)
    assert text.count("  pulsarctl, not Pulsar: ") == sum(1 for x in lesson.steps if x.ours)
    for fact in KEY_FACTS[name]:
        assert fact in text, fact
    # The closing question and how to check it, on the lesson's own store.
    (store,) = re.findall(r"^It runs on its own store with a simulated clock: (.+)$", text, re.M)
    assert store.startswith(lessons_dir) and os.path.isdir(store)
    check = "pulsarctl --store " + store + " " + " ".join(lesson.question.explain_argv())
    assert f"Check it: {check}\n" in text
    _untouched(store_path)


def test_every_step_exits_as_the_lesson_says_in_the_json_document(cli, store_path, lessons_dir):
    for lesson in LESSONS:
        doc = pjson(cli("lesson", "run", lesson.name, "-o", "json", "--dir", lessons_dir,
                        "--clean"))
        assert [s["exitCode"] for s in doc["steps"]] == [s.exit_code for s in lesson.steps]
        assert [s["command"] for s in doc["steps"]] == [runner.shown(s.argv)
                                                       for s in lesson.steps]
        for s, step in zip(doc["steps"], lesson.steps):
            assert s["pulsarctl"] == (step.ours or None)
            assert (s["picture"] is None) == (step.look is None)
            if step.look is not None:
                assert s["pictureCommand"] == runner.shown(runner.picture_argv(*step.look))
        assert doc["question"]["check"].startswith("pulsarctl explain ")
        assert not os.path.exists(os.path.dirname(doc["store"]))  # --clean
    _untouched(store_path)


def test_at_least_the_eight_lessons_of_the_issue():
    assert [x.name for x in LESSONS][:8] == NAMES[:8]
    for lesson in LESSONS:
        assert lesson.steps[0].argv[:2] == ("clock", "simulate")  # a simulated clock first
        assert lesson.question.explain_argv()[0] == "explain"


def test_the_users_store_is_untouched_even_with_store_given(cli, tmp_path, lessons_dir):
    mine = str(tmp_path / "mine")
    ok(cli("--store", mine, "produce", "t", "-m", "keep"))
    before = pjson(cli("--store", mine, "topics", "stats", "t", "-o", "json"))
    ok(cli("--store", mine, "lesson", "run", "failover", "--yes", "--dir", lessons_dir))
    assert pjson(cli("--store", mine, "topics", "stats", "t", "-o", "json")) == before
    assert pjson(cli("--store", mine, "topics", "list", "public/default", "-o", "json")) == \
        ["persistent://public/default/t"]


LIST_TEXT = """\
name                  steps  what it teaches
shared-vs-exclusive   7      Exclusive admits one consumer, Shared spreads messages over many
failover              10     Failover: one active consumer, the others standing by; a rewind on change
key-shared            14     Key_Shared: keys hashed to slots, auto-split ranges and sticky ranges
cumulative-ack        8      Cumulative acks move the mark-delete position (Exclusive, Failover)
ack-timeout           8      Ack timeout: what is not acked in time is delivered again
nack-backoff-and-dlq  12     Negative acks: redelivery with a growing backoff, then the dead letter topic
retry-letter          11     Retry letter topic: reconsume later with TDMQ's delay levels, then DLQ
delayed-delivery      9      Delayed delivery: held back on Shared, ignored by Failover
batch-index-ack       14     Batches: redelivered whole, or only their unacked messages with batch-index acks
ttl-retention-quota   18     TTL expires unacked messages, retention keeps acked ones, backlog quotas cap a backlog
permits-and-priority  15     Flow permits, the receiver queue, the unacked limit and priority levels
"""


def test_lesson_list_text_and_json(cli, store_path):
    assert ok(cli("lesson", "list")).stdout == LIST_TEXT
    doc = pjson(cli("lesson", "list", "-o", "json"))
    assert [set(d) for d in doc] == [{"name", "title", "steps"}] * len(LESSONS)
    assert doc[0] == {"name": "shared-vs-exclusive", "steps": 7,
                      "title": "Exclusive admits one consumer, Shared spreads messages over many"}
    _untouched(store_path)


# The first steps of shared-vs-exclusive as the learner sees them (the store path varies).
SHARED_VS_EXCLUSIVE_HEAD = """\
Lesson shared-vs-exclusive: Exclusive admits one consumer, Shared spreads messages over many
It runs on its own store with a simulated clock: STORE
(your store is not touched; to type the commands yourself: export PULSARCTL_STORE=STORE)

== step 1 of 7 ==
$ pulsarctl clock simulate --at 2026-01-01T10:00:00Z
simulated 2026-01-01T10:00:00.000Z
  Pulsar: The lesson's store now runs on a simulated clock; it moves only with `clock advance`.
  Why:    Redelivery delays, ack timeouts and delayed messages then fire exactly when a step says, with no waiting. [pulsarctl: one clock per store, injected into the broker]
  pulsarctl, not Pulsar: Pulsar has no such clock: its timers run on the broker's and the clients' wall clocks.

== step 2 of 7 ==
$ pulsarctl produce orders -m o1 -m o2 -m o3 -m o4
1:0:-1
1:1:-1
1:2:-1
1:3:-1
  Pulsar: Four messages are appended to the topic's ledger: ids 1:0:-1 to 1:3:-1.
  Why:    An id is ledger:entry:partition; -1 says the topic is not partitioned. [MessageIdImpl.toString]

== step 3 of 7 ==
$ pulsarctl receive orders -s audit -t Exclusive -p Earliest --consumer-name c1 -n 2
----- got message -----
messageId:1:0:-1
key:[null], properties:[], content:o1
----- got message -----
messageId:1:1:-1
key:[null], properties:[], content:o2
-- state: $ pulsarctl topics cursor orders -s audit
persistent://public/default/orders  subscription audit (Exclusive)
backlog 4  ·  at 10:00:00
  ── mark-delete 1:-1 ──
  1:0–1:1   ● pending   ×2      c1 since 10:00:00 †
  ── read position 1:2 ──
  1:2–1:3   ○ backlog   ×2
  † pulsarctl: a consumer held by a lease; Pulsar's lives by its connection
  Pulsar: c1 is the one consumer of Exclusive subscription audit; it holds o1 and o2, pending until it acks them.
  Why:    receive asks for two messages and does not ack them; Earliest starts the new subscription before o1 (Latest, the default, would start after o4). [PersistentSubscription; subscriptionInitialPosition=Earliest]

== step 4 of 7 ==
$ pulsarctl receive orders -s audit -t Exclusive --consumer-name c2
error: Exclusive consumer is already connected to subscription 'audit' (consumer 'c1', its lease ends in 300s); use another subscription, a Shared subscription (-t Shared), or wait
-- state: $ pulsarctl topics cursor orders -s audit
persistent://public/default/orders  subscription audit (Exclusive)
backlog 4  ·  at 10:00:00
  ── mark-delete 1:-1 ──
  1:0–1:1   ● pending   ×2      c1 since 10:00:00 †
  ── read position 1:2 ──
  1:2–1:3   ○ backlog   ×2
  † pulsarctl: a consumer held by a lease; Pulsar's lives by its connection
  Pulsar: The broker refuses c2 with ConsumerBusy: "Exclusive consumer is already connected" (exit 4). c2 is not queued: it must subscribe again later.
  Why:    An Exclusive subscription admits one consumer. Before refusing, the broker checks that the first one's connection is alive; only a dead one's place is given away. [AbstractDispatcherSingleActiveConsumer.addConsumer: ConsumerBusyException]
  pulsarctl, not Pulsar: a receive's consumer stays connected after the command ends, until its lease runs out (--lease, 5m) or it is closed (subscriptions close-consumer): the lease stands in for a live connection.
"""


def test_a_lesson_as_the_learner_sees_it(cli, lessons_dir):
    text = ok(cli("lesson", "run", "shared-vs-exclusive", "--yes", "--dir", lessons_dir)).stdout
    (store,) = re.findall(r"own store with a simulated clock: (.+)$", text, re.M)
    text = text.replace(store, "STORE")
    head = text[:text.index("\n== step 5 of 7 ==")]
    assert head == SHARED_VS_EXCLUSIVE_HEAD
    assert text.endswith(
        "== question ==\n"
        "Which consumer of work got 1:2:-1, and what became of it there?\n"
        "Check it: pulsarctl --store STORE explain 1:2:-1 -t orders -s work\n"
        f"The lesson's store stays in {os.path.dirname(store)}; remove it when done.\n")


def test_interactive_enter_goes_on_and_q_stops(cli, lessons_dir):
    r = ok(cli("lesson", "run", "failover", "--dir", lessons_dir, input="\n\nq\n"))
    assert r.stdout.count("== step ") == 3 and "(stopped)" in r.stdout
    assert r.stderr.count("-- Enter: next step, q: stop --") == 3
    # End of input stops too.
    r = ok(cli("lesson", "run", "failover", "--dir", lessons_dir, input=""))
    assert r.stdout.count("== step ") == 1 and "(stopped)" in r.stdout
    steps = len(next(x for x in LESSONS if x.name == "failover").steps)
    r = ok(cli("lesson", "run", "failover", "--dir", lessons_dir, input="\n" * steps))
    assert r.stdout.count("== step ") == steps and "== question ==" in r.stdout


def test_an_unknown_lesson_is_exit_3_with_a_hint(cli):
    line = assert_error(cli("lesson", "run", "no-such"), 3, stdout_empty=True)
    assert "pulsarctl lesson list" in line


def test_a_step_that_fails_stops_the_lesson_with_one_line(cli, lessons_dir, monkeypatch):
    """A lesson whose step does not exit as written (here: an ack of an id that is not there)
    is a bug in the lesson: shown, then one error line and exit 1; the steps after it never
    run."""
    import pulsarctl.lessons as lessons

    b = Builder("t", "s")
    b.simulate()
    b.step("ack t -s s 9:9:-1", "acked", "never", "none", look=None)
    b.step("produce t -m never", "never", "never", "none", look=None)
    broken = b.lesson("broken", "a broken lesson", Question("?", "1:0:-1", "t"))
    monkeypatch.setattr(lessons, "LESSONS", lessons.LESSONS + (broken,))
    r = cli("lesson", "run", "broken", "--yes", "--dir", lessons_dir)
    line = assert_error(r, 1)
    assert "lesson broken, step 2: `pulsarctl ack t -s s 9:9:-1` exited 3, not 0" in line
    assert "bug in the lesson" in line
    assert "$ pulsarctl ack t -s s 9:9:-1" in r.stdout and "produce t" not in r.stdout


def test_the_picture_is_the_cursor_picture():
    assert runner.picture_argv("t", "s") == ["topics", "cursor", "t", "-s", "s"]


@pytest.mark.parametrize("name", NAMES)
def test_the_closing_question_is_answered_by_explain(cli, lessons_dir, name):
    """The check a lesson ends with, run as the lesson prints it, on the lesson's store, tells
    the message's life (published, then what the lesson did to it on the subscription it asks
    about) and shows every key fact of the question's answer (an id, a count, a consumer, a
    time, a reason): the question is answered, not only the command run."""
    lesson = next(x for x in LESSONS if x.name == name)
    q = lesson.question
    assert q.answer, f"{name}: the question names no fact its answer holds"
    for fact in q.answer:
        assert fact.strip() and fact != q.message_id, fact
    doc = pjson(cli("lesson", "run", name, "-o", "json", "--dir", lessons_dir))
    argv = shlex.split(doc["question"]["check"])
    assert argv[:2] == ["pulsarctl", "explain"] and argv[1:] == q.explain_argv()
    events = pjson(cli("--store", doc["store"], *argv[1:], "-o", "json"))["events"]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "published" and len(kinds) >= 2, kinds
    if q.subscription is not None:
        assert all(e["subscription"] in (None, q.subscription) for e in events), events
    shown = ok(cli("--store", doc["store"], *argv[1:])).stdout
    for fact in q.answer:
        assert fact in shown, f"{name}: {fact!r} is not in the answer:\n{shown}"


def test_json_shape_of_lesson_list_is_a_list(cli):
    assert isinstance(json.loads(ok(cli("lesson", "list", "-o", "json")).stdout), list)


def test_a_lesson_directory_that_cannot_be_made_is_one_line(cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    line = assert_error(cli("lesson", "run", "failover", "--yes", "--dir",
                            str(blocker / "sub")), 2)
    assert "cannot make the lesson's store" in line and "--dir" in line


# -- issue 27, item 6: lessons teach Pulsar's rules, and say where pulsarctl is stronger --------
def _lesson(name):
    return next(x for x in LESSONS if x.name == name)


def _run_doc(cli, lessons_dir, name):
    return pjson(cli("lesson", "run", name, "-o", "json", "--dir", lessons_dir))


def test_the_eleven_lessons_in_order():
    assert [x.name for x in LESSONS] == NAMES


@pytest.mark.parametrize("name", sorted(STEP_OUTPUTS))
def test_the_new_lessons_show_what_comes_and_what_does_not(cli, lessons_dir, name):
    doc = _run_doc(cli, lessons_dir, name)
    for number, present, absent in STEP_OUTPUTS[name]:
        out = doc["steps"][number - 1]["output"]
        for x in present:
            assert x in out, (number, x, out)
        for x in absent:
            assert x not in out, (number, x, out)


def test_a_second_exclusive_consumer_is_refused_not_queued():
    """Pulsar refuses a second Exclusive consumer (ConsumerBusy): it does not wait for the
    first to go (AbstractDispatcherSingleActiveConsumer.addConsumer)."""
    (step,) = [s for s in _lesson("shared-vs-exclusive").steps if s.exit_code == 4]
    said = f"{step.what} {step.why}"
    assert "ConsumerBusy" in said and "refuses" in said
    assert not re.search(r"\bwaits?\b", said), said
    assert "lease" in step.ours  # the lease is pulsarctl's, and said to be


def test_failover_teaches_the_hash_ring_of_pulsar_4_and_marks_the_count_as_pulsarctls(
        cli, lessons_dir):
    lesson = _lesson("failover")
    told = " ".join(f"{s.what} {s.why} {s.rule}" for s in lesson.steps)
    assert "hash ring" in told and "apache/pulsar#19502" in told
    assert "first consumer to subscribe" in told  # what the older docs say, and that it is old
    doc = _run_doc(cli, lessons_dir, "failover")
    runs = list(zip(doc["steps"], lesson.steps))
    # c2 subscribed first; c1, who joined second, is the active consumer: the ring decides
    first = next(i for i, (_s, st) in enumerate(runs) if "c2" in st.argv and "receive" in st.argv)
    joined = next(i for i, (_s, st) in enumerate(runs) if "c1" in st.argv and "receive" in st.argv)
    assert first < joined
    listing = next(s["output"] for s, st in runs if st.argv[:2] == ("subscriptions", "consumers"))
    assert re.search(r"^c1\s+yes", listing, re.M) and re.search(r"^c2\s+no", listing, re.M)
    # a redelivery count shown on Failover is pulsarctl's: Pulsar keeps none there
    counted = [st for s, st in runs if re.search(r"redeliveryCount:\[[1-9]", s["output"])]
    assert counted
    for st in counted:
        assert "RedeliveryTrackerDisabled" in st.ours or "Pulsar says 0" in st.ours, st.ours
    assert "no redelivery count" not in " ".join(f"{st.what} {st.why}" for st in lesson.steps)


@pytest.mark.parametrize("name", NAMES)
def test_a_count_on_exclusive_or_failover_is_marked_as_pulsarctls(cli, lessons_dir, name):
    """Pulsar's Exclusive and Failover dispatchers keep no redelivery count: wherever a lesson
    shows one there, the step says it is pulsarctl's."""
    lesson = _lesson(name)
    single = [st for st in lesson.steps if st.argv[0] in ("receive", "consume")
              and {"Exclusive", "Failover"} & set(st.argv)]
    if not single:
        return
    doc = _run_doc(cli, lessons_dir, name)
    for s, st in zip(doc["steps"], lesson.steps):
        if st in single and re.search(r"redeliveryCount:\[[1-9]", s["output"]):
            assert st.ours, f"{name}: {runner.shown(st.argv)} shows a count Pulsar would not"


def test_origin_message_idy_time_is_explained_once_where_a_learner_first_sees_it(
        cli, lessons_dir):
    """Pulsar's deprecated, misspelt ORIGIN_MESSAGE_IDY_TIME (RetryMessageUtil, still written
    by the Java client) is explained by exactly one step: the first, in lesson order, whose
    output shows it."""
    name_ = "ORIGIN_MESSAGE_IDY_TIME"
    explains = [(x.name, i) for x in LESSONS for i, s in enumerate(x.steps)
                if name_ in f"{s.what} {s.why} {s.ours}"]
    assert len(explains) == 1, explains
    for lesson in LESSONS:
        doc = pjson(cli("lesson", "run", lesson.name, "-o", "json", "--dir", lessons_dir,
                        "--clean"))
        for i, s in enumerate(doc["steps"]):
            if name_ in s["output"] + (s["picture"] or ""):
                assert (lesson.name, i) == explains[0]
                step = lesson.steps[i]
                assert "ORIGIN_MESSAGE_ID" in step.why and "deprecated" in step.why
                return
    pytest.fail(f"no lesson shows {name_}")


def test_the_lessons_name_only_the_projects_own_files():
    """No path of the machine the lessons were written on (a development checkout, a home
    directory): the project names its own files only."""
    package = Path(__file__).resolve().parents[2] / "pulsarctl" / "lessons"
    for path in sorted(package.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        found = re.findall(r"(?<![\w.:])/(?:work|home|Users|root|tmp)/[\w./-]*", text)
        assert not found, f"{path.name}: {found}"


def test_a_step_of_pulsarctls_own_is_marked_in_text_and_json(cli, lessons_dir):
    lesson = _lesson("failover")
    marked = [s for s in lesson.steps if s.ours]
    assert marked
    doc = _run_doc(cli, lessons_dir, "failover")
    assert [s["pulsarctl"] for s in doc["steps"]] == [s.ours or None for s in lesson.steps]


def test_the_readmes_lesson_list_is_lesson_list(cli):
    """README's "Learning Pulsar with pulsarctl" shows `lesson list` as it prints: every lesson,
    its steps and what it teaches."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    shown = readme.split("$ pulsarctl lesson list\n", 1)[1].split("$ pulsarctl lesson run", 1)[0]
    assert shown == ok(cli("lesson", "list")).stdout
