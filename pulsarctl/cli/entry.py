"""The console script. `produce` with plain flags takes a fast path that never imports typer
or rich (see fast.py), as do plain lines of the everyday commands (fast_run.py) and the
completion scripts' hidden `__complete` (complete.py); everything else goes through the typer
app."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["__complete"]:  # the completion scripts' names from the store (complete.py)
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.cli import complete

        sys.exit(complete.main(argv[1:]))
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli import fast

    code = fast.try_run(argv)
    if code is None:
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.cli import fast_run

        code = fast_run.try_run(argv)  # the everyday commands, by a table (fast_run.py)
    if code is None:
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.cli.app import run

        code = run(argv)
    sys.exit(code)


if __name__ == "__main__":
    main()
