"""The oracle lane: the same questions asked of a real Apache Pulsar 4.x standalone, started by
tests/oracle/pulsar.sh from jars resolved from Maven Central.

The lane runs only when asked for with `-m oracle`, and only inside a network namespace whose
one interface is loopback (so nothing the JVM does can leave 127.0.0.1):

    tests/oracle/pulsar.sh fetch        # once: resolve the jars (~500 MB, cached)
    tests/oracle/pulsar.sh netns .venv/bin/python -m pytest -m oracle tests/oracle -p no:cacheprovider

A plain `pytest tests` marks these tests skipped at collection, before any fixture (and any
JVM) starts. Asked for but unable to run (outside a namespace, no jars, no java), the tests
are skipped with the reason pulsar.sh gives.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ORACLE_DIR = Path(__file__).resolve().parent
SCRIPT = ORACLE_DIR / "pulsar.sh"
# pulsar.sh waits up to PULSAR_START_TIMEOUT (300 s) itself; these only bound a hung script.
START_LIMIT_S = 600
TOOL_LIMIT_S = 300
NOT_ASKED = ("the oracle lane runs only with -m oracle, inside `tests/oracle/pulsar.sh netns` "
             "(see tests/oracle/README.md)")
# CI sets this: there a lane that could not run (no namespace, no jars, no go or mvn) must fail,
# not pass as a row of skips.
REQUIRED = os.environ.get("PULSARCTL_ORACLE_REQUIRED") == "1"


def pytest_configure(config):
    config.addinivalue_line("markers", "oracle: tests of tests/oracle/ (a real Pulsar standalone)")


def pytest_collection_modifyitems(config, items):
    asked = "oracle" in (config.getoption("markexpr") or "")
    for item in items:
        if ORACLE_DIR in item.path.parents:
            item.add_marker(pytest.mark.oracle)
            if not asked:
                item.add_marker(pytest.mark.skip(reason=NOT_ASKED))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (REQUIRED and report.skipped and ORACLE_DIR in item.path.parents
            and "oracle" in (item.config.getoption("markexpr") or "")):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped, but PULSARCTL_ORACLE_REQUIRED=1 asks the lane to run: {reason}"


@dataclass
class RealPulsar:
    """One running standalone and the real tools pointed at it."""

    data_dir: Path
    env: dict = field(repr=False)
    broker_port: int = 6650
    web_port: int = 8080

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.broker_port}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def script(self, *args: str, check: bool = True,
               limit: float = TOOL_LIMIT_S) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(SCRIPT), *args], env=self.env, capture_output=True,
                              text=True, timeout=limit)
        if check and proc.returncode != 0:
            raise AssertionError(f"pulsar.sh {' '.join(args)} exited {proc.returncode}:\n"
                                 f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        return proc

    def admin(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.script("admin", *args, check=check)

    def client(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.script("client", *args, check=check)

    def perf(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.script("perf", *args, check=check)


def oracle_env(**extra: str) -> dict:
    return {**os.environ, **extra}


def preflight(env: dict) -> None:
    """Skip, with pulsar.sh's own reason, when the standalone cannot start here."""
    proc = subprocess.run([str(SCRIPT), "preflight"], env=env, capture_output=True, text=True,
                          timeout=60)
    if proc.returncode != 0:
        pytest.skip(proc.stderr.strip() or "tests/oracle/pulsar.sh preflight failed")


def start(data_dir: Path, env: dict, *conf: str, broker_port: int = 6650,
          web_port: int = 8080) -> RealPulsar:
    real = RealPulsar(data_dir, env, broker_port, web_port)
    proc = real.script("start", str(data_dir), *conf, check=False, limit=START_LIMIT_S)
    if proc.returncode != 0:
        # A start that fails must not leave a JVM behind.
        real.script("stop", str(data_dir), check=False)
        pytest.fail(f"the real standalone did not start:\n{proc.stderr[-6000:]}")
    return real


@pytest.fixture(scope="session")
def real_pulsar(tmp_path_factory):
    """The real standalone with the lane's standalone.conf as it is, once per session."""
    env = oracle_env()
    preflight(env)
    data_dir = tmp_path_factory.mktemp("real-pulsar")
    real = start(data_dir, env)
    yield real
    real.script("stop", str(data_dir), check=False)


@dataclass
class TokenPulsar:
    """A second standalone, beside the first on other ports, with token authentication on:
    HS256 tokens checked against a secret key made by pulsarctl (Pulsar reads the key file's
    raw bytes, as `pulsar tokens create-secret-key --output` writes it)."""

    real: RealPulsar
    secret_key: bytes = field(repr=False)
    admin_token: str = field(repr=False)


@pytest.fixture(scope="session")
def token_pulsar(tmp_path_factory):
    from pulsarctl.auth import tokens

    env = oracle_env(PULSAR_BROKER_PORT="6651", PULSAR_WEB_PORT="8081",
                     PULSAR_BOOKIE_PORT="3182")
    preflight(env)
    data_dir = tmp_path_factory.mktemp("real-pulsar-token")
    key = tokens.create_secret_key()
    key_file = data_dir / "secret.key"
    key_file.write_bytes(key)
    admin = tokens.create(key, "admin")
    # The tools and the readiness check authenticate as the superuser.
    env["PULSAR_ORACLE_TOKEN"] = admin
    real = start(
        data_dir, env,
        "authenticationEnabled=true",
        "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        f"tokenSecretKey=file://{key_file}",
        "superUserRoles=admin",
        # The broker's own client (namespace creation at start, topic policies) must pass too.
        "brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken",
        f"brokerClientAuthenticationParameters=token:{admin}",
        broker_port=6651, web_port=8081)
    yield TokenPulsar(real, key, admin)
    real.script("stop", str(data_dir), check=False)
