"""`pulsarctl doctor`: is the store usable, and is the installation whole?"""
from __future__ import annotations

import os
import sys


def checks(store_arg: str | None) -> list[dict]:
    from pulsarctl.config import resolve_store

    out = []

    def add(name, ok, detail):
        out.append({"check": name, "ok": bool(ok), "detail": detail})

    add("python", sys.version_info >= (3, 11), sys.version.split()[0])
    from importlib import metadata

    for dist in ("lmdb", "msgpack", "mmh3", "lz4", "typer", "rich"):
        try:
            add(dist, True, metadata.version(dist))
        except metadata.PackageNotFoundError:
            add(dist, False, "missing: reinstall pulsarctl")
    try:
        path = resolve_store(store_arg)
    except Exception as exc:  # the config file is broken
        add("store", False, str(exc))
        return out
    exists = os.path.isdir(path)
    add("store path", True, path + ("" if exists else " (created on first use)"))
    if exists:
        mode = os.stat(path).st_mode & 0o777
        add("store permissions", mode & 0o077 == 0, f"{mode:o} (expected 700)")
        add("store writable", os.access(path, os.W_OK), "writable" if os.access(path, os.W_OK) else "read-only")
        try:
            from pulsarctl.broker import Broker

            b = Broker(path, readonly=not os.access(path, os.W_OK), create=False)
            st = b.env.stat()
            add("store format", True, f"ok, map {st['mapSize']} bytes, {st['readers']} readers")
            add("store size", True, f"{st['usedBytes']} bytes in use, file {st['fileBytes']} "
                "bytes (freed pages are reused)")
            b.close()
        except Exception as exc:
            add("store format", False, str(exc))
    return out
