"""The comparer of the differential tests: what real Pulsar and `pulsarctl serve` observed for
one operation, reduced to what Pulsar promises, and the table of pulsarctl's deliberate
stronger behaviours (STRONGER), the only differences it lets through.

What is compared where Pulsar's choice depends on timing:
- a single stream (an Exclusive or Failover consumer, a Shared or Key_Shared subscription with
  one consumer, a reader): the messages in the order they came;
- a Shared subscription with several consumers: what all of them got together (a multiset);
  who got which message is the dispatcher's race, never promised;
- a Key_Shared subscription with several consumers: what each consumer got of each key, in
  order (a key's consumer is chosen by hashing the consumer names, the same on both sides);
- a Failover subscription: what each consumer got, in order (the active one is chosen by
  hashing the names);
- stats: what racy() leaves out."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable

from lockstep import Got


@dataclass(frozen=True)
class Context:
    """What an observation was made on."""

    op: str
    sub_type: str | None = None
    # tags whose redelivery count pulsarctl kept when the subscription's last consumer left
    kept: frozenset = frozenset()
    batches: bool = False      # the topic has batch entries


@dataclass(frozen=True)
class Stronger:
    """A way pulsarctl deliberately goes beyond Pulsar: where it shows, what it changes, why,
    and the regular test that pins pulsarctl's behaviour."""

    name: str
    applies: Callable[[Context, object], bool]   # (context, the Got or None for stats)
    fields: tuple          # fields of a Got (or keys of a stats view) it explains
    reason: str
    pinned_by: str


# pulsarctl's deliberate stronger behaviours that show over the wire (tests/oracle/
# DIVERGENCES.md is this table for the README).
STRONGER: list[Stronger] = [
    Stronger(
        "unacked-on-every-type",
        lambda ctx, g: ctx.op == "stats" and ctx.sub_type in ("Exclusive", "Failover"),
        ("unackedMessages", "consumerUnacked"),
        "pulsarctl keeps each consumer's unacknowledged messages on every subscription type (a "
        "consumer outlives its process: receive in one command, ack in another) and stats "
        "counts them; Pulsar keeps pending acks only on Shared and Key_Shared, so its "
        "unackedMessages is 0 on Exclusive and Failover",
        "tests/processes/test_processes.py::test_receive_then_ack_from_another_process"),
    Stronger(
        "counts-outlive-consumers",
        lambda ctx, g: g is not None and g.tag in ctx.kept,
        ("redeliveries",),
        "pulsarctl stores redelivery counts with the subscription, so a count raised while a "
        "consumer held the message is still there when the subscription's last consumer has "
        "left and another one connects (a poison message reaches the dead letter topic however "
        "often its consumers restart); Pulsar's dispatcher keeps them in memory and clears them "
        "when its last consumer leaves",
        "tests/broker/test_redelivery.py::test_consumer_going_away_does_not_count"),
]


# How often each entry of STRONGER let a difference through (the test's journal shows it).
USED: Counter = Counter()


def _masked(ctx: Context, g=None, applied: set | None = None) -> set:
    out = set()
    for s in STRONGER:
        if s.applies(ctx, g):
            out.update(s.fields)
            if applied is not None:
                applied.add(s.name)
    return out


def _mask_got(g: Got, ctx: Context, applied: set | None = None) -> Got:
    masked = _masked(ctx, g, applied)
    if not masked:
        return g
    return replace(g, **{f: None for f in masked if hasattr(g, f)})


def _through(applied: set, differed: bool) -> None:
    """The masked views agree: if the raw ones did not, the entries applied let it through."""
    if differed:
        USED.update(applied)


def stream(real: list, ours: list, ctx: Context) -> str | None:
    """Two ordered lists of Got."""
    applied: set = set()
    a = [_mask_got(g, ctx, applied) for g in real]
    b = [_mask_got(g, ctx, applied) for g in ours]
    if a == b:
        _through(applied, real != ours)
        return None
    return "messages differ:\n" + _side_by_side(a, b)


def union(real: dict, ours: dict, ctx: Context) -> str | None:
    """{consumer: [Got]} of a Shared subscription: compared as one multiset."""
    applied: set = set()
    a = Counter(_mask_got(g, ctx, applied) for gs in real.values() for g in gs)
    b = Counter(_mask_got(g, ctx, applied) for gs in ours.values() for g in gs)
    if a == b:
        _through(applied, Counter(g for gs in real.values() for g in gs)
                 != Counter(g for gs in ours.values() for g in gs))
        return None
    return ("what the subscription's consumers got together differs:\n"
            f"  only real:  {sorted((a - b).elements(), key=_order)}\n"
            f"  only serve: {sorted((b - a).elements(), key=_order)}")


def per_key(real: dict, ours: dict, ctx: Context) -> str | None:
    """{consumer: [Got]} of a Key_Shared subscription: each consumer's messages of each key,
    in order."""
    applied: set = set()

    def view(d, masking=True):
        out = {}
        for c, gs in d.items():
            for g in gs:
                out.setdefault((c, _sticky(g)), []).append(
                    _mask_got(g, ctx, applied) if masking else g)
        return out

    a, b = view(real), view(ours)
    if a == b:
        _through(applied, view(real, False) != view(ours, False))
        return None
    lines = []
    for k in sorted(set(a) | set(b), key=str):
        if a.get(k) != b.get(k):
            lines.append(f"  consumer {k[0]} key {k[1]!r}:\n"
                         + _side_by_side(a.get(k, []), b.get(k, []), indent="    "))
    return "what each consumer got of each key differs:\n" + "\n".join(lines)


def per_consumer(real: dict, ours: dict, ctx: Context) -> str | None:
    applied: set = set()
    a = {c: [_mask_got(g, ctx, applied) for g in gs] for c, gs in real.items() if gs}
    b = {c: [_mask_got(g, ctx, applied) for g in gs] for c, gs in ours.items() if gs}
    if a == b:
        _through(applied, {c: gs for c, gs in real.items() if gs}
                 != {c: gs for c, gs in ours.items() if gs})
        return None
    lines = []
    for c in sorted(set(a) | set(b)):
        if a.get(c) != b.get(c):
            lines.append(f"  consumer {c}:\n" + _side_by_side(a.get(c, []), b.get(c, []),
                                                             indent="    "))
    return "what each consumer got differs:\n" + "\n".join(lines)


def value(real, ours, ctx: Context) -> str | None:
    if real == ours:
        return None
    return f"real: {real!r}\n  serve: {ours!r}"


def racy(ctx: Context, sub: dict) -> set:
    """The keys of a subscription's stats view that Pulsar does not promise: how many messages
    each of several Shared or Key_Shared consumers holds is the dispatcher's race; and on a
    topic with batches, how far a dispatch goes past a consumer's permits (a batch goes whole)
    depends on how the entries arrived and were read."""
    out = set()
    if sub.get("type") in ("Shared", "Key_Shared"):
        if len(sub.get("consumers") or ()) > 1:
            out.add("consumerUnacked")
        if ctx.batches:
            out.update(("consumerUnacked", "unackedMessages"))
    return out


def stats(real: dict, ours: dict, ctx: Context) -> str | None:
    """Views from Side.stats(), keys masked per subscription type."""
    applied: set = set()

    def masked(view, stronger=True):
        out = dict(view)
        subs = {}
        for name, s in view.get("subscriptions", {}).items():
            m = racy(ctx, s)
            if stronger:
                m |= _masked(replace(ctx, sub_type=s.get("type")), None, applied)
            subs[name] = {k: v for k, v in s.items() if k not in m}
        if "subscriptions" in view:
            out["subscriptions"] = subs
        return out

    a, b = masked(real), masked(ours)
    if a == b:
        _through(applied, masked(real, False) != masked(ours, False))
        return None
    lines = []
    for k in sorted(set(a) | set(b)):
        if k == "subscriptions":
            sa, sb = a.get(k, {}), b.get(k, {})
            for name in sorted(set(sa) | set(sb)):
                if sa.get(name) != sb.get(name):
                    x, y = sa.get(name) or {}, sb.get(name) or {}
                    if not x or not y:
                        lines.append(f"  subscription {name}: real {x or 'absent'}, "
                                     f"serve {y or 'absent'}")
                        continue
                    for f in sorted(set(x) | set(y)):
                        if x.get(f) != y.get(f):
                            lines.append(f"  subscription {name} {f}: real {x.get(f)!r}, "
                                         f"serve {y.get(f)!r}")
        elif a.get(k) != b.get(k):
            lines.append(f"  {k}: real {a.get(k)!r}, serve {b.get(k)!r}")
    return "stats differ:\n" + "\n".join(lines)


def _sticky(g: Got) -> str:
    return g.ordering_key or g.key or ""


def _order(g: Got):
    return (str(g.entry), g.index, g.tag)


def _side_by_side(a: list, b: list, indent: str = "  ") -> str:
    lines = [f"{indent}{'real':<60} serve"]
    for i in range(max(len(a), len(b))):
        x = _short(a[i]) if i < len(a) else "-"
        y = _short(b[i]) if i < len(b) else "-"
        mark = "  " if x == y else "≠ "
        lines.append(f"{indent}{mark}{x:<58} {y}")
    return "\n".join(lines)


def _short(g) -> str:
    if not isinstance(g, Got):
        return repr(g)
    parts = [g.tag, f"@{g.entry}" + (f"/{g.index}" if g.index not in (-1, None) else "")]
    if g.key:
        parts.append(f"key={g.key}")
    if g.ordering_key:
        parts.append(f"okey={g.ordering_key}")
    if g.props:
        parts.append(f"props={dict(g.props)}")
    if g.redeliveries is None:
        parts.append("count=*")
    elif g.redeliveries:
        parts.append(f"count={g.redeliveries}")
    return " ".join(parts)
