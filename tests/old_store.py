"""The store release 0.1.0 wrote (tests/fixtures/store_v0_1_0, made by tests/store/test_old_store.py),
which every later release must read byte for byte."""
from __future__ import annotations

import tarfile
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "store_v0_1_0"


def unpack(root) -> Path:
    """The old store unpacked under root; its path."""
    with tarfile.open(FIXTURE / "store.tar.gz") as tar:
        tar.extractall(root, filter="data")
    return Path(root) / "store"
