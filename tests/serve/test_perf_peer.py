"""`perf compare --service-url` measures its peer as a user's application runs it (issue 29,
item 6): the real pulsar-client in a process of its own, with nothing of pulsarctl loaded and
the client's own default logger (a Python logger halved every client's rate in that process)."""
from __future__ import annotations

import json
import urllib.request

from pulsarctl import perf_compare


def test_the_peer_runs_alone_with_the_clients_defaults_and_sends_every_message(served):
    got = perf_compare.peer_run(served.url, "persistent://public/default/peer", 300, b"p" * 100)
    assert got["pulsarctlModules"] == []
    assert got["loggingConfigured"] is False
    assert got["produceSeconds"] > 0 and got["consumeSeconds"] > 0
    with urllib.request.urlopen(
            f"{served.http_url}/admin/v2/persistent/public/default/peer/stats") as r:
        stats = json.load(r)
    assert stats["msgInCounter"] == 300
    assert stats["subscriptions"]["compare"]["msgBacklog"] == 0
