"""Frames, records and error codes of the Ferry client protocol, version 1.

Everything here follows docs/protocol.md: a frame is a 4-byte big-endian
length and one msgpack map; records are maps with string keys in table
order, and keys marked "omitted when zero" are left out when zero.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import msgpack

VERSION = 1
CLIENT_NAME = "ferry-py/0.1"
HELLO_MAX = 4096
FRAME_MAX = 33554432
NS = 1_000_000_000

# Op numbers (docs/protocol.md, "Operations").
OP_METADATA = 1
OP_CREATE_QUEUE = 2
OP_DELETE_QUEUE = 4
OP_SEND = 7
OP_RECEIVE = 8
OP_ACK = 9
OP_EXTEND = 10
OP_NACK = 11
OP_REJECT = 12
OP_DEAD_LIST = 13
OP_DEAD_PEEK = 14
OP_DEAD_REDRIVE = 15
OP_DEAD_DELETE = 16
OP_PURGE = 17
OP_PEEK = 18
OP_SET_SCHEDULE = 29
OP_LIST_SCHEDULES = 30
OP_DELETE_SCHEDULE = 31

# QueueConfig fields in bit order (docs/protocol.md, "QueueConfig").
CONFIG_FIELDS = (
    "partitions", "replicas", "visibility_timeout", "max_receives",
    "backoff_base", "backoff_max", "dedup_window", "max_message_bytes",
    "max_depth", "max_bytes", "retention", "max_dead", "max_dead_bytes",
    "dead_retention", "dedup_max_ids", "max_in_flight", "max_delivery_rate",
    "fair_groups",
)


# ---------------------------------------------------------------- errors

class FerryError(Exception):
    """A failure answered by a server (or by the client on its behalf).

    ``code`` is the protocol's error code; ``retryable`` says whether the
    same request may be sent again (at the leader or after a backoff).
    """

    code = 0
    retryable = False

    def __init__(self, message: str = "", code: int | None = None, leader: str = ""):
        if code is not None:
            self.code = code
        self.leader = leader
        self.detail = message
        name = CODE_NAMES.get(self.code, f"code {self.code}") if self.code else ""
        super().__init__(": ".join(s for s in (name, message) if s))


class InternalError(FerryError):
    """Code 1: the server failed unexpectedly; a send's outcome is unknown."""
    code = 1


class MalformedRequest(FerryError):
    """Code 2: a frame, envelope or body could not be decoded."""
    code = 2


class UnsupportedVersion(FerryError):
    """Code 3: the server does not speak this protocol version."""
    code = 3


class InvalidArgument(FerryError):
    """Code 4: a field is out of range."""
    code = 4


class InvalidQueueConfig(FerryError):
    """Code 5: a queue setting is out of range or fixed at creation."""
    code = 5


class QueueNotFound(FerryError):
    """Code 6: the queue does not exist."""
    code = 6


class QueueExists(FerryError):
    """Code 7: a queue of that name exists already."""
    code = 7


class NotLeader(FerryError):
    """Code 8: the node does not lead; ``leader`` is the leader's address when known."""
    code = 8
    retryable = True


class Unavailable(FerryError):
    """Code 9: nothing was done (no leader, no quorum, shutting down)."""
    code = 9
    retryable = True


class Timeout(FerryError):
    """Code 10: started but not confirmed in time; the outcome is unknown."""
    code = 10
    retryable = True


class QueueFull(FerryError):
    """Code 11: the queue or the leader's disk is full; nothing was stored."""
    code = 11
    retryable = True


class MessageTooLarge(FerryError):
    """Code 12: body plus headers exceed the queue's max_message_bytes."""
    code = 12


class LeaseLost(FerryError):
    """Code 13: the receipt names a delivery that is no longer current."""
    code = 13


class MessageNotFound(FerryError):
    """Code 14: no message has that seq (acked, deleted or never there)."""
    code = 14


class FrameTooLarge(FerryError):
    """Code 15: a frame's length is over the receiver's limit."""
    code = 15


class LimitExceeded(FerryError):
    """Code 16: too many queues or partitions, or creates too fast."""
    code = 16


class TooManyConnections(FerryError):
    """Code 17: the node refused the connection (connection limit)."""
    code = 17
    retryable = True


class Unauthorized(FerryError):
    """Code 18: the token is missing, unknown, revoked or lacks the permission."""
    code = 18


class ConnectionLost(FerryError):
    """The connection broke or misbehaved.

    ``sent`` is False when the request surely never reached a server (the
    dial failed); otherwise its outcome is unknown.
    """

    retryable = True

    def __init__(self, message: str, sent: bool = True):
        super().__init__(message, code=0)
        self.sent = sent


class UnknownOutcome(FerryError):
    """A send gave up without an answer: the messages may or may not be stored.

    ``ids`` are the message ids; resending them to the same queue is safe.
    """

    def __init__(self, message: str, ids: list[str]):
        super().__init__(message, code=0)
        self.ids = ids


CODE_NAMES = {
    1: "internal error", 2: "malformed request",
    3: "unsupported protocol version", 4: "invalid argument",
    5: "invalid queue config", 6: "queue not found", 7: "queue exists",
    8: "not leader", 9: "unavailable", 10: "timeout", 11: "queue full",
    12: "message too large", 13: "lease lost", 14: "message not found",
    15: "frame too large", 16: "limit exceeded", 17: "too many connections",
    18: "unauthorized",
}
_ERROR_CLASSES = {cls.code: cls for cls in FerryError.__subclasses__() if cls.code}


def error_for(code: int, message: str = "", leader: str = "") -> FerryError:
    """Return the exception for a protocol error code; unknown codes are final."""
    cls = _ERROR_CLASSES.get(code)
    if cls is None:
        return FerryError(message, code=code)
    return cls(message, leader=leader)


# ---------------------------------------------------------------- framing

def encode_frame(value: dict) -> bytes:
    """Return the frame of one msgpack map: length prefix, then payload."""
    payload = msgpack.packb(value, use_bin_type=True)
    return struct.pack(">I", len(payload)) + payload


def decode_payload(payload: bytes) -> dict:
    """Decode one frame's payload; it must be exactly one msgpack map."""
    try:
        value = msgpack.unpackb(payload, raw=False, strict_map_key=True,
                                max_array_len=131072, max_map_len=131072)
    except Exception as exc:  # msgpack raises several types (ExtraData, ValueError...)
        raise ConnectionLost(f"undecodable frame from server: {exc}") from exc
    if not isinstance(value, dict):
        raise ConnectionLost("frame from server is not a map")
    return value


def read_frame(read_exact, limit: int = FRAME_MAX) -> dict:
    """Read one frame with ``read_exact(n) -> bytes`` and decode its payload."""
    (length,) = struct.unpack(">I", read_exact(4))
    if length == 0 or length > limit:
        raise ConnectionLost(f"frame length {length} out of range")
    return decode_payload(read_exact(length))


def omit_zero(pairs) -> dict:
    """Build a map from (key, value, omitted_when_zero) in table order."""
    return {k: v for k, v, omit in pairs if not (omit and not v)}


def ns(seconds: float | None) -> int:
    """Convert seconds to integer nanoseconds (None is 0)."""
    return 0 if seconds is None else int(round(seconds * NS))


# ---------------------------------------------------------------- bodies

def hello(token: str = "", client: str = CLIENT_NAME) -> dict:
    """The first frame of a connection (a bare map, not an envelope)."""
    return omit_zero([("magic", "FERRY", False), ("version", VERSION, False),
                      ("client", client, True), ("token", token, True)])


def request(req_id: int, op: int, body: dict | None) -> dict:
    """A request envelope; the body is embedded as a map, omitted when empty."""
    return omit_zero([("id", req_id, False), ("op", op, False), ("body", body, True)])


PRIORITY_MAX = 9


def message(id: str, body: bytes | None, group: str = "", headers: dict | None = None,
            delay_ns: int = 0, priority: int = 0) -> dict:
    """A Message record: id, group?, headers?, body (nil when absent), delay?,
    priority? (0..PRIORITY_MAX, 9 the most urgent; 0, the default, omitted)."""
    if not 0 <= priority <= PRIORITY_MAX:
        raise ValueError(f"priority {priority} out of range 0..{PRIORITY_MAX}")
    return omit_zero([("id", id, False), ("group", group, True),
                      ("headers", headers, True), ("body", body, False),
                      ("delay", delay_ns, True), ("priority", priority, True)])


def receipt(partition: int, seq: int, attempt: int) -> dict:
    """A Receipt record: partition, seq and attempt, always present."""
    return {"partition": partition, "seq": seq, "attempt": attempt}


def send_body(queue: str, partition: int, messages: list[dict]) -> dict:
    """The body of a send (op 7)."""
    return {"queue": queue, "partition": partition, "messages": messages}


def receive_body(queue: str, partition: int, max: int, consumer: str = "",
                 visibility_ns: int = 0, wait_ns: int = 0,
                 acks: list[dict] | None = None) -> dict:
    """The body of a receive (op 8)."""
    return omit_zero([("queue", queue, False), ("partition", partition, False),
                      ("consumer", consumer, True), ("max", max, False),
                      ("visibility", visibility_ns, True), ("wait", wait_ns, True),
                      ("acks", acks, True)])


def ack_body(queue: str, partition: int, receipts: list[dict]) -> dict:
    """The body of an ack (op 9)."""
    return {"queue": queue, "partition": partition, "receipts": receipts}


def items_body(queue: str, partition: int, items: list[dict]) -> dict:
    """The body of an extend, nack or reject (ops 10-12)."""
    return {"queue": queue, "partition": partition, "items": items}


def extend_item(rcpt: dict, visibility_ns: int) -> dict:
    """An ExtendItem: the receipt and the new lease length (always present)."""
    return {"receipt": rcpt, "visibility": visibility_ns}


def nack_item(rcpt: dict, explicit: bool = False, delay_ns: int = 0, reason: str = "",
              release: bool = False) -> dict:
    """A NackItem: explicit delay, reason and release are omitted when zero."""
    return omit_zero([("receipt", rcpt, False), ("explicit", explicit, True),
                      ("delay", delay_ns, True), ("reason", reason, True),
                      ("release", release, True)])


def reject_item(rcpt: dict, reason: str = "") -> dict:
    """A reject item: the receipt and an optional reason."""
    return omit_zero([("receipt", rcpt, False), ("reason", reason, True)])


def create_queue_body(name: str, config: dict) -> dict:
    """The body of a create-queue (op 2); ``set`` names every field given."""
    bits = 0
    for key in config:
        if key not in CONFIG_FIELDS:
            raise ValueError(f"unknown queue setting {key!r}")
        bits |= 1 << CONFIG_FIELDS.index(key)
    cfg = {k: config[k] for k in CONFIG_FIELDS if config.get(k)}
    return omit_zero([("name", name, False), ("config", cfg, False), ("set", bits, True)])


# ---------------------------------------------------------------- answers

@dataclass
class Delivery:
    """One leased message; ``partition``, ``seq`` and ``attempt`` are its receipt.

    ``enqueued_at`` and ``deadline`` are Unix nanoseconds by the leader's
    clock; ``received_at`` is this client's ``time.monotonic()`` when the
    receive was sent, and ``visibility`` the lease length asked for (seconds,
    0 when the queue's default applied), for extending in time.
    """

    queue: str
    partition: int
    seq: int
    attempt: int
    id: str
    body: bytes
    group: str = ""
    headers: dict = field(default_factory=dict)
    enqueued_at: int = 0
    deadline: int = 0
    received_at: float = 0.0
    visibility: float = 0.0
    priority: int = 0

    @property
    def receipt(self) -> dict:
        """The receipt record that settles this delivery."""
        return receipt(self.partition, self.seq, self.attempt)


@dataclass
class SendResult:
    """Where a sent message was stored: ``dup`` when its id was seen before."""

    id: str
    partition: int
    seq: int
    dup: bool = False


def parse_delivery(queue: str, m: dict) -> Delivery:
    """Decode a Delivery record; missing keys are zero."""
    body = m.get("body") or b""
    if isinstance(body, str):
        body = body.encode()
    return Delivery(queue=queue, partition=m.get("partition") or 0, seq=m.get("seq") or 0,
                    attempt=m.get("attempt") or 0, id=m.get("id") or "", body=body,
                    group=m.get("group") or "", headers=m.get("headers") or {},
                    enqueued_at=m.get("enqueued_at") or 0, deadline=m.get("deadline") or 0,
                    priority=m.get("priority") or 0)


def check_item(result: dict | None) -> None:
    """Raise the error of an ItemResult or SendResult, if it has one."""
    code = (result or {}).get("code") or 0
    if code:
        raise error_for(code, result.get("error") or "")


def check_response(resp: dict) -> dict:
    """Return a response's body, or raise the error the response carries."""
    code = resp.get("code") or 0
    if code:
        raise error_for(code, resp.get("error") or "", resp.get("leader") or "")
    return resp.get("body") or {}


def partition_for(key: str, partitions: int) -> int:
    """The partition of a message key (group, else id): FNV-1a 32 modulo count."""
    if not key or partitions < 2:
        return 0
    h = 2166136261
    for b in key.encode("utf-8"):
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h % partitions
