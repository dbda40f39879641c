"""The public Python API, shaped like pulsar-client's `pulsar` package."""
from pulsarctl.client.producer import Producer
from pulsarctl import messages

__all__ = ["Client", "Consumer", "ConsumerType", "InitialPosition", "Producer", "Reader",
           "Message", "MessageId", "ConsumerDeadLetterPolicy", "PartitionsRoutingMode",
           "HashingScheme", "CompressionType", "ProducerAccessMode", "BatchingType"]


def __getattr__(name):
    # Lazy, so `pulsarctl.client.produce` / `.producer` load without the consumer machinery.
    if name == "Producer":
        return Producer
    if name in ("Message", "MessageId"):
        return getattr(messages, name)
    if name in __all__:
        from pulsarctl.client import client  # lazy: one-shot produce never needs it

        return getattr(client, name)
    raise AttributeError(name)
