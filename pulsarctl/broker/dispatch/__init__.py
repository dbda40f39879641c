"""Dispatch: choose the entries a consumer gets next, record them as pending for it, and
return them as Messages. One module per subscription type, as Pulsar's dispatchers."""
from __future__ import annotations

from store import codec, keys
from pulsarctl.broker import subscriptions as subs
from pulsarctl.broker.dispatch import exclusive, failover, shared
from pulsarctl.messages import MessageId, message_from_entry

_decode = codec.decode
_SELECTORS = {
    subs.EXCLUSIVE: exclusive.select,
    subs.FAILOVER: failover.select,
    subs.SHARED: shared.select,
    subs.KEY_SHARED: shared.select,
}


def fetch(ctx, info, c, consumer: dict, live: list[dict], max_n: int, topic_name: str,
          partition: int = -1):
    """Give consumer up to max_n messages; they stay pending for it until acked."""
    if max_n <= 0:
        return []
    typ = c.props.get("type", subs.EXCLUSIVE)
    chosen = _SELECTORS[typ](ctx, info, c, consumer, live, max_n)
    if not chosen:
        return []
    txn, now, name = ctx.txn, ctx.now, consumer["name"]
    pdb = ctx.env.db["pending"]
    pair, cid, encode = keys.pair, c.id, codec.encode
    read, position = ctx.ledgers.read, info.position
    out = []
    nbytes = 0
    for offset, rc in chosen:
        raw = read(txn, info, offset)
        if raw is None:
            continue
        txn.put(pair(cid, offset), encode([name, now, rc]), db=pdb)
        p = position(offset)
        m = message_from_entry(_decode(raw), MessageId(p.ledger_id, p.entry_id, partition),
                               topic_name, rc, c.name, name)
        nbytes += len(m.payload)
        out.append(m)
    c.props["out"] = c.props.get("out", 0) + len(out)
    c.props["outBytes"] = c.props.get("outBytes", 0) + nbytes
    c.props["lastConsumed"] = now
    ctx.cursors.save(txn, c)
    return out
