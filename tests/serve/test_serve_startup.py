"""serve's start-up (issue 29, item 6): the binary port listens before the heavy modules load,
and answers a CONNECT while the admin REST API (aiohttp) is still loading; the pulsar:// line
still comes last, once REST answers too. No timing is asserted: what is checked is what was
loaded, and in what order things happen, so a slow start cannot come back unseen.

A real process (python -c WRAPPER, which runs pulsarctl's console entry point): the wrapper
records sys.modules at the moment the first listening socket listens (the binary port's), and
holds the imports of inotify_simple (the store's watch, set up aside) and aiohttp (the REST app)
until the test, having had its CONNECTED, writes a line on stdin for each."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from procs import PATIENCE_S, reap, wait_for
from pulsarctl.client import Client
from serve_raw import T, Raw, command

TOPIC = "persistent://public/default/early"

WRAPPER = r"""
import importlib.machinery, json, os, socket, sys
del sys.path[0]  # the working directory, as pulsarctl/__main__.py drops it
report = sys.argv[1]


class HeldLoader:
    # Runs the module only after the test's go (a line on stdin), in whichever thread it is
    # imported. Held here, under the module's own lock: a finder holds every import's lock.
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module):
        sys.stdin.readline()
        self.real.exec_module(module)


class Hold:
    # First on sys.meta_path: these modules, found where they are, load through HeldLoader.
    def find_spec(self, name, path=None, target=None):
        if name not in ("aiohttp", "inotify_simple"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = HeldLoader(spec.loader)
        return spec


sys.meta_path.insert(0, Hold())
_listen = socket.socket.listen


def listen(self, *args):
    _listen(self, *args)
    if not os.path.exists(report):  # the first socket that listens: the binary port's
        with open(report + ".part", "w") as f:
            json.dump({"port": self.getsockname()[1], "modules": sorted(sys.modules)}, f)
        os.rename(report + ".part", report)


socket.socket.listen = listen
sys.argv = ["pulsarctl", *sys.argv[2:]]
from pulsarctl.cli.entry import main
main()
"""

# What serve must not have loaded when its binary port listens: the CLI's typer tree (and the
# click, pydantic and rich it brings), the REST app and aiohttp (loaded after, in a thread),
# PyJWT and cryptography (only a token needs them).
HEAVY = ("typer", "click", "pydantic", "pydantic_core", "rich", "aiohttp", "yarl", "multidict",
         "jwt", "cryptography", "pulsarctl.rest", "pulsarctl.cli.app")


def heavy_in(modules) -> list[str]:
    return sorted(m for m in modules
                  if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_heavy_in_sees_them():
    """The control: the check names a heavy module and its submodules, nothing else."""
    assert heavy_in(["aiohttp.web", "typer", "pulsarctl.rest.app", "pulsarctl.restless",
                     "asyncio", "jwtx"]) == ["aiohttp.web", "pulsarctl.rest.app", "typer"]


def test_the_binary_port_answers_before_the_heavy_modules_load(tmp_path, store_path):
    report = tmp_path / "listening.json"
    err_path = tmp_path / "stderr"
    work = tmp_path / "cwd"
    work.mkdir()
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", WRAPPER, str(report), "serve", "--port",
                                 "0", "--http-port", "0"], env=env, cwd=work,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for(lambda: report.exists() or proc.poll() is not None, "serve to listen",
                 diag=err_path.read_text)
        assert report.exists(), err_path.read_text()
        seen = json.loads(report.read_text())
        assert "pulsarctl.cli.fast_run" in seen["modules"], "the test did not see serve's start"
        assert heavy_in(seen["modules"]) == [], \
            f"serve loaded these before it listened: {heavy_in(seen['modules'])}"

        # the store's watch and REST are held: the binary port answers all the same
        raw = Raw(seen["port"])
        try:
            raw.handshake()
            raw.send(command(T.SUBSCRIBE, "subscribe", topic=TOPIC, subscription="s",
                             subType=0, consumer_id=1, request_id=1, initialPosition=1))
            raw.expect(T.SUCCESS)
            raw.send(command(T.FLOW, "flow", consumer_id=1, messagePermits=10))
            # published (by another process) before serve watches the store: the consumer,
            # waiting already, gets it once the watch is up
            client = Client(store=store_path)
            try:
                client.create_producer(TOPIC).send(b"early")
            finally:
                client.close()
            assert "pulsar://" not in err_path.read_text(), "the URL line came before REST"
            proc.stdin.write(b"go\ngo\n")
            proc.stdin.flush()
            _, _, payload = raw.expect(T.MESSAGE)
            assert payload == b"early"
        finally:
            raw.close()
        text = wait_for(lambda: (t := err_path.read_text()) and "pulsar://" in t and t,
                        "the pulsar:// line", diag=err_path.read_text)
        lines = text.splitlines()
        http = [i for i, line in enumerate(lines) if line.startswith("http://")]
        ready = [i for i, line in enumerate(lines) if line.startswith("pulsar://")]
        assert http and http[0] < ready[0], text  # the http:// line first, as ever
        assert ready == [i for i, line in enumerate(lines)
                         if line == f"pulsar://127.0.0.1:{seen['port']}"], text
        proc.terminate()
        assert proc.wait(timeout=PATIENCE_S) == 0, err_path.read_text()
    finally:
        reap([proc])
