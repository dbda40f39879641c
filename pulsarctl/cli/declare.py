"""typer's declarations, kept as records until typer is needed.

The command modules that fast_run.py runs without typer (fast_table.py names them) import this
module as `typer` instead of typer itself: importing typer costs more CPU than the whole of
`topics stats` (55 ms, and its coercion loads pydantic, 55 ms more). Their groups, commands and
options are written exactly as with typer; here they are only recorded:

- `Typer(...)` is a record of the group and of every `.command()`, `.callback()` and
  `.add_typer()` made on it; the decorators return the function unchanged, as typer's do;
- `Option(...)` / `Argument(...)` record their arguments (inside `Annotated[...]` aliases such
  as common.Output, made when a module is imported);
- any other name (`typer.Context`, `typer.Exit`, ...) is typer's own, loaded when first asked
  for: a function annotation is text until typer reads it (`from __future__ import
  annotations`), so only typer itself ever asks.

realize() (app.py calls it, when it builds the typer app) imports typer and turns every record
made so far into typer's own object, in place, so every reference to it (a module's `topics`
group, an `Output` alias imported elsewhere) is typer's object from then on; records asked for
after that are typer's objects from the start. The typer app is therefore built from the same
declarations, whichever path imported a command module first.
"""
from __future__ import annotations

_records: list = []  # every record made before realize(), in the order made
_typer = None  # the typer module, once realize() has run


def _real():
    global _typer
    if _typer is None:
        import typer  # lazy: the point of this module is that the fast path never loads it

        _typer = typer
    return _typer


class _Group:
    """typer.Typer(*args, **kwargs), recorded."""

    def __init__(self, args: tuple, kwargs: dict):
        self._made = (args, kwargs)
        self._calls: list = []  # (method, args, kwargs, decorated function or None)

    def _decorator(self, method: str, args: tuple, kwargs: dict):
        def record(fn):
            self._calls.append((method, args, kwargs, fn))
            return fn
        return record

    def command(self, *args, **kwargs):
        return self._decorator("command", args, kwargs)

    def callback(self, *args, **kwargs):
        return self._decorator("callback", args, kwargs)

    def add_typer(self, *args, **kwargs) -> None:
        self._calls.append(("add_typer", args, kwargs, None))

    def _become_typer(self, typer) -> None:
        (args, kwargs), calls = self._made, self._calls
        vars(self).clear()
        self.__class__ = typer.Typer
        typer.Typer.__init__(self, *args, **kwargs)
        for method, m_args, m_kwargs, fn in calls:
            made = getattr(self, method)(*m_args, **m_kwargs)
            if fn is not None:
                made(fn)


class _Param:
    """typer.Option(...) or typer.Argument(...), recorded."""

    def __init__(self, kind: str, args: tuple, kwargs: dict):
        self._made = (kind, args, kwargs)

    def _become_typer(self, typer) -> None:
        kind, args, kwargs = self._made
        real = getattr(typer, kind)(*args, **kwargs)
        vars(self).clear()
        self.__class__ = type(real)
        vars(self).update(vars(real))


def Typer(*args, **kwargs):  # noqa: N802 - typer's name
    if _typer is not None:
        return _typer.Typer(*args, **kwargs)
    record = _Group(args, kwargs)
    _records.append(record)
    return record


def _param(kind: str, args: tuple, kwargs: dict):
    if _typer is not None:
        return getattr(_typer, kind)(*args, **kwargs)
    record = _Param(kind, args, kwargs)
    _records.append(record)
    return record


def Option(*args, **kwargs):  # noqa: N802 - typer's name
    return _param("Option", args, kwargs)


def Argument(*args, **kwargs):  # noqa: N802 - typer's name
    return _param("Argument", args, kwargs)


def realize():
    """Load typer and make every record typer's own object (parameters first: a group's
    commands are read only when typer builds the click tree, after this)."""
    typer = _real()
    while _records:
        pending = sorted(_records, key=lambda r: isinstance(r, _Group))
        _records.clear()
        for record in pending:
            record._become_typer(typer)
    return typer


def __getattr__(name: str):
    # typer.Context, typer.Exit, typer.main ...: typer's own, loaded on first use.
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_real(), name)
