"""README.md's examples run as they are: every ```sh block in order in one bash process on a
fresh store, the Python API's ```python block against a temporary store, and the install/test
commands of the first two ```bash blocks match what CI runs. (In the processes lane: the ```sh
blocks are some eighty `pulsarctl` processes.) The serve quick start runs in
tests/serve/test_serve_quickstart.py."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


def blocks(lang: str) -> list[str]:
    return [body for kind, body in FENCE.findall(README.read_text(encoding="utf-8")) if kind == lang]


def _env(store: Path) -> dict:
    env = dict(os.environ, PULSARCTL_STORE=str(store), NO_COLOR="1")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("XDG_CONFIG_HOME", None)
    return env


@pytest.fixture(scope="module")
def bash():
    b = shutil.which("bash")
    if b is None:
        pytest.skip("bash is not installed")
    return b


def test_the_interpreter_has_a_pulsarctl_script():
    assert (BIN / "pulsarctl").exists(), f"no pulsarctl script next to {sys.executable}"


# Only against a hang: the README's examples take about 30 s on a quiet machine and four times
# that on one loaded by other work (a CPU hog beside the suite's two workers took 125 s).
README_DEADLINE_S = 900


def test_sh_blocks_run_in_order(tmp_path, bash):
    sh = blocks("sh")
    assert sh, "README.md has no ```sh examples"
    script = "set -euo pipefail\n" + "\n".join(sh)
    (tmp_path / "readme.sh").write_text(script)
    r = subprocess.run([bash, str(tmp_path / "readme.sh")], capture_output=True, text=True,
                       env=_env(tmp_path / "store"), cwd=tmp_path, timeout=README_DEADLINE_S)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    assert "error:" not in r.stderr, r.stderr
    # a few things the examples show, so a block that silently does nothing is noticed
    assert "content:order 1" in r.stdout
    assert '"payload":"1"' in r.stdout  # read numbers -m earliest -n 3 -o ndjson
    assert "persistent://public/default/orders" in r.stdout
    # Learning Pulsar with pulsarctl: the cursor picture, the history, the lesson
    assert "nacked, due 09:00:09.856" in r.stdout
    assert ("redelivered on subscription crew, redelivery count 1 (nacked at 09:00:00, nack "
            "backoff 10s)") in r.stdout
    assert "negatively acknowledged by consumer ann of subscription crew" in r.stderr  # --explain
    assert "Lesson nack-backoff-and-dlq" in r.stdout and "== question ==" in r.stdout


def test_python_block_runs(tmp_path):
    # The serve section's block is a real pulsar-client's (tests/serve/test_serve_quickstart.py).
    py = [b for b in blocks("python") if "pulsar.Client(" not in b]
    assert len(py) == 1, "expected one ```python example of the Python API in README.md"
    code = py[0]
    stores = re.findall(r'store="([^"]+)"', code)
    assert stores, "the example names no store"
    store = tmp_path / "api-store"
    for s in set(stores):
        code = code.replace(f'"{s}"', repr(str(store)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=_env(tmp_path / "unused"), cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout
    assert re.fullmatch(r"\d+:\d+:-?\d+ b'order 3' \{'source': 'api'\}", lines[0]), lines[0]
    assert lines[1] == "b'order 3'"
    assert (store / "data.mdb").exists(), "the example did not use the store it was given"
    assert not (tmp_path / "unused").exists()


def test_bash_blocks_install_and_ci():
    bash_blocks = blocks("bash")
    assert len(bash_blocks) >= 2, "README.md should start with two ```bash blocks"
    first, second = (b.strip() for b in bash_blocks[:2])
    assert "pip install" in first and "pulsarctl produce" in first and "pulsarctl consume" in first
    assert "pytest" in second
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert second in ci.splitlines(), f"CI does not run the README's test command:\n{second}"


def test_first_bash_block_main_job_runs(tmp_path, bash):
    """The main job of the first block (after the venv is made), with this interpreter's
    pulsarctl instead of .venv/bin/pulsarctl."""
    first = blocks("bash")[0].strip()
    steps = [s.strip() for s in first.split("&&")]
    job = [s for s in steps if ".venv/bin/pulsarctl" in s]
    assert job, first
    cmd = " && ".join(s.replace(".venv/bin/pulsarctl", "pulsarctl") for s in job)
    r = subprocess.run([bash, "-c", f"set -euo pipefail; {cmd}"], capture_output=True, text=True,
                       env=_env(tmp_path / "store"), cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "content:Hello, Pulsar" in r.stdout and "content:second" in r.stdout


def test_ci_runs_the_oracle_lane_the_readme_shows():
    """The README's by-hand oracle command is what .ci/run runs after the test command: each of
    its steps is a line of .ci/run (the tests' line with CI's fixed seed in front)."""
    lane = [b.strip() for b in blocks("bash") if "-m oracle" in b]
    assert len(lane) == 1, "README.md should show the oracle lane's command in one ```bash block"
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    for step in (s.strip() for s in lane[0].split("&&")):
        assert any(line == step or line.endswith(step) for line in ci), (
            f".ci/run does not run the README's oracle step: {step}")
    assert any("PULSARCTL_ORACLE_REQUIRED=1" in line for line in ci)
