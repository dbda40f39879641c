"""README.md's last section, "How it is built", stays true: every module or folder it names
exists, it is the README's last `## ` section, and every module of pulsarctl/broker/ has a place
in its table of Pulsar concepts (so a new or renamed module must be placed there)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TITLE = "## How it is built"
# A path the section names: pulsarctl/..., store/... or tests/..., ending in .py or a /.
PATH = re.compile(r"(?<![\w/.-])((?:pulsarctl|store|tests)/(?:[\w.-]+/)*(?:[\w-]+\.py)?)")


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    assert TITLE + "\n" in text, f"README.md has no {TITLE!r} section"
    return text.split(TITLE + "\n", 1)[1]


def _paths(text: str) -> set[str]:
    return {m for m in PATH.findall(text) if m.endswith((".py", "/"))}


def test_it_is_the_last_section():
    sections = re.findall(r"^## .*$", README.read_text(encoding="utf-8"), re.M)
    assert sections[-1] == TITLE, f"the README's last section is {sections[-1]!r}"


def test_every_path_it_names_exists():
    named = _paths(_section())
    assert len(named) > 30, "the section names too few modules: did the parsing break?"
    missing = sorted(p for p in named if not (ROOT / p).exists()
                     or (p.endswith("/") and not (ROOT / p).is_dir()))
    assert not missing, f"README.md's {TITLE!r} names what does not exist: {missing}"


def test_every_broker_module_is_in_the_table():
    table = [line for line in _section().splitlines() if line.startswith("|")]
    assert len(table) > 10, "no table of Pulsar concepts in the section"
    in_table = _paths("\n".join(table))
    broker = ROOT / "pulsarctl" / "broker"
    modules = sorted(p.relative_to(ROOT).as_posix() for p in broker.rglob("*.py")
                     if p != broker / "__init__.py")
    assert modules, "no module found in pulsarctl/broker/"
    unplaced = [m for m in modules if m not in in_table]
    assert not unplaced, (f"modules of pulsarctl/broker/ missing from README.md's {TITLE!r} "
                          f"table (give each its Pulsar concept): {unplaced}")


def test_the_path_pattern():
    found = _paths("`store/ledger.py`, pulsarctl/broker/dispatch/key_shared.py + `pulsarctl/cli/`"
                   " and tests/cli/test_layers.py; not xstore/a.py")
    assert found == {"store/ledger.py", "pulsarctl/broker/dispatch/key_shared.py",
                     "pulsarctl/cli/", "tests/cli/test_layers.py"}
