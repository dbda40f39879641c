"""Fixtures of the store tests: the store layer on its own (no pulsarctl), real LMDB in
tmp_path."""
from __future__ import annotations

import pytest

from store import Env


@pytest.fixture
def env(tmp_path):
    """A fresh store environment, closed after the test."""
    e = Env(str(tmp_path / "store"))
    yield e
    e.close()
