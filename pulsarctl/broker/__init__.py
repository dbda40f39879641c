"""Pulsar's semantics over the store. Never prints, never imports typer or rich."""
from pulsarctl.broker.service import Broker

__all__ = ["Broker"]
