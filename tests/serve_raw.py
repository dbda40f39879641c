"""A raw client of Pulsar's binary protocol for the serve tests: frames built with
pulsarctl/serve/frames.py and sent over a plain socket, so that a test can be the bad client
the real pulsar-client never is. A module of its own beside serve_procs.py (a test never
imports a conftest)."""
from __future__ import annotations

import socket
import struct

from procs import PATIENCE_S
from pulsarctl.serve import frames
from pulsarctl.serve import pulsar_api_pb2 as api

T = api.BaseCommand
READ_LIMIT = 64 * 1024 * 1024


def command(type_, field: str, **values) -> bytes:
    """A simple command's frame: BaseCommand(type_) with its field set to values."""
    cmd = api.BaseCommand(type=type_)
    sub = getattr(cmd, field)
    sub.SetInParent()
    for k, v in values.items():
        setattr(sub, k, v)
    return frames.command(cmd)


def send(producer_id: int, seq: int, payload: bytes = b"x", batch=None) -> bytes:
    """A SEND of one message, or (batch: a list of payloads) of one batch of them."""
    cmd = api.BaseCommand(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = producer_id, seq
    meta = api.MessageMetadata(producer_name=f"raw-{producer_id}", sequence_id=seq,
                               publish_time=1)
    if batch is not None:
        cmd.send.num_messages = len(batch)
        meta.num_messages_in_batch = len(batch)
        payload = frames.batch_payload([(api.SingleMessageMetadata(payload_size=0), p)
                                        for p in batch])
    return frames.payload_command(cmd, meta, payload)


def ack(mid, consumer_id: int, request_id: int) -> bytes:
    """An individual ACK of one message id (MessageIdData) with a request id, as a
    receipt-waiting client sends it."""
    cmd = api.BaseCommand(type=T.ACK)
    cmd.ack.consumer_id, cmd.ack.ack_type, cmd.ack.request_id = consumer_id, 0, request_id
    cmd.ack.message_id.add().CopyFrom(mid)
    return frames.command(cmd)


def corpus(topic: str = "persistent://public/default/fuzzed") -> list[bytes]:
    """Valid frames of most commands a client sends: the seeds that fuzzing mutates."""
    return [
        command(T.CONNECT, "connect", client_version="raw", protocol_version=20),
        command(T.PING, "ping"),
        command(T.PONG, "pong"),
        command(T.LOOKUP, "lookupTopic", topic=topic, request_id=1),
        command(T.PARTITIONED_METADATA, "partitionMetadata", topic=topic, request_id=2),
        command(T.PRODUCER, "producer", topic=topic, producer_id=1, request_id=3),
        send(1, 0, b"fuzz"),
        send(1, 1, batch=[b"a", b"bb", b"ccc"]),
        command(T.SUBSCRIBE, "subscribe", topic=topic, subscription="fuzz", subType=1,
                consumer_id=1, request_id=4),
        command(T.FLOW, "flow", consumer_id=1, messagePermits=100),
        command(T.CLOSE_PRODUCER, "close_producer", producer_id=1, request_id=5),
        command(T.CLOSE_CONSUMER, "close_consumer", consumer_id=1, request_id=6),
        command(T.GET_TOPICS_OF_NAMESPACE, "getTopicsOfNamespace", namespace="public/default",
                request_id=7),
    ]


class Raw:
    """One connection to serve on 127.0.0.1:port. rcvbuf: a small receive buffer, for a client
    that stops reading and should fill it soon."""

    def __init__(self, port: int, rcvbuf: int | None = None, timeout: float = PATIENCE_S):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self):
        """The next frame from the server as (command, metadata, payload); None once the
        server closed the connection."""
        while True:
            if len(self.buf) >= 4:
                (total,) = struct.unpack_from(">I", self.buf)
                if len(self.buf) >= 4 + total:
                    body, self.buf = self.buf[4:4 + total], self.buf[4 + total:]
                    return frames.parse(body)
            try:
                chunk = self.sock.recv(1 << 20)
            except (ConnectionResetError, BrokenPipeError):
                chunk = b""
            if not chunk:
                return None
            self.buf += chunk

    def expect(self, type_, pong: bool = True):
        """The next frame of type_ (answering PINGs on the way unless pong is False); fails
        if the connection ends first."""
        while True:
            got = self.read()
            assert got is not None, f"connection closed while waiting for {T.Type.Name(type_)}"
            if got[0].type == type_:
                return got
            if got[0].type == T.PING and pong:
                self.send(command(T.PONG, "pong"))

    def handshake(self) -> None:
        self.send(command(T.CONNECT, "connect", client_version="raw", protocol_version=20))
        self.expect(T.CONNECTED)

    def producer(self, topic: str, producer_id: int = 1) -> None:
        self.send(command(T.PRODUCER, "producer", topic=topic, producer_id=producer_id,
                          request_id=producer_id))
        self.expect(T.PRODUCER_SUCCESS)

    def closed_by_server(self) -> bool:
        """Read (and drop) whatever comes until the server closes the connection; the socket's
        timeout bounds the wait."""
        while self.read() is not None:
            pass
        return True

    def close(self) -> None:
        self.sock.close()
