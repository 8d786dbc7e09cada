"""Operator calls of the Python client: dead letters, peeks, purges and
schedules (docs/protocol.md, ops 13-18 and 29-31).

They run per partition on its leader, as the Go client does, and page
through every partition of the queue; ``Client`` inherits them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import wire

# Dead-letter reasons (docs/protocol.md, DeadFilter).
DEAD_REJECTED = 1
DEAD_RETRIES_EXHAUSTED = 2
DEAD_LEASE_EXPIRED = 3

DEAD_LIST_PAGE = 1000  # dead-list letters per request
DEAD_PEEK_PAGE = 16    # dead-peek letters per request; the server also cuts at 4 MiB
PEEK_MAX = 1000        # the most messages one peek request returns
PEEK_TOTAL_MAX = 100_000  # the most one peek call gathers over its requests
SCHEDULE_EVERY_MIN = 1.0


@dataclass
class DeadLetter:
    """One dead letter. Times are Unix nanoseconds of the leader's clock;
    ``headers`` and ``body`` are set by ``peek_dead_letters`` only."""

    partition: int
    seq: int
    id: str
    reason: int
    reason_text: str = ""
    group: str = ""
    attempts: int = 0
    dead_at: int = 0
    enqueued_at: int = 0
    last_consumer: str = ""
    priority: int = 0
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    history: list = field(default_factory=list)


@dataclass
class Peeked:
    """One live message as a peek shows it (nothing is leased)."""

    partition: int
    seq: int
    id: str
    state: str = ""
    group: str = ""
    attempts: int = 0
    priority: int = 0
    enqueued_at: int = 0
    headers: dict = field(default_factory=dict)
    body: bytes = b""


def parse_dead_letter(m: dict) -> DeadLetter:
    """Decode a DeadLetter record; missing keys are zero."""
    return DeadLetter(partition=m.get("partition") or 0, seq=m.get("seq") or 0, id=m.get("id") or "",
                      reason=m.get("reason") or 0, reason_text=m.get("reason_text") or "",
                      group=m.get("group") or "", attempts=m.get("attempts") or 0,
                      dead_at=m.get("dead_at") or 0, enqueued_at=m.get("enqueued_at") or 0,
                      last_consumer=m.get("last_consumer") or "", priority=m.get("priority") or 0,
                      headers=m.get("headers") or {}, body=_bytes(m.get("body")),
                      history=m.get("history") or [])


def parse_peeked(partition: int, m: dict) -> Peeked:
    """Decode a PeekedMessage record of a partition (no state: ready)."""
    return Peeked(partition=m.get("partition") or partition, seq=m.get("seq") or 0, id=m.get("id") or "",
                  state=m.get("state") or "ready", group=m.get("group") or "",
                  attempts=m.get("attempts") or 0, priority=m.get("priority") or 0,
                  enqueued_at=m.get("enqueued_at") or 0, headers=m.get("headers") or {},
                  body=_bytes(m.get("body")))


def dead_filter(reason: int = 0, group: str = "", text: str = "", after: int = 0,
                limit: int = 0) -> dict:
    """A DeadFilter record; unset keys are left out."""
    return wire.omit_zero([("reason", reason, True), ("group", group, True), ("text", text, True),
                           ("after", after, True), ("limit", limit, True)])


def _bytes(b) -> bytes:
    if b is None:
        return b""
    return b.encode() if isinstance(b, str) else bytes(b)


class OperatorMixin:
    """Dead letters, peeks, purges and schedules; mixed into Client."""

    # ------------------------------------------------------------ dead letters

    def dead_letters(self, queue: str, *, reason: int = 0, group: str = "", text: str = "",
                     limit: int | None = None) -> list[DeadLetter]:
        """List the dead letters the filter selects, without headers and
        bodies, partition by partition in seq order (at most ``limit``)."""
        return self._list_dead(queue, wire.OP_DEAD_LIST, DEAD_LIST_PAGE, reason, group, text, limit)

    def peek_dead_letters(self, queue: str, *, reason: int = 0, group: str = "", text: str = "",
                          limit: int | None = None) -> list[DeadLetter]:
        """``dead_letters`` with headers and bodies."""
        return self._list_dead(queue, wire.OP_DEAD_PEEK, DEAD_PEEK_PAGE, reason, group, text, limit)

    def redrive_dead_letters(self, queue: str, *, reason: int = 0, group: str = "",
                             text: str = "") -> int:
        """Move the selected dead letters back to ready (attempts reset, id
        and group kept); returns how many moved."""
        return self._change_dead(queue, wire.OP_DEAD_REDRIVE, dead_filter(reason, group, text))

    def delete_dead_letters(self, queue: str, *, reason: int = 0, group: str = "",
                            text: str = "") -> int:
        """Delete the selected dead letters; returns how many."""
        return self._change_dead(queue, wire.OP_DEAD_DELETE, dead_filter(reason, group, text))

    def _list_dead(self, queue, op, page, reason, group, text, limit) -> list[DeadLetter]:
        out: list[DeadLetter] = []
        for part in range(self._partitions(queue)):
            after = 0
            while True:
                want = page if limit is None else min(page, limit - len(out))
                if want <= 0:
                    return out
                body = {"queue": queue, "partition": part,
                        "filter": dead_filter(reason, group, text, after, want)}
                resp = self._call(op, body, (queue, part))
                letters = [parse_dead_letter(m) for m in resp.get("letters") or []]
                out.extend(letters)
                nxt = resp.get("next") or 0
                if nxt:  # the answer's byte budget ended the page
                    if nxt <= after or not letters:
                        raise wire.MalformedRequest(f"dead-letter page goes on at {nxt}, not after {after}")
                    after = nxt
                    continue
                if len(letters) < want:
                    break
                after = letters[-1].seq
        return out

    def _change_dead(self, queue: str, op: int, filt: dict) -> int:
        total = 0
        for part in range(self._partitions(queue)):
            body = {"queue": queue, "partition": part, "filter": filt}
            total += self._call(op, body, (queue, part), unknown_ok=False).get("count") or 0
        return total

    # ------------------------------------------------------------ peek and purge

    def peek(self, queue: str, *, max: int = 10, states: list[str] | None = None, group: str = "",
             no_bodies: bool = False) -> list[Peeked]:
        """Read up to ``max`` live messages (ready ones unless ``states``
        names others: ready, delayed, leased, all), oldest first per
        partition, without leasing or changing anything."""
        if not 1 <= max <= PEEK_TOTAL_MAX:
            raise ValueError(f"peek max {max} outside 1..{PEEK_TOTAL_MAX}")
        out: list[Peeked] = []
        for part in range(self._partitions(queue)):
            after = 0
            while len(out) < max:
                body = wire.omit_zero([("queue", queue, False), ("partition", part, False),
                                       ("max", min(PEEK_MAX, max - len(out)), False),
                                       ("after", after, True), ("states", states or [], True),
                                       ("group", group, True), ("no_bodies", no_bodies, True)])
                resp = self._call(wire.OP_PEEK, body, (queue, part))
                out.extend(parse_peeked(part, m) for m in resp.get("messages") or [])
                nxt = resp.get("next") or 0
                if not nxt or nxt <= after:
                    break
                after = nxt
        return out[:max]

    def purge(self, queue: str, *, include_leased: bool = False) -> int:
        """Delete every unleased message of the queue (the leased ones too
        with ``include_leased``); dead letters stay. Returns how many."""
        total = 0
        for part in range(self._partitions(queue)):
            body = wire.omit_zero([("queue", queue, False), ("partition", part, False),
                                   ("include_leased", include_leased, True)])
            total += self._call(wire.OP_PURGE, body, (queue, part), unknown_ok=False).get("count") or 0
        return total

    # ------------------------------------------------------------ schedules

    def create_schedule(self, queue: str, name: str, *, every: float | None = None,
                        cron: str = "", body: bytes = b"", group: str = "",
                        headers: dict[str, str] | None = None, priority: int = 0) -> dict:
        """Create or replace a recurring schedule: every ``every`` seconds
        (a whole number, at least 1) or on a five-field UTC ``cron``; each
        tick sends one message with id ``<name>@<tick in Unix seconds>``.
        Returns the ScheduleStatus record."""
        if (every is None) == (not cron):
            raise ValueError("set exactly one of every and cron")
        if every is not None and (every < SCHEDULE_EVERY_MIN or every != int(every)):
            raise ValueError(f"every {every} must be a whole number of seconds, at least 1")
        if not 0 <= priority <= 9:
            raise ValueError(f"priority {priority} outside 0..9")
        sched = wire.omit_zero([("name", name, False), ("every", int(every or 0) * wire.NS, True),
                                ("cron", cron, True), ("group", group, True),
                                ("headers", headers or {}, True), ("body", body, True),
                                ("priority", priority, True)])
        parts = self._partitions(queue)
        part = wire.partition_for(group or name, parts)
        resp = self._call(wire.OP_SET_SCHEDULE, {"queue": queue, "partition": part, "schedule": sched},
                          (queue, part))
        for other in range(parts):  # a name is unique in the queue
            if other != part:
                self._delete_schedule_in(queue, other, name)
        return resp.get("schedule") or {}

    def schedules(self, queue: str) -> list[dict]:
        """List the queue's schedules (ScheduleStatus records)."""
        out = []
        for part in range(self._partitions(queue)):
            resp = self._call(wire.OP_LIST_SCHEDULES, {"queue": queue, "partition": part}, (queue, part))
            out.extend(resp.get("schedules") or [])
        return out

    def delete_schedule(self, queue: str, name: str) -> bool:
        """Delete a schedule by name; False when there was none."""
        deleted = False
        for part in range(self._partitions(queue)):
            deleted = self._delete_schedule_in(queue, part, name) or deleted
        return deleted

    def _delete_schedule_in(self, queue: str, part: int, name: str) -> bool:
        resp = self._call(wire.OP_DELETE_SCHEDULE, {"queue": queue, "partition": part, "name": name},
                          (queue, part))
        return bool(resp.get("deleted"))
