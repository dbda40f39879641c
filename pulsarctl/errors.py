"""One exception tree. Each class carries its exit code (CLI.md's table); every error has a
message and a hint saying what to do next. The CLI maps them to output in exactly one place."""
from __future__ import annotations


class PulsarctlError(Exception):
    exit_code = 1
    hint = ""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def line(self) -> str:
        """The one line printed on stderr."""
        msg = " ".join(self.message.split())
        return f"error: {msg}" + (f"; {self.hint}" if self.hint else "")


# -- 1: plain errors ---------------------------------------------------------------------------
class StoreUnavailable(PulsarctlError):
    hint = "pass --store PATH (or set PULSARCTL_STORE) to use another store"


class MessageTooLarge(PulsarctlError):
    hint = ("raise it with `pulsarctl brokers update-dynamic-config --config maxMessageSize "
            "--value N`")


class NotSupportedYet(PulsarctlError):
    pass


# -- 2: usage and malformed values -------------------------------------------------------------
class UsageError(PulsarctlError):
    exit_code = 2


class InvalidTopicName(UsageError):
    hint = "use <topic>, <tenant>/<namespace>/<topic> or persistent://<tenant>/<namespace>/<topic>"


class InvalidMessageId(UsageError):
    hint = "message ids look like ledgerId:entryId[:partition[:batchIndex]], e.g. 7:12:-1"


class InvalidValue(UsageError):
    pass


# -- 3: not found ------------------------------------------------------------------------------
class NotFound(PulsarctlError):
    exit_code = 3


class TopicNotFound(NotFound):
    hint = "list topics with `pulsarctl topics list public/default`"


class SubscriptionNotFound(NotFound):
    pass


class MessageNotFound(NotFound):
    pass


class TenantNotFound(NotFound):
    hint = "list tenants with `pulsarctl tenants list`"


class NamespaceNotFound(NotFound):
    hint = "list namespaces with `pulsarctl namespaces list <tenant>`"


class ConsumerNotFound(NotFound):
    pass


# -- 4: conflicts ------------------------------------------------------------------------------
class Conflict(PulsarctlError):
    exit_code = 4


class ConsumerBusy(Conflict):
    pass


class AlreadyExists(Conflict):
    pass


class CumulativeAckNotAllowed(Conflict):
    hint = "cumulative ack works on Exclusive and Failover subscriptions; ack ids individually"


class TopicTerminated(Conflict):
    pass


class ProducerFenced(Conflict):
    hint = ("another producer holds the topic exclusively: retry when it is gone, or wait for "
            "it with --access-mode WaitForExclusive")


class NotEmpty(Conflict):
    pass


# -- 5, 6, 130 ---------------------------------------------------------------------------------
class LockBusy(PulsarctlError):
    exit_code = 5


class NothingToDo(PulsarctlError):
    exit_code = 6


class Timeout(PulsarctlError):
    """receive() timed out (pulsar.Timeout in pulsar-client)."""
    exit_code = 6


class Interrupted(PulsarctlError):
    exit_code = 130


EXIT_CODES = {
    0: "ok",
    1: "error (for example a message over the maximum size, a damaged store, a full disk)",
    2: "usage: bad arguments or malformed values (topic names, message ids, durations)",
    3: "not found (topic, subscription, message, tenant, namespace)",
    4: "conflict (ConsumerBusy, already exists, cumulative ack not allowed, topic terminated)",
    5: "lock busy",
    6: "nothing to do (with --fail-if-empty)",
    7: "partly failed: some messages could not be handled and stay where they were (dlq drain "
       "--exec, dlq replay); the others were",
    130: "interrupted",
}


# -- 7 -------------------------------------------------------------------------------------------
class PartlyFailed(PulsarctlError):
    """Some messages of a run failed (a dlq drain --exec command's non-zero exit, a dlq replay
    without a target); the others were handled. For cron: it mails only these runs."""
    exit_code = 7


# -- 1: a damaged store, a full disk ------------------------------------------------------------
class DamagedStore(PulsarctlError):
    """A store file is not what LMDB wrote (store.StoreDamaged): refused before it is mapped."""
    hint = ("run `pulsarctl doctor` to see what is wrong, or `pulsarctl doctor --salvage "
            "NEW_STORE` to copy what is still readable into a new store")


class DiskFull(PulsarctlError):
    """The store's file system is full (store.StoreDiskFull); nothing was half-written. The
    message carries what to do: `disk full writing <path>: free space or move the store`."""
    hint = ""

    def __init__(self, path: str):
        super().__init__(f"disk full writing {path}: free space or move the store (--store)")
        self.path = path
