"""The test suite itself: one folder per layer, each a marker (registered in pyproject.toml and
by tests/conftest.py alike), unique file names, none named after an issue; and the in-process
CLI leaves no store open behind it."""
from __future__ import annotations

import ast
import os
import re
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from cli_helpers import ok

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def _layers() -> tuple:
    """LAYERS of tests/conftest.py, read from its source (the module named conftest in a run
    may be another folder's)."""
    for node in ast.parse((TESTS / "conftest.py").read_text()).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["LAYERS"]:
            return ast.literal_eval(node.value)
    raise AssertionError("tests/conftest.py has no LAYERS")


def test_the_markers_of_pyproject_are_the_layers_of_conftest():
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    names = [m.split(":", 1)[0].strip() for m in ini["markers"]]
    assert names == list(_layers())


def test_every_test_file_is_in_a_layer_folder_under_a_name_of_its_own():
    files = sorted(TESTS.rglob("test_*.py"))
    assert files
    outside = [str(f.relative_to(TESTS)) for f in files
               if f.parent.name not in _layers() or f.parent.parent != TESTS]
    assert not outside, f"test files outside tests/<layer>/: {outside}"
    twice = [name for name, n in Counter(f.name for f in files).items() if n > 1]
    assert not twice, f"one basename in two folders (pytest imports them by name): {twice}"
    after_issues = [f.name for f in files if re.search(r"issue\d", f.name)]
    assert not after_issues, f"name a test file after what it tests: {after_issues}"


def _open_files_under(path: str) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(path + os.sep):
            found.append(target)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="open files from /proc")
def test_the_cli_fixture_leaves_no_store_open(cli, store_path):
    """An in-process command closes the store it opened, as its process would by ending: a
    run of a thousand CLI tests must not hold a thousand LMDB environments (and run out of
    file descriptors)."""
    ok(cli("produce", "t", "-m", "x"))
    ok(cli("consume", "t", "-s", "s", "-p", "Earliest", "-n", "1"))
    assert _open_files_under(os.path.abspath(store_path)) == []
