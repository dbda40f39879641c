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


class ProtocolError(PulsarctlError):
    """A frame of Pulsar's binary protocol that cannot be read (pulsarctl serve): too short, too
    large, a bad checksum, a command that does not parse. The connection that sent it is closed;
    the server goes on serving the others."""
    hint = "check that the client speaks Pulsar's binary protocol"


class ChecksumMismatch(ProtocolError):
    """A payload whose CRC32C is not the one it carries. Its command parsed (cmd): Pulsar answers
    a SEND's with SEND_ERROR ChecksumError and keeps the connection (Producer.checkAndStartPublish);
    anything else that carries a payload is a frame that cannot be read."""

    def __init__(self, cmd, message: str = "checksum mismatch"):
        super().__init__(message)
        self.cmd = cmd


class NotSupportedYet(PulsarctlError):
    pass


class DecompressionError(PulsarctlError):
    """pulsarctl.compression: an entry's payload does not decompress."""
    hint = "the entry is damaged or was written by a newer pulsarctl; skip it with `topics skip`"


class BacklogQuotaExceeded(PulsarctlError):
    """pulsarctl.broker.backlog_quota: producer_exception."""
    hint = ("acknowledge or skip the backlog, or change the quota with "
            "`pulsarctl namespaces set-backlog-quota`")


class BacklogQuotaHold(BacklogQuotaExceeded):
    """producer_request_hold: the producer waits and tries again until its send timeout."""


class OffloadUnavailable(PulsarctlError):
    """pulsarctl.offload: pyarrow is not installed."""
    hint = "install 'pulsarctl[spark]' (pip install 'pulsarctl[spark]'): it brings pyarrow"


class OffloadedLedgerMissing(PulsarctlError):
    hint = ("the Parquet file of an offloaded ledger is gone or damaged; restore it from a "
            "backup of the offload directory (its path is above)")


class SparkUnavailable(PulsarctlError):
    """pulsarctl.spark: pyspark or pyarrow cannot be imported."""
    hint = "install 'pulsarctl[spark]' (pip install 'pulsarctl[spark]')"


class JvmFailed(PulsarctlError):
    """pulsarctl.spark: Spark's JVM did not start."""
    hint = "install Java 17 or later (java on PATH, or JAVA_HOME set to it)"


class JobFailed(PulsarctlError):
    """pulsarctl.spark.jobs: Spark raised an error that is none of ours."""
    hint = "run again with --traceback for Spark's own report"


class DataLoss(PulsarctlError):
    """pulsarctl.spark._access: entries a scan needs are gone (failOnDataLoss)."""
    hint = ("the entries were trimmed (retention) or the topic was deleted; set the option "
            "failOnDataLoss to false to read what is left")


# -- 2: usage and malformed values -------------------------------------------------------------
class UsageError(PulsarctlError):
    exit_code = 2


class InvalidTopicName(UsageError):
    hint = "use <topic>, <tenant>/<namespace>/<topic> or persistent://<tenant>/<namespace>/<topic>"


class InvalidMessageId(UsageError):
    hint = "message ids look like ledgerId:entryId[:partition[:batchIndex]], e.g. 7:12:-1"


class InvalidValue(UsageError):
    pass


class InvalidPolicy(InvalidValue, ValueError):
    """pulsar-client raises ValueError here; pulsarctl's exit code 2 comes with it."""


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


class PolicyNotSet(NotFound):
    hint = "set it with the matching set- command"


class DaemonNotRunning(NotFound):
    hint = "start one with `pulsarctl daemon start`"


# -- 4: conflicts ------------------------------------------------------------------------------
class Conflict(PulsarctlError):
    exit_code = 4


class ConsumerBusy(Conflict):
    pass


class UnsubscribeRefused(ConsumerBusy):
    """A consumer asked to unsubscribe while another consumer is connected to its subscription:
    Pulsar refuses it and the consumer stays connected (PersistentSubscription.doUnsubscribe's
    ServerMetadataException, MetadataError on the wire)."""
    hint = "close the subscription's other consumers first"


class AlreadyExists(Conflict):
    pass


class CumulativeAckNotAllowed(Conflict):
    hint = "cumulative ack works on Exclusive and Failover subscriptions; ack ids individually"


class TopicTerminated(Conflict):
    pass


class ProducerFenced(Conflict):
    hint = ("another producer holds the topic exclusively: retry when it is gone, or wait for "
            "it with --access-mode WaitForExclusive")


class ProducerBusy(Conflict):
    """BrokerServiceException.ProducerBusyException (and NamingException): a shared producer
    while an exclusive one holds the topic, or a second live producer of the same name."""
    hint = ("an exclusive producer holds the topic, or a producer of that name is connected: "
            "retry when it is gone, or use another --producer-name")


class NotEmpty(Conflict):
    pass


class IncompatibleSchema(Conflict):
    hint = "use the topic's schema type (see `pulsarctl schemas get TOPIC`), or bytes"


class ConsumerAssignError(Conflict):
    """BrokerServiceException.ConsumerAssignException."""
    hint = "close a consumer of this subscription first, or choose other hash ranges"


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


# A command whose reader of stdout went away (`| head`): quiet, and the status a shell shows for
# a program SIGPIPE ends (128 + 13), as git's, cat's or seq's (cli/errmap.py).
STDOUT_CLOSED = 141

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
    8: "refused: authentication failed (a token with a bad signature or expired, a wrong "
       "password)",
    9: "declined: a confirmation was answered no (or not answered); nothing was changed",
    130: "interrupted",
    STDOUT_CLOSED: "the reader of the output went away (a closed pipe: `| head`); nothing is "
                   "said, as when SIGPIPE ends git or cat",
}


# -- 7 -------------------------------------------------------------------------------------------
class PartlyFailed(PulsarctlError):
    """Some messages of a run failed (a dlq drain --exec command's non-zero exit, a dlq replay
    without a target); the others were handled. For cron: it mails only these runs."""
    exit_code = 7


# -- 9 -------------------------------------------------------------------------------------------
class Declined(PulsarctlError):
    """A destructive command asked on a terminal and was not told yes: nothing was changed.
    Not a failure of the command, not a success either: a code of its own (CLI.md)."""
    exit_code = 9
    hint = "answer y to go ahead, or pass -y/--yes"


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


# -- 8: authentication ------------------------------------------------------------------------
class AuthenticationFailed(PulsarctlError):
    """pulsarctl.auth: a token whose signature does not match the key, an expired or malformed
    token, an unknown user or a wrong password (Pulsar's AuthenticationException). The server
    answers it with the protocol's AuthenticationError; `tokens validate` exits 8."""
    exit_code = 8


class NotAuthorized(PulsarctlError):
    """pulsarctl.auth.authorization: the role may not do this (Pulsar's AuthorizationError).
    Only the server raises it: the command line is never subject to roles."""
    exit_code = 8


# -- not an error of the command line ------------------------------------------------------------
class Unsupported(Exception):
    """pulsarctl.spark._columnar: a chunk holds an entry its fast decoder does not read. Raised
    and caught inside that module, which then reads the chunk row by row: never reaches a user,
    so it carries no exit code."""


# -- lessons -------------------------------------------------------------------------------------
class LessonFailed(PulsarctlError):
    """A step of a lesson (`pulsarctl lesson run`) did not end as the lesson expects: the
    lessons are data, run by the test suite, so this is a bug in the lesson, not in what the
    learner did."""
    hint = "this is a bug in the lesson: please report it with the command line above"


# -- remote targets (pulsarctl/remote: a cluster, a `pulsarctl serve`) ----------------------------
class LocalOnly(UsageError):
    """A command, or a flag, that works on a local store only was given a remote target
    (`clock`, `explain`, `lesson`, `daemon`, `receive` then `ack` from another process...):
    said in one line, nothing is done."""
    hint = "run it on the local store with --context local"


class RemoteUnavailable(PulsarctlError):
    """The remote Pulsar did not answer: connection refused, a timeout, a name that does not
    resolve, TLS that does not verify."""
    hint = "check the target's URLs with `pulsarctl context current`"


class RemoteError(PulsarctlError):
    """The remote Pulsar answered with an error that has no code of its own here (HTTP 5xx,
    an error of the client library): its reason, as Pulsar gave it."""
