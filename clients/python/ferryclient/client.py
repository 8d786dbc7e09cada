"""A small synchronous Ferry client: connections, routing, retries, consume.

One connection per node, one request at a time on each (a lock guards
it), so the client may be shared by threads. Requests for a partition go
to its leader, learned from metadata and corrected by ``not leader``
answers; retries follow docs/protocol.md ("Redirects and refreshes",
"Retrying and what a client must keep").
"""

from __future__ import annotations

import logging
import random
import select
import socket
import ssl
import threading
import time
import uuid

from . import wire
from .operator import OperatorMixin
from .wire import (ConnectionLost, Delivery, FerryError, InternalError, LeaseLost,
                   MessageNotFound, NotLeader, QueueNotFound, SendResult, Timeout,
                   TooManyConnections, Unavailable, UnknownOutcome, ns)

log = logging.getLogger("ferryclient")

REQUEST_MARGIN = 10.0  # seconds beyond the server's own limits
SERVER_RUN_LIMIT = 30.0  # the server answers every request within 30 s
DURATION_SETTINGS = {"visibility_timeout", "backoff_base", "backoff_max",
                     "dedup_window", "retention", "dead_retention"}


def split_addr(addr: str) -> tuple[str, int]:
    """Split ``host:port`` (or ``[v6]:port``) into host and port."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    return host.strip("[]"), int(port)


class Connection:
    """One connection to one node: TLS (optional), hello, then requests."""

    def __init__(self, addr: str, context: ssl.SSLContext | None, token: str,
                 timeout: float = 5.0):
        self.addr = addr
        self._lock = threading.Lock()
        self._next_id = 1
        host, port = split_addr(addr)
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=host)
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionLost(f"dial {addr}: {exc}", sent=False) from exc
        self._sock = sock
        try:
            self._write(wire.encode_frame(wire.hello(token)))
            welcome = wire.read_frame(self._read_exact)
        except ConnectionLost as exc:
            self.close()
            raise ConnectionLost(f"hello to {addr}: {exc}", sent=False) from exc
        if welcome.get("id") != 0 or welcome.get("code"):
            self.close()
            err = wire.error_for(welcome.get("code") or 2, welcome.get("error") or "no welcome")
            raise err
        body = welcome.get("body") or {}
        if body.get("version") != wire.VERSION:
            self.close()
            raise ConnectionLost(f"{addr} speaks version {body.get('version')}", sent=False)
        self.node_id = body.get("node_id") or ""
        self.max_frame = body.get("max_frame_bytes") or wire.FRAME_MAX

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self._sock.recv(n - len(buf))
            except (OSError, ssl.SSLError) as exc:
                raise ConnectionLost(f"read from {self.addr}: {exc}") from exc
            if not chunk:
                raise ConnectionLost(f"{self.addr} closed the connection")
            buf += chunk
        return bytes(buf)

    def _write(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionLost(f"write to {self.addr}: {exc}") from exc

    def stale(self) -> bool:
        """True when an idle connection has something to read: the peer closed it."""
        if self._sock is None:
            return True
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def call(self, op: int, body: dict | None, timeout: float) -> dict:
        """Send one request and return its response (errors not yet raised)."""
        with self._lock:
            if self._sock is None:
                raise ConnectionLost(f"connection to {self.addr} is closed", sent=False)
            req_id, self._next_id = self._next_id, self._next_id + 1
            frame = wire.encode_frame(wire.request(req_id, op, body))
            if len(frame) - 4 > self.max_frame:
                raise wire.FrameTooLarge(f"request of {len(frame) - 4} bytes")
            try:
                self._sock.settimeout(timeout)
                self._write(frame)
                resp = wire.read_frame(self._read_exact)
            except ConnectionLost:
                self._close_locked()
                raise
            if resp.get("id") == req_id:
                return resp
            self._close_locked()
            if resp.get("id") == 0 and resp.get("code"):
                raise wire.error_for(resp["code"], resp.get("error") or "")
            raise ConnectionLost(f"{self.addr} answered id {resp.get('id')}, want {req_id}")

    def _close_locked(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None

    def close(self) -> None:
        """Close the connection; later calls fail with ConnectionLost."""
        self._close_locked()


class Client(OperatorMixin):
    """A Ferry client for a cluster reached through ``seeds`` (host:port list).

    ``ca_file`` is the cluster CA bundle (TLS); ``insecure=True`` speaks
    plain TCP instead. ``token`` is sent in every hello. ``retry_timeout``
    bounds how long one call keeps retrying redirects, unavailable leaders
    and broken connections. Durations are seconds (floats).
    """

    def __init__(self, seeds: list[str], *, ca_file: str | None = None, token: str = "",
                 insecure: bool = False, cert_file: str | None = None,
                 key_file: str | None = None, consumer: str = "",
                 retry_timeout: float = 30.0, connect_timeout: float = 5.0):
        if not seeds:
            raise ValueError("no seed addresses")
        if not insecure and not ca_file:
            raise ValueError("ca_file is required unless insecure=True")
        self._context = None
        if not insecure:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_verify_locations(cafile=ca_file)
            if cert_file:
                ctx.load_cert_chain(cert_file, key_file)
            self._context = ctx
        self._token = token
        self._seeds = list(seeds)
        self._nodes: list[str] = []
        self._rotor = 0
        self.consumer = consumer
        self.retry_timeout = retry_timeout
        self.connect_timeout = connect_timeout
        self._lock = threading.RLock()
        self._conns: dict[str, Connection] = {}
        self._queues: dict[str, dict] = {}
        self._meta_index = 0
        self._meta_leader = ""
        self._recv_next: dict[str, int] = {}

    # ------------------------------------------------------------ plumbing

    def close(self) -> None:
        """Close every connection."""
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for c in conns:
            c.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _connection(self, addr: str) -> Connection:
        with self._lock:
            conn = self._conns.get(addr)
            if conn is not None and conn.stale():
                conn.close()
                conn = None
            if conn is None:
                conn = Connection(addr, self._context, self._token, self.connect_timeout)
                self._conns[addr] = conn
            return conn

    def _drop(self, addr: str) -> None:
        with self._lock:
            conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close()

    def _any_node(self) -> str:
        with self._lock:
            addrs = list(dict.fromkeys(self._nodes + self._seeds))
            self._rotor += 1
            return addrs[self._rotor % len(addrs)]

    def _route(self, route) -> str:
        """The address for a route: None (any node), "meta", or (queue, partition)."""
        if route is None:
            return self._any_node()
        if route == "meta":
            return self._meta_leader or self._any_node()
        queue, part = route
        info = self._queues.get(queue) or self._refresh(queue)
        parts = info.get("partitions") or []
        addr = parts[part].get("leader_addr") if part < len(parts) else ""
        return addr or self._any_node()

    def _learn_leader(self, route, addr: str) -> None:
        with self._lock:
            if route == "meta":
                self._meta_leader = addr
            elif route is not None:
                parts = (self._queues.get(route[0]) or {}).get("partitions") or []
                if route[1] < len(parts):
                    parts[route[1]]["leader_addr"] = addr

    def _forget(self, route) -> None:
        with self._lock:
            if route == "meta":
                self._meta_leader = ""
            elif route is not None:
                self._queues.pop(route[0], None)

    def _call(self, op: int, body: dict, route=None, *, unknown_ok: bool = True,
              timeout: float | None = None, item_key: str | None = None,
              retry_also: tuple = (), ok_on_repeat: tuple = ()) -> dict:
        """Send a request where ``route`` says and retry as the protocol allows.

        ``unknown_ok``: the request is safe to repeat when its outcome is
        unknown (broken connection, code 10). ``item_key`` names the
        results list whose first item's code counts as the answer's.
        ``ok_on_repeat``: errors that mean success after such a repeat.
        """
        deadline = time.monotonic() + self.retry_timeout
        pause, redirects, repeated = 0.02, 0, False
        addr = self._route(route)
        timeout = timeout or SERVER_RUN_LIMIT + REQUEST_MARGIN
        while True:
            try:
                resp = wire.check_response(self._connection(addr).call(op, body, timeout))
                if item_key:
                    wire.check_item((resp.get(item_key) or [{}])[0])
                return resp
            except NotLeader as exc:
                err = exc
                if exc.leader and exc.leader != addr and redirects < 3:
                    self._learn_leader(route, exc.leader)
                    addr, redirects = exc.leader, redirects + 1
                    continue
                self._forget(route)
            except (Unavailable, TooManyConnections) as exc:
                err = exc
                self._forget(route)
            except (Timeout, ConnectionLost, *retry_also) as exc:
                err = exc
                unknown = not isinstance(exc, ConnectionLost) or exc.sent
                if unknown and not unknown_ok:
                    raise
                repeated = repeated or unknown
                if isinstance(exc, ConnectionLost):
                    self._drop(addr)
                    self._forget(route)
            except QueueNotFound:
                self._forget(route)
                raise
            except ok_on_repeat:
                if repeated:
                    return {}
                raise
            if time.monotonic() + pause > deadline:
                raise err
            time.sleep(pause * random.uniform(0.5, 1.0))
            pause, redirects = min(pause * 2, 0.25), 0
            try:
                addr = self._route(route)
            except FerryError:
                addr = self._any_node()

    # ------------------------------------------------------------ metadata

    def metadata(self, queue: str = "") -> dict:
        """Ask any node for the nodes and queue placement; caches the answer."""
        body = self._call(wire.OP_METADATA, {"queue": queue} if queue else None)
        with self._lock:
            index = body.get("meta_index") or 0
            if index >= self._meta_index:
                self._meta_index = index
                self._nodes = [n["client_addr"] for n in body.get("nodes") or []
                               if n.get("client_addr") and n.get("state", 0) in (0, 1, 2)]
            for q in body.get("queues") or []:
                self._queues[q["name"]] = q
        return body

    def _refresh(self, queue: str) -> dict:
        self.metadata(queue)
        info = self._queues.get(queue)
        if info is None:
            raise QueueNotFound(queue)
        return info

    def _partitions(self, queue: str) -> int:
        info = self._queues.get(queue) or self._refresh(queue)
        return (info.get("config") or {}).get("partitions") or 1

    def create_queue(self, name: str, **config) -> dict:
        """Create a queue; settings by QueueConfig key, durations in seconds.

        Returns the QueueInfo record with the effective config.
        """
        cfg = {k: ns(v) if k in DURATION_SETTINGS else v for k, v in config.items()}
        body = self._call(wire.OP_CREATE_QUEUE, wire.create_queue_body(name, cfg), "meta",
                          unknown_ok=False)
        return body.get("queue") or {}

    def delete_queue(self, name: str) -> None:
        """Delete a queue with all its messages."""
        self._call(wire.OP_DELETE_QUEUE, {"name": name}, "meta", unknown_ok=False)
        self._forget((name, 0))

    # ------------------------------------------------------------ messages

    def send(self, queue: str, body: bytes, *, id: str = "", group: str = "",
             headers: dict[str, str] | None = None, delay: float = 0.0,
             priority: int = 0) -> SendResult:
        """Send one message; retries keep its id, so it is stored at most once.

        ``priority`` is 0 (the default) to 9, the most urgent: a receive takes
        the highest priority ready first (never reordering a group); out of
        range raises ValueError before anything is sent.

        Raises UnknownOutcome (with the id) when it gives up without knowing
        whether the message was stored.
        """
        id = id or uuid.uuid4().hex
        part = wire.partition_for(group or id, self._partitions(queue))
        msg = wire.message(id, body, group, headers, ns(delay), priority)
        try:
            resp = self._call(wire.OP_SEND, wire.send_body(queue, part, [msg]), (queue, part),
                              item_key="results", retry_also=(InternalError,))
        except (ConnectionLost, Timeout, InternalError) as exc:
            raise UnknownOutcome(f"send of {id}: {exc}", [id]) from exc
        result = resp["results"][0]
        return SendResult(id, part, result.get("seq") or 0, bool(result.get("dup")))

    def receive(self, queue: str, *, max: int = 1, wait: float = 0.0,
                visibility: float | None = None, partition: int | None = None) -> list[Delivery]:
        """Lease up to ``max`` messages for ``visibility`` seconds (None: the
        queue's default), waiting up to ``wait`` seconds (at most 20) for one.

        Without ``partition`` it rotates over the queue's partitions.
        """
        end = time.monotonic() + wait
        count = self._partitions(queue) if partition is None else 1
        while True:
            for _ in range(count):
                part = partition if partition is not None else self._next_partition(queue)
                got = self._receive_one(queue, part, max, visibility, 0.0)
                if got:
                    return got
            left = end - time.monotonic()
            if left <= 0:
                return []
            part = partition if partition is not None else self._next_partition(queue)
            got = self._receive_one(queue, part, max, visibility, min(left, 1.0 if count > 1 else left))
            if got or time.monotonic() >= end:
                return got

    def _next_partition(self, queue: str) -> int:
        with self._lock:
            n = self._recv_next.get(queue, 0)
            self._recv_next[queue] = n + 1
        return n % self._partitions(queue)

    def _receive_one(self, queue, part, max, visibility, wait) -> list[Delivery]:
        body = wire.receive_body(queue, part, max, self.consumer, ns(visibility), ns(wait))
        sent_at = time.monotonic()
        resp = self._call(wire.OP_RECEIVE, body, (queue, part), unknown_ok=False,
                          timeout=wait + SERVER_RUN_LIMIT + REQUEST_MARGIN)
        out = []
        for m in resp.get("messages") or []:
            d = wire.parse_delivery(queue, m)
            d.received_at, d.visibility = sent_at, visibility or 0.0
            out.append(d)
        return out

    def _settle(self, op: int, d: Delivery, body: dict, **kw) -> None:
        self._call(op, body, (d.queue, d.partition), item_key="results", **kw)

    def ack(self, d: Delivery) -> None:
        """Delete a delivered message. Raises LeaseLost if it was received again."""
        self._settle(wire.OP_ACK, d, wire.ack_body(d.queue, d.partition, [d.receipt]),
                     ok_on_repeat=(MessageNotFound,))

    def nack(self, d: Delivery, *, delay: float | None = None, reason: str = "",
             release: bool = False) -> None:
        """Give a message back: after ``delay`` seconds, or the queue's backoff
        when None; ``release`` undoes the delivery (the attempt does not count)."""
        item = wire.nack_item(d.receipt, delay is not None, ns(delay), reason, release)
        self._settle(wire.OP_NACK, d, wire.items_body(d.queue, d.partition, [item]))

    def extend(self, d: Delivery, visibility: float) -> None:
        """Set the lease's deadline to now + ``visibility`` seconds."""
        item = wire.extend_item(d.receipt, ns(visibility))
        self._settle(wire.OP_EXTEND, d, wire.items_body(d.queue, d.partition, [item]))
        d.received_at, d.visibility = time.monotonic(), visibility

    def reject(self, d: Delivery, reason: str = "") -> None:
        """Dead-letter a message at once."""
        item = wire.reject_item(d.receipt, reason)
        self._settle(wire.OP_REJECT, d, wire.items_body(d.queue, d.partition, [item]))

    # ------------------------------------------------------------ consume

    def consume(self, queue: str, handler, *, stop: threading.Event | None = None,
                limit: int | None = None, wait: float = 1.0, visibility: float | None = None,
                nack_delay: float | None = None) -> int:
        """Receive messages one at a time and call ``handler(delivery)``.

        A return acks the message; an exception nacks it (after
        ``nack_delay`` seconds, or the queue's backoff when None). While the
        handler runs the lease is extended every half lease. Retryable
        failures of a receive are logged and the loop goes on; others raise.
        Returns how many messages were handled, once ``stop`` is set or
        ``limit`` reached.
        """
        handled = 0
        while not (stop is not None and stop.is_set()) and (limit is None or handled < limit):
            try:
                got = self.receive(queue, max=1, wait=wait, visibility=visibility)
            except FerryError as exc:
                if not exc.retryable:
                    raise
                log.warning("receive from %s: %s", queue, exc)  # retried after a backoff
                continue
            for d in got:
                self._handle(d, handler, nack_delay)
                handled += 1
        return handled

    def _lease_length(self, d: Delivery) -> float:
        if d.visibility:
            return d.visibility
        config = (self._queues.get(d.queue) or self._refresh(d.queue)).get("config") or {}
        return (config.get("visibility_timeout") or 30 * wire.NS) / wire.NS

    def _handle(self, d: Delivery, handler, nack_delay: float | None) -> None:
        keeper = _LeaseKeeper(self, d, self._lease_length(d))
        try:
            handler(d)
        except Exception as exc:  # the handler's failure: nack and go on
            keeper.stop()
            log.warning("handler failed on %s seq %d: %r", d.queue, d.seq, exc)
            self._quietly(self.nack, d, delay=nack_delay, reason=repr(exc)[:256])
            return
        keeper.stop()
        self._quietly(self.ack, d)

    @staticmethod
    def _quietly(settle, d: Delivery, **kw) -> None:
        try:
            settle(d, **kw)
        except (LeaseLost, MessageNotFound) as exc:
            log.warning("settling %s seq %d: %s", d.queue, d.seq, exc)


class _LeaseKeeper:
    """Extends one delivery's lease every half lease until stopped."""

    def __init__(self, client: Client, d: Delivery, lease: float):
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(client, d, lease), daemon=True)
        self._thread.start()

    def _run(self, client: Client, d: Delivery, lease: float) -> None:
        while not self._stopped.wait(max(0.0, d.received_at + lease / 2 - time.monotonic())):
            try:
                client.extend(d, lease)
            except FerryError as exc:
                log.warning("extending %s seq %d: %s", d.queue, d.seq, exc)
                return

    def stop(self) -> None:
        """Stop extending and wait for an extend under way to finish."""
        self._stopped.set()
        self._thread.join()
