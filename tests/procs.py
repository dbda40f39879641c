"""Helpers of the multi-process tests: reap what a test started, and wait on several processes
at once without one blocking on a full pipe."""
import subprocess
import threading


def reap(procs) -> None:
    """Kill (if still running) and reap every process; close its pipes."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for f in (p.stdin, p.stdout, p.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass


def communicate_all(procs, inputs=None, timeout=60):
    """communicate() with several processes at once (each in a thread). Returns
    [(stdout, stderr), ...]; a process that does not finish fails the test."""
    inputs = inputs or [None] * len(procs)
    results: list = [None] * len(procs)

    def one(i):
        try:
            results[i] = procs[i].communicate(inputs[i], timeout=timeout)
        except BaseException as exc:  # reported below
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(procs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    for i, r in enumerate(results):
        if r is None or isinstance(r, BaseException):
            raise AssertionError(f"process {procs[i].args[3:]} did not finish: {r!r}")
    return results
