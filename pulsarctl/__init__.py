"""pulsarctl: Apache Pulsar's messaging model on a local LMDB store."""
from pulsarctl import client, errors
__version__ = "0.1.0"


def __getattr__(name):
    # The client API is imported lazily so that `pulsarctl produce` starts fast.
    if name in ("Client", "ConsumerType", "InitialPosition", "MessageId", "Message",
                "Producer", "Consumer", "Reader", "ConsumerDeadLetterPolicy",
                "PartitionsRoutingMode", "HashingScheme", "BatchingType", "CompressionType"):
        return getattr(client, name)
    if name in ("Timeout",):
        return getattr(errors, name)
    raise AttributeError(name)
