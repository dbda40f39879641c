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
    stale = [a for a in ALLOWED if a not in used]
    assert not stale, f"entries of ALLOWED that explain nothing any more: {stale}"
