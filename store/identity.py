"""The identity record kept beside data.mdb (the file `identity`): written when a store is made,
or at the first healthy open of an older one, it says the store existed, so that an empty or
missing data.mdb next to it is taken for damage, never for a new store.

It is apart from the check that reads it (store/check.py) because it is written too, after a
healthy open (store/env.py), with its own rules for a crash or a full disk: a new file renamed
over the old. Nothing here knows topics or time.
"""
from __future__ import annotations

import errno
import os

from store.errors import StoreDiskFull

IDENTITY = "identity"

# -- the identity record beside data.mdb ---------------------------------------------------------
# A few lines of `name value` (a text file a person can read; no parser to import at start-up):
#   pulsarctl store
#   id 3f1c...        random, made when the store is
#   pageSize 4096
#   lastPage 19       the highest page LMDB was seen using (a size the store has had)
#   txn 5             the transaction seen then
_IDENTITY_HEAD = "pulsarctl store"


def read_identity(path: str) -> dict | None:
    """The identity record, None when there is none. A record that is there but unreadable still
    says the store existed: it counts as one (with no fields)."""
    try:
        with open(os.path.join(path, IDENTITY), "rb") as f:
            raw = f.read(4096)
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    doc: dict = {}
    try:
        lines = raw.decode().splitlines()
    except UnicodeDecodeError:
        return doc
    if not lines or lines[0].strip() != _IDENTITY_HEAD:
        return doc
    for line in lines[1:]:
        name, _, value = line.strip().partition(" ")
        value = value.strip()
        doc[name] = int(value) if value.isdigit() else value
    return doc


def write_identity(path: str, doc: dict) -> None:
    """Replace the identity record (0600): a new file renamed over the old, so a crash or a full
    disk leaves the old one, never half of one."""
    final = os.path.join(path, IDENTITY)
    tmp = os.path.join(path, f".{IDENTITY}.{os.getpid()}")
    data = "".join([_IDENTITY_HEAD + "\n"] + [f"{k} {v}\n" for k, v in doc.items()]).encode()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, "short write")
        finally:
            os.close(fd)
        os.replace(tmp, final)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreDiskFull(final) from None
        raise


def note_healthy(path: str, ident: dict | None, psize: int, last_pg: int, txnid: int) -> None:
    """After a store opened healthy (writable): write its identity record when it has none (a
    store made before there was one, or just made), and raise the recorded size as it grows
    (by a quarter at a time: one small write now and then, not one per command)."""
    if ident and ident.get("id") and ident.get("pageSize") == psize \
            and last_pg <= ident.get("lastPage", 0) * 5 // 4 + 16:
        return
    old = ident or {}
    doc = {"id": old.get("id") or os.urandom(16).hex(), "pageSize": psize,
           "lastPage": max(last_pg, old.get("lastPage") or 0), "txn": txnid}
    try:
        write_identity(path, doc)
    except (OSError, StoreDiskFull):
        pass  # tried again at the next open; the store itself is fine
