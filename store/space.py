"""Room on the disk taken before LMDB needs it, and telling a full disk from other write errors.

LMDB extends lock.mdb and a new data.mdb through a map: on a full disk touching a page of a
sparse file there is a SIGBUS, the process dying with no message. Allocating those bytes first
turns that into StoreDiskFull; and since LMDB reports a short write on commit as EIO, disk_full()
looks at the free space to say which it was. Apart from the damage check (store/check.py)
because it is about the file system under the store, not about what the files hold. Nothing
here knows topics or time, nor imports lmdb.
"""
from __future__ import annotations

import errno
import os

from store.errors import StoreDiskFull
from store.pages import DATA, LOCK


# LMDB's lock file for max_readers=254: the reader table after two cache lines of header
# (mdb.c: sizeof(MDB_txninfo) + (maxreaders - 1) * sizeof(MDB_reader)), rounded to whole pages.
LOCK_BYTES = 16384
# The room a new store needs on its disk before LMDB writes its first pages (the two meta pages
# and the first transaction).
NEW_DATA_BYTES = 64 * 1024
# After LMDB reports an I/O error on commit, a file system with less than this left is full:
# LMDB turns a short write (the disk filled during it) into EIO.
_FULL_BELOW = 1 << 20


# -- reserving space before LMDB needs it ---------------------------------------------------------
def _reserve(p: str, nbytes: int) -> None:
    """Allocate the first nbytes of file p (0600) now, so that touching them through a map
    never meets a full disk (a sparse file there is a SIGBUS). Its contents are left as they
    are."""
    try:
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreDiskFull(p) from None
        return  # not ours to write (read-only, permissions): LMDB says so when it opens it
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise StoreDiskFull(p) from None
        # Anything else (a file system without fallocate): LMDB makes the file as it always did.
    finally:
        os.close(fd)


def reserve_lock(path: str) -> None:
    """LMDB makes lock.mdb with ftruncate and writes it through a map: on a full disk that is a
    SIGBUS. Allocating it first turns that into StoreDiskFull."""
    _reserve(os.path.join(path, LOCK), LOCK_BYTES)


def reserve_new(path: str) -> None:
    """For a store about to be made: lock.mdb allocated, and room on the disk for LMDB's first
    pages (its two meta pages, written as one, must not meet a full disk half-way: a file with
    one meta page is one LMDB refuses)."""
    reserve_lock(path)
    try:
        st = os.statvfs(path)
    except OSError:
        return
    free = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    if free * st.f_frsize < NEW_DATA_BYTES:
        raise StoreDiskFull(os.path.join(path, DATA))


def disk_full(path: str, code: int | None, message: str) -> bool:
    """Does an error LMDB reported for a write to the store at path mean the disk is full?"""
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return True
    if "No space left" in message or "quota" in message.lower():
        return True
    if code == errno.EIO or "Input/output error" in message:
        try:
            st = os.statvfs(path)
        except OSError:
            return False
        free = st.f_bfree if os.geteuid() == 0 else st.f_bavail
        return free * st.f_frsize < _FULL_BELOW
    return False
