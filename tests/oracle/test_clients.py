"""Clients of other languages (issue 28 item 3): the scenario programs of tests/clients/go
(pulsar-client-go) and tests/clients/java (the Pulsar Java client), run against the real
standalone and against `pulsarctl serve`, side by side in the oracle's namespace. Every
scenario must pass on both: what real Pulsar does decides what a scenario asserts, and serve
must do the same.

Each program runs once per target (module-scoped, cached); each scenario is a test of its own,
so the report says which scenario passes on which target. The auth_refused scenario speaks to
a second service of each kind with token authentication on (the real token standalone of
conftest.py, and a serve with the same secret key). Building needs go and mvn (the Go module
proxy and Maven Central); the programs' build output stays in ~/.cache/pulsarctl-clients.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from serve_procs import start_serve, stop_all

RUNNER = Path(__file__).resolve().parents[1] / "clients" / "run.sh"
BUILD_LIMIT_S = 1200   # a cold build fetches modules and jars; bounds a hung build only
RUN_LIMIT_S = 1500     # 21 scenarios, each bounded at 120 s by the program itself

SCENARIOS = [
    "exclusive", "failover", "shared", "key_shared", "key_shared_sticky",
    "ack_individual", "ack_cumulative", "ack_batch_index", "nack_backoff",
    "dead_letter", "retry_letter", "chunking", "delayed_delivery", "reader_seek",
    "regex_new_topics", "schema_avro", "schema_json", "schema_protobuf", "schema_keyvalue",
    "access_modes", "auth_refused",
]
LANGUAGES = ["go", "java"]
TARGETS = ["real", "serve"]


@pytest.fixture(scope="module")
def built():
    """Both programs built once; a language whose toolchain is missing is skipped."""
    made = {}
    for lang, tool in (("go", "go"), ("java", "mvn")):
        if shutil.which(tool) is None:
            made[lang] = f"no {tool} on PATH"
            continue
        proc = subprocess.run([str(RUNNER), f"build-{lang}"], capture_output=True, text=True,
                              timeout=BUILD_LIMIT_S)
        assert proc.returncode == 0, f"building the {lang} program:\n{proc.stdout}\n{proc.stderr}"
        made[lang] = None
    return made


@pytest.fixture(scope="module")
def serves(tmp_path_factory, token_pulsar):
    """A plain serve, and one with token authentication checking the real token standalone's
    secret key (so one bad token is refused by both the same way)."""
    d = tmp_path_factory.mktemp("clients-serve")
    key = d / "secret.key"
    key.write_bytes(token_pulsar.secret_key)
    conf = d / "broker.conf"
    conf.write_text("authenticationEnabled=true\n"
                    "authenticationProviders=org.apache.pulsar.broker.authentication."
                    "AuthenticationProviderToken\n"
                    f"tokenSecretKey=file://{key}\nsuperUserRoles=admin\n")
    env = dict(os.environ, NO_COLOR="1")
    plain = start_serve(dict(env, PULSARCTL_STORE=str(d / "plain")))
    token = start_serve(dict(env, PULSARCTL_STORE=str(d / "token")), "--config", str(conf))
    yield plain, token
    stop_all([plain, token])


@pytest.fixture(scope="module")
def results(built, real_pulsar, token_pulsar, serves):
    """{(language, target): {scenario: (ok, detail)}}, each program run lazily, once."""
    plain, token = serves
    urls = {
        "real": (real_pulsar.service_url, real_pulsar.web_url, token_pulsar.real.service_url),
        "serve": (plain.url, plain.http_url, token.url),
    }
    cache: dict = {}

    def get(lang: str, target: str) -> dict:
        if built[lang]:
            pytest.skip(built[lang])
        if (lang, target) not in cache:
            service, admin, auth = urls[target]
            prefix = f"{lang}-{target}-{uuid.uuid4().hex[:8]}"
            proc = subprocess.run(
                [str(RUNNER), lang, "--service-url", service, "--admin-url", admin,
                 "--prefix", prefix, "--auth-service-url", auth],
                capture_output=True, text=True, timeout=RUN_LIMIT_S)
            lines = [json.loads(line) for line in proc.stdout.splitlines()
                     if line.startswith("{")]
            got = {r["scenario"]: (r["ok"], r["detail"]) for r in lines}
            assert list(got) == SCENARIOS, (
                f"the {lang} program ran {list(got)} (exit {proc.returncode}):\n"
                f"{proc.stderr[-3000:]}")
            assert (proc.returncode == 0) == all(ok for ok, _ in got.values())
            cache[(lang, target)] = got
        return cache[(lang, target)]

    return get


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(results, lang, target, scenario):
    ok, detail = results(lang, target)[scenario]
    assert ok, f"{lang} {scenario} against {target}: {detail}"
