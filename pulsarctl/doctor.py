"""`pulsarctl doctor`: is the store usable, and is the installation whole?

Every check is a row {"check", "ok", "detail"}. Doctor never opens a store LMDB could not map
safely: the store's files are checked first with plain file I/O (store/check.py), and a damaged
store is described, never opened. Nothing a check meets stops the others: an unexpected failure
is a row that says so.
"""
from __future__ import annotations

import os
import sys
from importlib import metadata
from pulsarctl.config import resolve_store_source, resolve_store
from store import check, pages, records, salvage as store_salvage, StoreDiskFull, StoreError
from pulsarctl.broker import Broker
from pulsarctl.errors import (
    PulsarctlError, AlreadyExists, DiskFull, InvalidValue, StoreUnavailable,
)
from pulsarctl.messages import iso_ms
from pulsarctl import daemon

_SALVAGE_HINT = "`pulsarctl doctor --salvage NEW_STORE` copies what is still readable"


def _row(out: list, name: str, ok, detail: str) -> None:
    out.append({"check": name, "ok": bool(ok), "detail": detail})


def checks(store_arg: str | None, *, deep: bool = False) -> list[dict]:
    out: list[dict] = []
    add = lambda name, ok, detail: _row(out, name, ok, detail)  # noqa: E731

    add("python", sys.version_info >= (3, 11), sys.version.split()[0])

    for dist in ("lmdb", "msgpack", "mmh3", "lz4", "typer", "rich"):
        try:
            add(dist, True, metadata.version(dist))
        except metadata.PackageNotFoundError:
            add(dist, False, "missing: reinstall pulsarctl")
    try:
        path, source = resolve_store_source(store_arg)
    except Exception as exc:  # the config file is broken
        add("store", False, str(exc))
        return out
    add("store setting", True, f"chosen by {source}")
    exists = os.path.isdir(path)
    if os.path.lexists(path) and not exists:
        # Every command refuses it (exit 1): a store is a directory.
        add("store path", False, f"{path} is a file, not a store directory: commands refuse it; "
            "move it away, or choose another store with --store PATH (or PULSARCTL_STORE)")
    else:
        add("store path", True, path + ("" if exists else " (created on first use)"))
    if exists:
        _guarded(out, "store", lambda: _store(out, path, deep))
        if deep:
            _guarded(out, "records", lambda: _deep(out, path))
    _guarded(out, "daemon", lambda: _daemon(out, path))
    return out


def _guarded(out: list, name: str, fn) -> None:
    try:
        fn()
    except Exception as exc:  # doctor reports; it never dies of what it checks
        _row(out, name, False, f"could not be checked: {type(exc).__name__}: {exc}")


def _store(out: list, path: str, deep: bool = False) -> None:
    add = lambda name, ok, detail: _row(out, name, ok, detail)  # noqa: E731
    mode = os.stat(path).st_mode & 0o777
    add("store permissions", mode & 0o077 == 0, f"{mode:o} (expected 700)")
    writable = os.access(path, os.W_OK)
    add("store writable", writable, "writable" if writable else "read-only")
    found = check.inspect(path)
    if found.state == "absent":
        add("store files", True, "no data.mdb yet (created on first use)")
        return
    if found.state == "new":
        add("store files", True, "data.mdb holds nothing yet (initialised on first use)")
        return
    if found.state == "damaged":
        for problem in found.problems:
            add("store files", False, f"{found.data} is damaged: {problem}")
        add("store files", False, f"commands refuse this store (exit 1); {_SALVAGE_HINT} into a "
            "new store; `doctor --deep` reads every record")
        return
    for warning in found.warnings:
        add("store files", False, f"{found.data}: {warning}")
    m = found.meta
    ident = found.identity
    add("store files", True,
        f"data.mdb {found.file_bytes} bytes, {m.last_pg + 1} pages of {m.psize} bytes in use, "
        f"transaction {m.txnid}; "
        + (f"store id {ident['id'][:12]}" if ident and ident.get("id")
           else "no identity record yet (written at the next writable open)"))
    if not deep:  # --deep reads them too, and says more (below)
        if not _records(out, path):
            return

    try:
        b = Broker(path, readonly=True, create=False)
    except Exception as exc:
        add("store format", False, getattr(exc, "message", str(exc)))
        return
    try:
        st = b.env.stat()
        add("store format", True, f"ok, map {st['mapSize']} bytes, {st['readers']} readers")
        add("store size", True, f"{st['usedBytes']} bytes in use, file {st['fileBytes']} "
            "bytes (freed pages are reused)")
        _clock(out, b)
    finally:
        b.close()


def _records(out: list, path: str) -> bool:
    """Every record read back from the file and decoded, as a command would read it: below the
    roots, which every command checks before LMDB maps the file, garbage (written over the
    last pages, say) shows only when a record is read. False when something cannot be."""
    rep = store_salvage.record_check(path)
    bad = [f"the record {records.describe_key(d.name, k)} of its {d.name} database cannot be "
           f"decoded ({why})" for d in rep.dbs.values() for k, why in d.bad]
    unread = sum(max(0, d.expected - d.read) for d in rep.dbs.values())
    problems = rep.problems + bad[:5] + ([f"and {len(bad) - 5} more records that cannot be "
                                          "decoded"] if len(bad) > 5 else [])
    if unread:
        problems.append(f"{unread} records cannot be read")
    data = os.path.join(path, pages.DATA)
    for problem in problems:
        _row(out, "store records", False, f"{data} is damaged: {problem}")
    if problems:
        _row(out, "store records", False, f"commands that read or write there fail (exit 1); "
             f"{_SALVAGE_HINT} into a new store")
        return False
    _row(out, "store records", True, f"{rep.records} records read back and decoded (`doctor "
         "--deep` also checks LMDB's structure and each topic's ledgers)")
    return True


def _clock(out: list, broker) -> None:
    try:
        state = broker.clock.state()
    except PulsarctlError as exc:
        _row(out, "clock", False, exc.line().removeprefix("error: "))
        return
    if state.get("mode") == "simulated":
        _row(out, "clock", True, f"simulated, at {iso_ms(state['now'])}: every command sees "
             "this time; `pulsarctl clock real` goes back to the real clock")
    else:
        _row(out, "clock", True, "real")


def _daemon(out: list, path: str) -> None:
    holder = daemon.lock_holder(path) if os.path.isdir(path) else None
    if holder is None:
        _row(out, "daemon", True, "not running (timers fire when commands touch their "
             "subscriptions; `pulsarctl daemon start` fires them on time)")
        return
    st = daemon.read_state(path)
    pid = st.get("pid") or holder
    detail = f"running, pid {pid}" if isinstance(pid, int) and pid > 0 else "running"
    if st.get("lastTick") is not None:
        tick = st["lastTick"]
        detail += f", last tick {iso_ms(tick) if isinstance(tick, int) else tick}"
    _row(out, "daemon", True, detail)


def _db_detail(d, shown: int = 5) -> str:
    parts = [f"{d.read} of {d.expected} records read"]
    if d.bad:
        bad = [f"{records.describe_key(d.name, k)} ({why})" for k, why in d.bad[:shown]]
        more = f", and {len(d.bad) - shown} more" if len(d.bad) > shown else ""
        parts.append(f"{len(d.bad)} cannot be decoded: " + "; ".join(bad) + more)
    unread = max(0, d.expected - d.read)
    if unread:
        parts.append(f"{unread} could not be read")
    return "; ".join(parts)


def _deep(out: list, path: str) -> None:
    rep = store_salvage.deep_check(path)
    if rep.inspection.state in ("absent", "new"):
        _row(out, "records", True, "none yet")
        return
    for name, d in rep.dbs.items():
        _row(out, f"records: {name}", not d.lost, _db_detail(d))
    for problem in rep.problems:
        _row(out, "records", False, problem)
    for name in rep.unknown:
        _row(out, "records", False, f"the main database names {name!r}, which is not one of "
             "pulsarctl's databases")
    if rep.structure is None and not rep.problems:
        _row(out, "structure", True, "not checked (this py-lmdb has no lmdb.verify)")
    elif rep.structure is not None:
        for problem in rep.structure[:20] or ["every page checked (lmdb.verify)"]:
            _row(out, "structure", not rep.structure, problem)
    lost = rep.lost
    if lost:
        detail = f"{rep.records} records read; {lost} lost or undecodable: {_SALVAGE_HINT}"
    else:
        detail = f"{rep.records} records read, every one decodes" + (
            "; the problems above remain" if rep.problems else "")
    _row(out, "records", lost == 0 and not rep.problems, detail)


def salvage(store_arg: str | None, new_store: str) -> list[dict]:
    """Copy what can be read of the store into a new store at new_store: rows saying what was
    copied and what could not be saved."""
    src = os.path.abspath(resolve_store(store_arg))
    dst = os.path.abspath(os.path.expanduser(new_store))
    if dst == src:
        raise InvalidValue("--salvage needs a new directory, not the store itself",
                           hint="give a path that does not exist yet")
    if os.path.exists(dst) and not (os.path.isdir(dst) and not os.listdir(dst)):
        raise AlreadyExists(f"{dst} already exists", hint="give a path that does not exist yet "
                            "(or an empty directory) for the salvaged store")
    if check.inspect(src).state in ("absent", "new") or not os.path.isdir(src):
        raise StoreUnavailable(f"no store at {src}: nothing to salvage")
    try:
        rep = store_salvage.salvage(src, dst)
    except StoreDiskFull as exc:
        raise DiskFull(exc.file) from None
    except StoreError as exc:
        raise StoreUnavailable(str(exc)) from None
    out: list[dict] = []
    for name, d in rep.dbs.items():
        _row(out, f"salvaged: {name}", not d.lost, _db_detail(d))
    for problem in rep.problems:
        _row(out, "not saved", False, problem)
    copied = rep.records - sum(len(d.bad) for d in rep.dbs.values())
    lost = rep.lost
    _row(out, "salvage", lost == 0 and not rep.problems,
         f"copied {copied} records to {dst}" + (f"; {lost} could not be saved" if lost else
                                                 "; nothing was lost")
         + f"; use it with --store {dst}")
    return out
