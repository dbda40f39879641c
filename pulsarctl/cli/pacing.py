"""`produce --rate`: the groups of messages a local produce writes in one transaction, and a
remote produce sends before it waits for their receipts, paced so that no more than the rate
per second go out."""
from __future__ import annotations

from pulsarctl import clock as clocks


def paced(msgs, rate: float, chunk: int):
    """Group messages, at most chunk a group, so that no more than rate per second go out
    (real time); no rate: groups of chunk at once."""
    if not rate:
        for i in range(0, len(msgs), chunk):
            yield msgs[i:i + chunk]
        return
    start = clocks.monotonic()
    i = 0
    while i < len(msgs):
        due = int((clocks.monotonic() - start) * rate) + 1
        if due <= i:
            clocks.sleep(max(0.0, (i + 1) / rate - (clocks.monotonic() - start)))
            continue
        j = min(due, len(msgs), i + chunk)
        yield msgs[i:j]
        i = j
