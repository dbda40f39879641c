"""pulsarctl: Apache Pulsar's messaging model on a local LMDB store."""
__version__ = "0.1.0"


def __getattr__(name):
    # The client API is imported when first asked for: every `pulsarctl ...` command (and
    # `python -m pulsarctl`) imports this package first, and most of them never need the client.
    if name in ("Client", "ConsumerType", "InitialPosition", "MessageId", "Message",
                "Producer", "Consumer", "Reader", "ConsumerDeadLetterPolicy",
                "PartitionsRoutingMode", "HashingScheme", "BatchingType", "CompressionType"):
        from pulsarctl import client  # lazy: see above

        return getattr(client, name)
    if name in ("Timeout",):
        from pulsarctl import errors  # lazy: see above

        return getattr(errors, name)
    if name in ("client", "errors"):
        # `import pulsarctl` then `pulsarctl.client....` worked while this module imported both
        import importlib  # lazy: see above

        return importlib.import_module(f"pulsarctl.{name}")
    raise AttributeError(name)
