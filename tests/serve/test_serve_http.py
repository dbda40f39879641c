"""`pulsarctl serve` serves the admin REST API beside the binary protocol: the real client given
an http:// service URL looks topics up over HTTP, and the REST API sees the wire's messages.
What serve prints, and its exit on a bad port, are the process's (served_process, a real
`pulsarctl serve`); the rest runs serve in the test process."""
from __future__ import annotations

import pulsar
import requests

from procs import PATIENCE_S
from serve_procs import quiet_logger

RECEIVE_MS = int(PATIENCE_S * 1000)
T = "persistent://public/default/http-t"


def test_serve_prints_both_urls_and_answers_rest(served_process):
    served = served_process
    assert served.http_url and served.http_url.startswith("http://127.0.0.1:")
    r = requests.get(f"{served.http_url}/admin/v2/clusters", timeout=PATIENCE_S)
    assert r.status_code == 200 and r.json() == ["standalone"]
    look = requests.get(f"{served.http_url}/lookup/v2/topic/persistent/public/default/x",
                        timeout=PATIENCE_S).json()
    assert look["brokerUrl"] == served.url and look["httpUrl"] == served.http_url


def test_the_real_client_over_an_http_service_url(served):
    client = pulsar.Client(served.http_url, operation_timeout_seconds=30,
                           logger=quiet_logger())
    try:
        producer = client.create_producer(T)
        producer.send(b"over http lookup")
        consumer = client.subscribe(T, "s", initial_position=pulsar.InitialPosition.Earliest)
        assert consumer.receive(RECEIVE_MS).data() == b"over http lookup"
    finally:
        client.close()
    stats = requests.get(f"{served.http_url}/admin/v2/persistent/public/default/http-t/stats",
                         timeout=PATIENCE_S).json()
    assert stats["msgInCounter"] == 1 and "s" in stats["subscriptions"]


def test_a_port_out_of_range_is_one_line_and_exit_2(env):
    import subprocess

    from procs import argv

    for flag in ("--port", "--http-port"):
        r = subprocess.run(argv("serve", flag, "99999"), env=env, capture_output=True,
                           text=True, timeout=PATIENCE_S)
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and "no TCP port" in r.stderr
