"""pulsarctl serve: Pulsar's binary protocol over the store, for the real clients (Java, Go,
C++, Python, Node). frames.py reads and writes the wire's frames, pulsar_api_pb2.py (generated
from pulsar_api.proto) its commands; listener.py accepts connections (connection.py, one per
client) over one Broker."""
