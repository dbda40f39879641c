"""README's "Where pulsarctl differs from Pulsar 4.x on purpose": every row names a test that
pins it, and the test exists; the two rows the differential tests let through are exactly
tests/oracle/compare.py's STRONGER."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _table() -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("### Where pulsarctl differs from Pulsar 4.x on purpose")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        if line.startswith("| ") and not line.startswith("| ---") and \
                not line.startswith("| pulsarctl |"):
            rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows


def test_every_row_is_pinned_by_a_test_that_exists():
    rows = _table()
    assert len(rows) >= 5
    for row in rows:
        pins = re.findall(r"`([^`]+)`", row[-1])
        assert pins, row
        path = None
        for pin in pins:
            if not pin.startswith("::"):
                path, name = pin.split("::")
            else:
                name = pin[2:]
            assert path is not None, row
            source = (ROOT / path).read_text(encoding="utf-8")
            assert re.search(rf"^def {re.escape(name)}\(", source, re.M), (path, name)


def test_the_differential_tests_let_through_what_the_table_says():
    source = (ROOT / "tests" / "oracle" / "compare.py").read_text(encoding="utf-8")
    pinned = {p for row in _table() for p in re.findall(r"`([^`]+)`", row[-1])}
    named = set(re.findall(r"tests/[\w/]+\.py::\w+", source))
    assert named and named <= pinned, named - pinned
