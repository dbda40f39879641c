import os
import sys

# `python -m pulsarctl` puts the working directory first on sys.path; a directory there named
# `store` (a pulsarctl store, say) would shadow our store package. Keep it only when it is the
# project itself (running from a checkout).
_project = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == os.getcwd() != _project:
    del sys.path[0]

from pulsarctl.cli.entry import main  # noqa: E402

main()
