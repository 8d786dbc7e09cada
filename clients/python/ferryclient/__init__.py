"""A Python client for Ferry, written from docs/protocol.md.

    from ferryclient import Client
    with Client(["127.0.0.1:7101"], ca_file="data/pki/ca.pem", token=secret) as c:
        c.send("jobs", b"hello")
        for d in c.receive("jobs", wait=5):
            c.ack(d)
"""

from .client import Client, Connection
from .operator import (DEAD_LEASE_EXPIRED, DEAD_REJECTED, DEAD_RETRIES_EXHAUSTED, DeadLetter,
                       Peeked)
from .wire import (ConnectionLost, Delivery, FerryError, FrameTooLarge, InternalError,
                   InvalidArgument, InvalidQueueConfig, LeaseLost, LimitExceeded,
                   MalformedRequest, MessageNotFound, MessageTooLarge, NotLeader, QueueExists,
                   QueueFull, QueueNotFound, SendResult, Timeout, TooManyConnections,
                   Unauthorized, UnknownOutcome, Unavailable, UnsupportedVersion, error_for,
                   partition_for)

__all__ = [
    "DEAD_LEASE_EXPIRED", "DEAD_REJECTED", "DEAD_RETRIES_EXHAUSTED", "DeadLetter", "Peeked",
    "Client", "Connection", "ConnectionLost", "Delivery", "FerryError", "FrameTooLarge",
    "InternalError", "InvalidArgument", "InvalidQueueConfig", "LeaseLost", "LimitExceeded",
    "MalformedRequest", "MessageNotFound", "MessageTooLarge", "NotLeader", "QueueExists",
    "QueueFull", "QueueNotFound", "SendResult", "Timeout", "TooManyConnections",
    "Unauthorized", "UnknownOutcome", "Unavailable", "UnsupportedVersion", "error_for",
    "partition_for",
]
