"""brokers (dynamic config), clock, subscriptions, and version / doctor / completion."""
from __future__ import annotations

from typing import Annotated, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl.cli import render
from pulsarctl.cli.common import Output, Topic, fmt, state

brokers = typer.Typer(help="Store-wide settings named as Pulsar's broker.conf.", no_args_is_help=True)
clock = typer.Typer(help="The store's clock: real, or simulated for tests and lessons.",
                    no_args_is_help=True)
subscriptions = typer.Typer(help="Look inside subscriptions.", no_args_is_help=True)
schemas = typer.Typer(help="Topic schemas (pulsar-admin schemas).", no_args_is_help=True)
# The top-level commands this module owns; pulsarctl/cli/app.py joins them onto the root.
top = typer.Typer()


@schemas.command("get", help="Show a topic's schema (exit 3 if it has none).")
def schemas_get(ctx: typer.Context, topic: Topic,
                version: Annotated[Optional[int], typer.Option("--version",
                                                              help="This version, not the "
                                                              "latest.")] = None,
                output: Output = None):
    render.data(state(ctx).broker().schemas.get(topic, version), fmt(ctx, output))


@schemas.command("delete", help="Delete a topic's schema (every version).")
def schemas_delete(ctx: typer.Context, topic: Topic, output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.common import done

    deleted = state(ctx).broker().schemas.delete(topic)
    done(ctx, output, {"topic": topic, "deleted": deleted},
         f"deleted the schema of {topic}" if deleted else f"{topic} had no schema")


@brokers.command("get-all-dynamic-config", help="Show every store-wide setting.")
def get_all_dynamic_config(ctx: typer.Context, output: Output = None):
    render.data(state(ctx).broker().policies.settings(), fmt(ctx, output))


@brokers.command("update-dynamic-config", help="Change a store-wide setting.")
def update_dynamic_config(
    ctx: typer.Context,
    config: Annotated[str, typer.Option("--config", help="Setting name, e.g. maxMessageSize.")],
    value: Annotated[str, typer.Option("--value", help="New value.")],
    output: Output = None,
):
    v = state(ctx).broker().policies.update_setting(config, value)
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.err(f"{config} = {v}")
    else:
        render.data({config: v}, out)


def _clock_doc(st) -> dict:
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.messages import iso_ms

    s = st.broker().clock.state()
    # iso_ms says None for 0 (an unset time); a clock at 0 is at the epoch.
    return {"mode": s["mode"], "now": iso_ms(s["now"]) or "1970-01-01T00:00:00.000Z",
            "nowMillis": s["now"]}


def _clock_text(d: dict) -> None:
    line = f"{d['mode']} {d['now']}"
    if "fired" in d:
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.broker.fired import text

        line += f"; fired: {text(d['fired'])}"
    render.outln(line)


@clock.command("show", help="Show the store's clock.")
def clock_show(ctx: typer.Context, output: Output = None):
    render.data(_clock_doc(state(ctx)), fmt(ctx, output), _clock_text)


@clock.command("simulate", help="Run the store on a simulated clock (from now, or --at TIME).")
def clock_simulate(ctx: typer.Context,
                   at: Annotated[Optional[str], typer.Option("--at", help="ISO time or epoch ms.")] = None,
                   output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_time_ms

    st = state(ctx)
    st.broker().clock.simulate(parse_time_ms(at, "--at") if at else None)
    render.data(_clock_doc(st), fmt(ctx, output), _clock_text)


# A negative duration (`clock advance -5s`) looks like an option to click: it is let through to
# the argument (ignore_unknown_options), which then says what is wrong with it.
@clock.command("advance", help="Move the simulated clock forward and fire what became due, as "
               "a daemon tick would; says what fired, by kind: nack (redelivery delays), ack "
               "timeout, delayed (deliver-at came), retry (reconsume-later delays), TTL "
               "(messages expired) and lease (consumers disconnected).",
               context_settings={"ignore_unknown_options": True})
def clock_advance(ctx: typer.Context,
                  duration: Annotated[str, typer.Argument(help="e.g. 30s, 5m, 1h.")],
                  output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.errors import UsageError
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_duration_ms

    if duration[:2] in {f"-{d}" for d in "0123456789."}:
        raise UsageError(f"the clock cannot go back ({duration!r})",
                         hint="give a positive duration, e.g. `pulsarctl clock advance 5s`")
    if duration.startswith("-"):  # an option it does not have, as click would say
        raise UsageError(f"no such option: {duration}",
                         hint="see `pulsarctl clock advance --help`")
    st = state(ctx)
    _at, fired = st.broker().clock.advance(parse_duration_ms(duration), by_kind=True)
    render.data({**_clock_doc(st), "fired": fired}, fmt(ctx, output), _clock_text)


@clock.command("real", help="Go back to the real clock.")
def clock_real(ctx: typer.Context, output: Output = None):
    st = state(ctx)
    st.broker().clock.real()
    render.data(_clock_doc(st), fmt(ctx, output), _clock_text)


@subscriptions.command("consumers", help="The consumers of a subscription.")
def sub_consumers(ctx: typer.Context, topic: Topic,
                  subscription: Annotated[str, typer.Argument(help="Subscription name.")],
                  output: Output = None):
    rows = state(ctx).broker().subscription(topic, subscription).consumers()
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.table(["consumer", "active", "priority", "unacked", "key hash ranges", "address",
                      "connected since", "lease until"],
                     [[(r.get("topic", "") + " " if r.get("topic") else "") + r["consumerName"],
                       {True: "yes", False: "no"}.get(r.get("isActive"), ""), r["priorityLevel"],
                       r["unackedMessages"], " ".join(r.get("keyHashRanges", [])), r["address"],
                       r["connectedSince"], r["leaseUntil"]] for r in rows])
    else:
        render.data(rows, out)


@top.command(help="Print the version.")
def version(ctx: typer.Context, output: Output = None):
    import platform  # lazy: loaded when the command runs, not when the command tree is built

    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import __version__
    # lazy: loaded when the command runs, not when the command tree is built
    from store import FORMAT_VERSION, lmdb_version

    doc = {"pulsarctl": __version__, "storeFormat": FORMAT_VERSION, "lmdb": lmdb_version(),
           "python": platform.python_version()}
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.outln(f"pulsarctl {__version__}")
    else:
        render.data(doc, out)


@top.command(help="Check the installation and the store: its files are checked before LMDB "
             "opens them, so a damaged store is described, never a crash; every record is read "
             "back and decoded, as commands read them, and the free list every write reads is "
             "checked (a large store takes a while: the whole file is read). Exit 0 when every "
             "check passes, 1 when one fails (a damaged store, a store path that is a file, a "
             "record that does not decode, anything --salvage could not save).")
def doctor(ctx: typer.Context,
           deep: Annotated[bool, typer.Option("--deep", help="Also check LMDB's structure "
                                              "(every page reachable once, nothing leaked) and "
                                              "each topic's ledgers, and list every record that "
                                              "cannot be decoded, database by database.")] = False,
           salvage: Annotated[Optional[str], typer.Option(
               "--salvage", metavar="NEW_STORE", help="Copy every record that can still be read "
               "into a new store at NEW_STORE (which must not exist, or be empty) and say what "
               "could not be saved.")] = None,
           output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import doctor as doc

    st = state(ctx)
    results = doc.salvage(st.store, salvage) if salvage else doc.checks(st.store, deep=deep)
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.table(["check", "ok", "detail"], [[r["check"], "yes" if r["ok"] else "NO", r["detail"]]
                                                  for r in results])
    else:
        render.data(results, out)
    return 0 if all(r["ok"] for r in results) else 1


@top.command(help="Print a shell completion script: bash, zsh or fish.")
def completion(ctx: typer.Context,
               shell: Annotated[str, typer.Argument(help="bash, zsh or fish.")]):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli import completion_gen
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.errors import InvalidValue

    if shell not in completion_gen.SHELLS:
        raise InvalidValue(f"unknown shell {shell!r}", hint="use bash, zsh or fish")
    # The tree of the running root command: the command modules never import the root app.
    render.out(completion_gen.completion(shell, ctx.find_root().command))


@subscriptions.command("close-consumer", help="Disconnect a consumer: its pending messages go "
                       "back (to the other consumers, or by rewinding the cursor).")
def close_consumer(ctx: typer.Context, topic: Topic,
                   subscription: Annotated[str, typer.Argument(help="Subscription name.")],
                   consumer: Annotated[str, typer.Argument(help="Consumer name.")],
                   output: Output = None):
    n = state(ctx).broker().subscription(topic, subscription).disconnect_consumer(consumer)
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.err(render.safe(f"closed consumer {consumer}; {n} pending message(s) given back"))
    else:
        render.data({"topic": topic, "subscription": subscription, "consumer": consumer,
                     "closed": True, "pendingReturned": n}, out)


@subscriptions.command("describe", help="Type, policy, derived dead letter and retry topics, and "
                       "the cursor of a subscription.")
def sub_describe(ctx: typer.Context, topic: Topic,
                 subscription: Annotated[str, typer.Argument(help="Subscription name.")],
                 output: Output = None):
    render.data(state(ctx).broker().subscription(topic, subscription).describe(), fmt(ctx, output))


@subscriptions.command("pending", help="Delivered, unacknowledged messages: consumer, idle time, "
                       "redelivery count, next redelivery.")
def sub_pending(ctx: typer.Context, topic: Topic,
                subscription: Annotated[str, typer.Argument(help="Subscription name.")],
                output: Output = None):
    rows = state(ctx).broker().subscription(topic, subscription).pending()
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.table(["message", "consumer", "idle", "redeliveries", "next redelivery"],
                     [[r["messageId"], r["consumerName"], f"{r['idleMs'] // 1000}s",
                       r["redeliveryCount"], r["nextRedelivery"] or ""] for r in rows])
    else:
        render.data(rows, out)
