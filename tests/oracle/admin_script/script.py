"""The admin script (commands.txt) and its runner: each step against one target (the real
standalone, or `pulsarctl serve`), the real pulsar-admin's answers recorded as Results.

pulsar-admin runs through `pulsar.sh admin-batch` (AdminBatch.java): every command of the
script in one JVM, as pulsar-shell runs them, with the exit code pulsar-admin's main would
give (0 when the command succeeded, 1 otherwise)."""
from __future__ import annotations

import json
import logging
import os
import re
import selectors
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pulsar

from admin_script.proxy import RecordingProxy

HERE = Path(__file__).resolve().parent
COMMANDS = HERE / "commands.txt"
PULSAR_SH = HERE.parent / "pulsar.sh"
# One pulsar-admin command, the JVM already warm: generous for a loaded 2-core machine.
COMMAND_LIMIT_S = 180
# The JVM's start, compiling AdminBatch.java included.
START_LIMIT_S = 300


@dataclass
class Step:
    line: int        # line number in commands.txt
    kind: str        # admin | produce | file
    args: list[str]


@dataclass
class Result:
    """One admin command's answer: exit code, stdout (parsed as JSON where it is JSON),
    stderr's first line, the HTTP requests it made."""

    step: Step
    command: str          # the command as run, the run's own names put back as placeholders
    rc: int
    stdout: object        # parsed JSON, or the text
    stderr: str
    http: list[str]       # the requests it made: "METHOD PATH STATUS" (proxy.py)


def steps(path: Path = COMMANDS) -> list[Step]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        kind = text.split(None, 1)[0]
        if kind == "file":
            _, name, content = text.split(None, 2)
            out.append(Step(n, kind, [name, content]))
        elif kind in ("admin", "produce"):
            out.append(Step(n, kind, shlex.split(text)[1:]))
        else:
            raise ValueError(f"commands.txt:{n}: unknown step {kind!r}")
    return out


def admin_commands(path: Path = COMMANDS) -> list[Step]:
    return [s for s in steps(path) if s.kind == "admin"]


@dataclass
class Target:
    """Where the script runs: a web port for pulsar-admin, a service URL for the producers."""

    name: str
    web_port: int
    service_url: str
    env: dict = field(repr=False, default_factory=lambda: dict(os.environ))


class AdminBatch:
    """The real pulsar-admin in one JVM, one command at a time, its web service URL the given
    port (the recording proxy's)."""

    def __init__(self, env: dict, web_port: int, broker_port: int, out_dir: Path):
        env = dict(env, PULSAR_WEB_PORT=str(web_port), PULSAR_BROKER_PORT=str(broker_port))
        out_dir.mkdir(parents=True, exist_ok=True)
        self.out_dir = out_dir
        # The JVM's stderr goes to a file: nothing reads it until the end, and a pipe could fill.
        self.stderr = open(out_dir / "jvm.err", "w+b")
        self.proc = subprocess.Popen([str(PULSAR_SH), "admin-batch", str(out_dir)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.buf = b""
        self.n = 0

    def _line(self, limit: float) -> str:
        deadline = time.monotonic() + limit
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(timeout=left):
                return ""
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                return ""
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def run(self, args: list[str]) -> tuple[int, str, str]:
        if any("\t" in a or "\n" in a for a in args):
            raise ValueError(f"an argument with a tab or newline: {args}")
        self.n += 1
        self.proc.stdin.write(("\t".join(args) + "\n").encode())
        self.proc.stdin.flush()
        line = self._line(START_LIMIT_S if self.n == 1 else COMMAND_LIMIT_S)
        if not line.startswith(f"done {self.n} "):
            self.proc.kill()
            self.proc.wait()
            self.stderr.seek(0)
            raise AssertionError(f"pulsar-admin batch gave no answer to command {self.n} {args}: "
                                 f"{line!r}\n{self.stderr.read()[-4000:].decode(errors='replace')}")
        rc = int(line.split()[2])
        out = (self.out_dir / f"{self.n}.out").read_text(errors="replace")
        err = (self.out_dir / f"{self.n}.err").read_text(errors="replace")
        return rc, out, err

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=COMMAND_LIMIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.sel.close()
        self.stderr.close()


def first_line(stderr: str) -> str:
    for line in stderr.splitlines():
        if line.strip():
            return line.strip()
    return ""


def parsed(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text.strip()


class Vars(dict):
    """The placeholders of commands.txt; unknown ones are a mistake in the script."""

    def fill(self, text: str) -> str:
        return re.sub(r"\{([A-Za-z0-9_.]+)\}", lambda m: self[m.group(1)], text)


def produce(client, topic: str, n: int, name: str, options: list[str], names: Vars) -> None:
    key, props = None, {}
    for opt in options:
        k, _, v = opt.partition("=")
        if k == "key":
            key = v
        elif k == "prop":
            pk, _, pv = v.partition(":")
            props[pk] = pv
        else:
            raise ValueError(f"produce: unknown option {opt!r}")
    producer = client.create_producer(topic, batching_enabled=False)
    try:
        for i in range(1, n + 1):
            kwargs = {"properties": props} if props else {}
            if key is not None:
                kwargs["partition_key"] = key
            mid = producer.send(f"{name}-{i}".encode(), **kwargs)
            names[f"{name}{i}"] = f"{mid.ledger_id()}:{mid.entry_id()}"
            names[f"{name}{i}.l"] = str(mid.ledger_id())
            names[f"{name}{i}.e"] = str(mid.entry_id())
    finally:
        producer.close()


def run(target: Target, tenant: str, work: Path, broker_port: int,
        path: Path = COMMANDS) -> list[Result]:
    """Every step of the script against target, in order; the admin commands' Results."""
    work.mkdir(parents=True, exist_ok=True)
    names = Vars(tenant=tenant, ns=f"{tenant}/ns1", dir=str(work))
    results = []
    quiet = logging.getLogger("admin-script-client")
    quiet.setLevel(logging.ERROR)
    client = pulsar.Client(target.service_url, operation_timeout_seconds=60, logger=quiet)
    proxy = RecordingProxy(target.web_port).start()
    admin = AdminBatch(target.env, proxy.port, broker_port, work / "admin-out")
    try:
        for step in steps(path):
            if step.kind == "file":
                (work / step.args[0]).write_text(step.args[1])
            elif step.kind == "produce":
                topic, n, name, *options = step.args
                produce(client, names.fill(topic), int(n), name, options, names)
            else:
                args = [names.fill(a) for a in step.args]
                proxy.take()
                rc, out, err = admin.run(args)
                results.append(Result(step, " ".join(step.args), rc, parsed(out),
                                      first_line(err), proxy.take()))
    finally:
        admin.close()
        proxy.stop()
        client.close()
    return results
