"""A subscription's type read and written in one place (issue 29 item 7):
broker/subscription_state.py. Untyped (made by create-subscription) it shows "None" and reads
as Exclusive; its first consumer types it; no other module reads the cursor's "type" property.
Real LMDB in tmp_path, a simulated clock."""
from __future__ import annotations

import io
import tokenize
from pathlib import Path

from pulsarctl.broker import subscription_state as state

ROOT = Path(__file__).resolve().parents[2]
LEASE = 600_000


def test_an_untyped_subscription_reads_exclusive_and_shows_none(broker):
    broker.publish("t", [])
    broker.subscription("t", "s").create()

    def look(ctx):
        info = ctx.ledgers.info(ctx.txn, ctx.ledgers.lookup(ctx.txn,
                                                            "persistent://public/default/t"))
        c = ctx.cursors.get(ctx.txn, info.ml_id, "s")
        return state.stored_type(c), state.type_of(c), state.shown_type(c), \
            state.single_active(c)
    assert broker._read(look) == (None, "Exclusive", "None", True)
    broker.subscribe("t", "s", "c1", "Shared", "Earliest", lease_ms=LEASE, fetch=0)
    assert broker._read(look) == ("Shared", "Shared", "Shared", False)


def test_no_module_reads_the_type_property_itself():
    found = []
    for p in sorted((ROOT / "pulsarctl").rglob("*.py")):
        if p.name == "subscription_state.py":
            continue
        toks = list(tokenize.generate_tokens(io.StringIO(p.read_text("utf-8")).readline))
        for i, t in enumerate(toks[:-3]):
            # props.get("type" ...) / props["type"] / props.setdefault("type" ...)
            if t.string == "props" and toks[i + 1].string in (".", "["):
                rest = toks[i + 2:i + 5]
                if any(x.string in ('"type"', "'type'") for x in rest):
                    found.append(f"{p.relative_to(ROOT)}:{t.start[0]}")
    assert not found, found
