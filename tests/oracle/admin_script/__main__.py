"""By hand, inside `tests/oracle/pulsar.sh netns` with both servers up:

    cd tests/oracle && python -m admin_script run --web-port 8080 --broker-port 6650 \\
        --out /tmp/real.json
    cd tests/oracle && python -m admin_script run --web-port 8090 --broker-port 6660 \\
        --out /tmp/serve.json
    cd tests/oracle && python -m admin_script compare /tmp/real.json /tmp/serve.json

run writes the Results as JSON (raw, before normalising); compare prints the table of
differences after normalising, the test's allow-list applied."""
from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

from admin_script import compare, script


def dump(results, tenant, work: Path, web_port: int, broker_port: int, path: Path) -> None:
    path.write_text(json.dumps({"tenant": tenant, "work": str(work), "web_port": web_port,
                                "broker_port": broker_port,
                                "results": [compare.record_of(r) for r in results]}, indent=1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="admin_script")
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--web-port", type=int, required=True)
    r.add_argument("--broker-port", type=int, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--work", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("real", type=Path)
    c.add_argument("serve", type=Path)
    c.add_argument("--all", action="store_true", help="also the differences the allow-list "
                   "explains")
    a = ap.parse_args(argv)
    if a.what == "run":
        tenant = f"adm-{uuid.uuid4().hex[:8]}"
        work = a.work or Path(f"/tmp/admin-script-{tenant}")
        target = script.Target("by-hand", a.web_port, f"pulsar://127.0.0.1:{a.broker_port}")
        dump(script.run(target, tenant, work, a.broker_port), tenant, work, a.web_port,
             a.broker_port, a.out)
        return 0
    real, serve = (compare.load(p) for p in (a.real, a.serve))
    diffs = compare.differences(real, serve)
    if not a.all:
        # the test's allow-list; it imports tests/serve_procs.py, as pytest would find it
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from test_admin_compare import ALLOWED
        diffs, used = compare.unexplained(diffs, ALLOWED)
        for entry in ALLOWED:
            if entry not in used and not entry.sometimes:
                sys.stdout.write(f"explains nothing: {entry.command} {entry.path}\n")
    sys.stdout.write(compare.table(diffs))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
