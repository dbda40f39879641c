"""The public Python API, shaped like pulsar-client's `pulsar` package."""
from pulsarctl.client.client import (
    Client, Consumer, ConsumerType, InitialPosition, Producer, Reader,
)
from pulsarctl.messages import Message, MessageId

__all__ = ["Client", "Consumer", "ConsumerType", "InitialPosition", "Producer", "Reader",
           "Message", "MessageId"]
