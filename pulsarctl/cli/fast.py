"""A fast path for one-shot `produce`: importing typer and building the command tree costs
more than the whole of producing one message, so plain produce invocations are parsed here.

Only the flags below are understood; anything else (help, --stdin, an unknown flag, a typo)
returns None and the typer app handles the command, so behaviour never differs — only start-up
time. tests/cli/test_fast_path.py checks that every flag here exists on the typer command and that
both paths give the same output and store contents.
"""
from __future__ import annotations

# flag -> (parameter of produce_main, kind)
PRODUCE_FLAGS = {
    "-m": ("messages", "list"), "--messages": ("messages", "list"),
    "-f": ("files", "list"), "--files": ("files", "list"),
    "-s": ("separator", "str"), "--separator": ("separator", "str"),
    "-n": ("num_produce", "int"), "--num-produce": ("num_produce", "int"),
    "-k": ("key", "str"), "--key": ("key", "str"),
    "--ordering-key": ("ordering_key", "str"),
    "-p": ("properties", "list"), "--properties": ("properties", "list"),
    "--event-time": ("event_time", "str"),
    "--deliver-after": ("deliver_after", "str"),
    "--deliver-at": ("deliver_at", "str"),
    "--producer-name": ("producer_name", "str"),
    "--sequence-id": ("sequence_id", "int"),
    "-c": ("chunking", "flag"), "--chunking": ("chunking", "flag"),
    "-db": ("disable_batching", "flag"), "--disable-batching": ("disable_batching", "flag"),
    "-o": ("output", "str"), "--output": ("output", "str"),
}
GLOBAL_FLAGS = {"--store": "store", "-o": "output", "--output": "output"}
_OUTPUTS = ("text", "json", "ndjson")


def _split(arg: str):
    """click splits --flag=value but never -f=value: neither do we."""
    return arg.partition("=") if arg.startswith("--") else (arg, "", "")


def _value(argv, i, eq, inline):
    """(index of the value's argument, value) for the option at argv[i]; value None if the
    option has no value."""
    if eq:
        return i, inline
    if i + 1 < len(argv):
        return i + 1, argv[i + 1]
    return i, None


def parse(argv: list[str]):
    """(store, output, topic, kwargs) for a plain produce command line, else None."""
    store, output = None, "text"
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        flag, eq, inline = _split(argv[i])
        if flag not in GLOBAL_FLAGS:
            return None
        i, value = _value(argv, i, eq, inline)
        if value is None:
            return None
        if GLOBAL_FLAGS[flag] == "store":
            store = value
        else:
            output = value
        i += 1
    if i >= len(argv) or argv[i] != "produce":
        return None
    i += 1
    topic = None
    kwargs: dict = {}
    while i < len(argv):
        a = argv[i]
        if a.startswith("-") and a != "-":
            flag, eq, inline = _split(a)
            if flag not in PRODUCE_FLAGS:
                return None
            dest, kind = PRODUCE_FLAGS[flag]
            if kind == "flag":
                if eq:
                    return None
                kwargs[dest] = True
                i += 1
                continue
            i, value = _value(argv, i, eq, inline)
            if value is None:
                return None
            if kind == "int":
                try:
                    value = int(value)
                except ValueError:
                    return None
            if kind == "list":
                if dest == "files" and value == "-":
                    return None
                kwargs.setdefault(dest, []).append(value)
            else:
                kwargs[dest] = value
        else:
            if topic is not None:
                return None
            topic = a
        i += 1
    if topic is None or not (kwargs.get("messages") or kwargs.get("files")):
        return None
    output = kwargs.pop("output", output)
    if output not in _OUTPUTS:
        return None
    return store, output, topic, kwargs


def try_run(argv: list[str]) -> int | None:
    try:
        "".join(argv).encode("utf-8")
    except UnicodeEncodeError:
        return None  # the typer path refuses it in one line (app._check_utf8)
    parsed = parse(argv)
    if parsed is None:
        return None
    store, output, topic, kwargs = parsed
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.errmap import guarded
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.produce_run import produce_main
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.state import State

    return guarded(lambda: produce_main(State(store, output), topic, output, **kwargs), argv)
