"""The peer's half of `perf compare --service-url`: the real pulsar-client running the same
batched produce and receive + acknowledge code as perf_compare runs on the Python API, in a
process of its own, as a user's application would run it.

perf_compare runs this file by its path (`python -I perf_peer.py URL TOPIC N`, the payload on
stdin: the same bytes as the Python API's), so the
process imports the real `pulsar` package and the standard library only: no pulsarctl module,
and the client keeps its own default logger. (Given a Python logger, every pulsar-client in a
process produced at 45-71k msg/s instead of 111-216k: measured in the same process as pulsarctl
with that logger, the peer looked twice as slow as it is.) The client's own log goes to this
process's stdout, which perf_compare discards; the result is the last line of stderr, JSON."""
import json
import logging
import sys
import time


def main(argv: list[str]) -> dict:
    import pulsar  # lazy: the real pulsar-client is optional (the test extra has it)

    url, topic, n = argv[0], argv[1], int(argv[2])
    payload = sys.stdin.buffer.read()
    client = pulsar.Client(url, operation_timeout_seconds=30)
    try:
        p = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                   block_if_queue_full=True, max_pending_messages=10000)
        t0 = time.perf_counter()
        for _ in range(n):
            p.send_async(payload, None)
        p.flush()
        produce_s = time.perf_counter() - t0
        p.close()
        c = client.subscribe(topic, "compare", consumer_type=pulsar.ConsumerType.Shared,
                             initial_position=pulsar.InitialPosition.Earliest)
        t0 = time.perf_counter()
        for _ in range(n):
            c.acknowledge(c.receive(10000))
        consume_s = time.perf_counter() - t0
        c.close()
    finally:
        client.close()
    return {"produceSeconds": produce_s, "consumeSeconds": consume_s,
            "pulsarctlModules": sorted(m for m in sys.modules if m.split(".")[0] in
                                       ("pulsarctl", "store")),
            "loggingConfigured": bool(logging.getLogger().handlers)}


if __name__ == "__main__":
    try:
        print(json.dumps(main(sys.argv[1:])), file=sys.stderr)
    except Exception as exc:  # the client's own exceptions (ConnectError, Timeout, ...)
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), file=sys.stderr)
        sys.exit(1)
