"""serve's open-file limit: every connection is a file descriptor. At start the soft
RLIMIT_NOFILE goes up to the hard one (a soft limit of 1024 is common; thousands of idle
clients need more); when accepting still fails for want of descriptors, one line says so, not
one per refused connection (asyncio retries the accept a second later by itself)."""
from __future__ import annotations

import errno
import resource

OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def raise_open_files() -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit (as far as the kernel allows); (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass    # a kernel cap below the hard limit (nr_open): keep what we have
    return soft, hard


def log_accept_errors_once(loop, log) -> None:
    """loop's exception handler: the first accept() that fails for want of file descriptors
    is one line on log; the next ones are silent; anything else goes to the default handler."""
    said = False

    def handler(loop, context):
        nonlocal said
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in OUT_OF_FILES and "accept" in \
                context.get("message", ""):
            if not said:
                said = True
                soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
                log(f"cannot accept more connections: {exc.strerror} (open-file limit {soft}); "
                    f"new clients wait until others leave; raise the limit with `ulimit -n`")
            return
        if isinstance(exc, ValueError) and "_start_serving" in repr(context.get("handle")):
            # asyncio's retry of an accept that failed for want of descriptors, firing after
            # the server closed its socket (at stop): nothing to serve, nothing to say
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
