"""The client against a real three-node ferryd cluster over TLS with tokens."""

import select
import threading
import time
import unittest
import uuid

from ferryclient import wire
from ferryclient import (DEAD_REJECTED, Client, Connection, LeaseLost, MessageNotFound,
                         QueueNotFound, Unauthorized)

from .cluster import Cluster, wait_until


class ClusterTest(unittest.TestCase):
    """One cluster for every test; each test its own queue."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        try:
            cls.cluster.start_all()
        except BaseException:
            cls.cluster.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def setUp(self):
        self.client = self.new_client()

    def tearDown(self):
        self.client.close()
        self.assertEqual(self.cluster.crashed(), [], self.cluster.log_tails())

    def new_client(self, **kw):
        """A client with the admin token, seeded with every node."""
        kw.setdefault("token", self.cluster.token)
        return Client(self.cluster.client, ca_file=self.cluster.ca, consumer=self.id(), **kw)

    def make_queue(self, **config):
        """Create a queue named after the test and return its name."""
        name = f"{self._testMethodName.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
        self.client.create_queue(name, **config)
        return name

    def drain(self, queue, idle=1.0):
        """Receive and ack until a receive waiting ``idle`` s finds nothing."""
        got = []
        while True:
            batch = self.client.receive(queue, max=100, wait=idle)
            if not batch:
                return got
            for d in batch:
                self.client.ack(d)
            got += batch

    def test_send_receive_ack(self):
        q = self.make_queue(partitions=2)
        res = self.client.send(q, b"hello", group="g1", headers={"k": "v"})
        self.assertGreater(res.seq, 0)
        self.assertFalse(res.dup)
        again = self.client.send(q, b"hello", id=res.id, group="g1")
        self.assertEqual((again.seq, again.partition, again.dup), (res.seq, res.partition, True))
        [d] = self.client.receive(q, wait=5)
        self.assertEqual((d.id, d.body, d.group, d.headers, d.attempt, d.seq),
                         (res.id, b"hello", "g1", {"k": "v"}, 1, res.seq))
        self.assertGreater(d.deadline, d.enqueued_at)
        self.client.ack(d)
        self.assertEqual(self.client.receive(q, wait=0), [])
        with self.assertRaises(MessageNotFound):
            self.client.ack(d)

    def test_priority_goes_first(self):
        q = self.make_queue()
        for i in range(5):
            self.client.send(q, b"bulk", id=f"bulk-{i}")
        self.client.send(q, b"urgent", id="urgent", priority=9)
        [d] = self.client.receive(q, wait=5)
        self.assertEqual((d.id, d.priority), ("urgent", 9))
        self.client.ack(d)
        with self.assertRaises(ValueError):
            self.client.send(q, b"x", priority=10)

    def test_nack_with_delay(self):
        q = self.make_queue()
        self.client.send(q, b"later")
        [d] = self.client.receive(q, wait=5)
        nacked_at = time.monotonic()
        self.client.nack(d, delay=2.0, reason="not yet")
        polls = 0
        while True:
            got = self.client.receive(q, wait=0.5)
            polls += 1
            if got:
                break
            self.assertLess(time.monotonic() - nacked_at, 10, "never redelivered")
        self.assertGreaterEqual(time.monotonic() - nacked_at, 2.0, "redelivered before its delay")
        self.assertGreater(polls, 1)
        self.assertEqual((got[0].seq, got[0].attempt), (d.seq, 2))
        self.client.ack(got[0])

    def test_extend(self):
        q = self.make_queue(visibility_timeout=1.0)
        self.client.send(q, b"slow")
        [d] = self.client.receive(q, wait=5)
        self.client.extend(d, 8.0)
        other = self.new_client()
        self.addCleanup(other.close)
        # Past the first lease (1 s) the message must stay leased.
        while time.monotonic() - d.received_at < 3.0:
            self.assertEqual(other.receive(q, wait=0.5), [], "redelivered during an extended lease")
        self.client.extend(d, 8.0)
        self.client.ack(d)
        with self.assertRaises(MessageNotFound):
            self.client.extend(d, 1.0)

    def test_lease_lost(self):
        q = self.make_queue(visibility_timeout=1.0, backoff_base=0.05, backoff_max=0.1)
        self.client.send(q, b"x")
        [first] = self.client.receive(q, wait=5)
        second = wait_until("the redelivery", lambda: self.client.receive(q, wait=1), timeout=15)
        self.assertEqual((second[0].seq, second[0].attempt), (first.seq, 2))
        for settle in (self.client.ack, self.client.extend, self.client.nack,
                       self.client.reject):
            with self.subTest(settle.__name__), self.assertRaises(LeaseLost) as cm:
                settle(first, **({"visibility": 5.0} if settle == self.client.extend else {}))
            self.assertEqual(cm.exception.code, 13)
            self.assertFalse(cm.exception.retryable)
        self.client.ack(second[0])

    def test_redirect_from_a_stale_leader(self):
        q = self.make_queue(partitions=3)
        wait_until("every partition led", lambda: all(
            p.get("leader_addr") for p in self.client.metadata(q)["queues"][0]["partitions"]))
        for p in self.client._queues[q]["partitions"]:  # point each at a node not leading it
            p["leader_addr"] = next(a for a in self.cluster.client if a != p["leader_addr"])
        codes = self.spy_codes()
        sent = {self.client.send(q, str(i).encode()).id for i in range(12)}
        self.assertIn(8, codes, "no not-leader answer was followed")
        self.assertEqual({d.id for d in self.drain(q)}, sent)

    def spy_codes(self):
        """Record the code of every response until the test ends."""
        codes, orig = [], Connection.call

        def call(conn, op, body, timeout):
            resp = orig(conn, op, body, timeout)
            codes.append(resp.get("code") or 0)
            return resp
        Connection.call = call
        self.addCleanup(setattr, Connection, "call", orig)
        return codes

    def leader_of(self, q):
        """The client address of partition 0's leader, checked by a receive there."""
        def check():
            addr = self.client.metadata(q)["queues"][0]["partitions"][0].get("leader_addr")
            conn = Connection(addr, self.client._context, self.cluster.token)
            try:
                resp = conn.call(wire.OP_RECEIVE, wire.receive_body(q, 0, 1), 10)
            finally:
                conn.close()
            return addr if not resp.get("code") else None
        return wait_until("a leader of " + q, check)

    def test_leader_killed_before_answering(self):
        res, copies = self.kill_leader_mid_send(answered=False)
        self.assertEqual(copies, 1)

    def test_leader_killed_after_committing(self):
        res, copies = self.kill_leader_mid_send(answered=True)
        self.assertTrue(res.dup, "the retry stored a second copy")
        self.assertEqual(copies, 1)

    def kill_leader_mid_send(self, answered):
        """SIGKILL partition 0's leader once a send is written to it: at once,
        or (``answered``) once its answer arrived, which the client then loses.
        Returns the send's result and how many copies of the message came out."""
        q = self.make_queue()
        leader_addr = self.leader_of(q)
        victim = self.cluster.client.index(leader_addr)
        msg_id, attempts = "the-one-" + uuid.uuid4().hex, []
        orig_write = Connection._write

        def write_then_kill(conn, data):
            orig_write(conn, data)
            if msg_id.encode() not in data:
                return
            attempts.append(conn.addr)
            if conn.addr == leader_addr and self.cluster.procs[victim]:
                if answered:  # the answer is here: the message is committed
                    self.assertTrue(select.select([conn._sock], [], [], 10)[0])
                self.cluster.kill(victim)
                if answered:
                    conn._sock.close()  # the answer is lost with the connection
        Connection._write = write_then_kill
        try:
            res = self.client.send(q, b"once", id=msg_id)
        finally:
            Connection._write = orig_write
        self.assertIsNone(self.cluster.procs[victim], f"leader never sent to: {attempts}")
        # Sent to the leader, which died before its answer was read, then resent elsewhere.
        self.assertGreater(len(attempts), attempts.index(leader_addr) + 1, attempts)
        self.assertNotEqual(attempts[-1], leader_addr, attempts)
        self.assertEqual(self.client.send(q, b"once", id=msg_id).seq, res.seq)
        ids = [d.id for d in self.drain(q)]
        self.cluster.start(victim)
        self.cluster.wait_ready()
        return res, ids.count(msg_id)

    def test_consume_acks_and_nacks(self):
        q = self.make_queue(visibility_timeout=5.0, backoff_base=0.05, backoff_max=0.1)
        for name in ("a", "b", "fails-once", "c"):
            self.client.send(q, name.encode(), id=name)
        seen, handled = [], []

        def handler(d):
            seen.append((d.id, d.attempt))
            handled.append(d)
            if d.id == "fails-once" and d.attempt == 1:
                raise RuntimeError("first try fails")
        self.assertEqual(self.client.consume(q, handler, limit=5, wait=5), 5)
        self.assertEqual(sorted(seen), [("a", 1), ("b", 1), ("c", 1),
                                        ("fails-once", 1), ("fails-once", 2)])
        for d in handled:  # every message was acked by the loop
            with self.assertRaises(MessageNotFound):
                self.client.ack(d)

    def test_consume_extends_a_long_handler(self):
        q = self.make_queue(visibility_timeout=2.0)
        self.client.send(q, b"slow", id="slow")
        other = self.new_client()
        self.addCleanup(other.close)
        stolen, checked = [], threading.Event()

        def probe(started):
            # Another consumer polls for 5 s (two and a half leases) while the handler runs.
            while time.monotonic() - started < 5.0:
                stolen.extend(other.receive(q, wait=0.5))
            checked.set()

        def handler(d):
            handled.append(d)
            threading.Thread(target=probe, args=(time.monotonic(),)).start()
            self.assertTrue(checked.wait(30))
        handled = []
        self.assertEqual(self.client.consume(q, handler, limit=1, wait=5), 1)
        self.assertEqual(stolen, [], "redelivered while the handler ran")
        self.assertEqual(handled[0].attempt, 1)
        with self.assertRaises(MessageNotFound):
            self.client.ack(handled[0])

    def test_errors(self):
        with self.new_client(token="ferry_not-a-real-token") as bad:
            with self.assertRaises(Unauthorized):
                bad.metadata()
        with self.assertRaises(QueueNotFound):
            self.client.send("no-such-queue", b"x")

    def test_dead_letters_listed_peeked_redriven_deleted(self):
        q = self.make_queue(partitions=2)
        for i in range(4):
            self.client.send(q, b"bad-%d" % i, id=f"d{i}", headers={"n": str(i)})
        got = []
        while len(got) < 4:
            got += self.client.receive(q, max=4, wait=2)
        for d in got:
            self.client.reject(d, reason="poison " + d.id)
        letters = self.client.dead_letters(q)
        self.assertEqual(sorted(l.id for l in letters), ["d0", "d1", "d2", "d3"])
        self.assertTrue(all(l.reason == DEAD_REJECTED and l.reason_text == "poison " + l.id
                            and l.body == b"" for l in letters))
        peeked = {l.id: l for l in self.client.peek_dead_letters(q, text="poison d1")}
        self.assertEqual(list(peeked), ["d1"])
        self.assertEqual((peeked["d1"].body, peeked["d1"].headers), (b"bad-1", {"n": "1"}))
        self.assertEqual(len(self.client.dead_letters(q, limit=3)), 3)
        self.assertEqual(self.client.redrive_dead_letters(q, text="poison d2"), 1)
        again = self.client.receive(q, max=1, wait=2)
        self.assertEqual([(d.id, d.attempt) for d in again], [("d2", 1)])
        self.client.ack(again[0])
        self.assertEqual(self.client.delete_dead_letters(q), 3)
        self.assertEqual(self.client.dead_letters(q), [])

    def test_peek_and_purge(self):
        q = self.make_queue(partitions=2)
        for i in range(5):
            self.client.send(q, b"m%d" % i, id=f"p{i}", group=f"g{i % 2}")
        ready = self.client.peek(q, max=10)
        self.assertEqual(sorted(p.id for p in ready), [f"p{i}" for i in range(5)])
        self.assertTrue(all(p.state == "ready" and p.body == b"m" + p.id[1:].encode() for p in ready))
        self.assertEqual(sorted(p.id for p in self.client.peek(q, max=10, group="g1")), ["p1", "p3"])
        self.assertEqual(len(self.client.peek(q, max=2)), 2)
        leased = self.client.receive(q, max=1, wait=2)
        self.assertEqual(len(leased), 1)
        self.assertEqual([p.id for p in self.client.peek(q, max=10, states=["leased"], no_bodies=True)],
                         [leased[0].id])
        self.assertEqual(self.client.purge(q), 4)
        self.assertEqual(self.client.peek(q, max=10, states=["all"])[0].id, leased[0].id)
        self.assertEqual(self.client.purge(q, include_leased=True), 1)
        with self.assertRaises(MessageNotFound):
            self.client.ack(leased[0])
        with self.assertRaises(ValueError):
            self.client.peek(q, max=0)

    def test_schedules(self):
        q = self.make_queue(partitions=3)
        status = self.client.create_schedule(q, "tick", every=1, body=b"t", headers={"k": "v"}, priority=3)
        self.assertEqual((status["name"], status["every"]), ("tick", wire.NS))
        self.assertEqual([s["name"] for s in self.client.schedules(q)], ["tick"])
        got = self.client.receive(q, max=1, wait=5)
        self.assertEqual(len(got), 1)
        d = got[0]
        self.assertTrue(d.id.startswith("tick@"), d.id)
        self.assertEqual((d.body, d.headers, d.priority), (b"t", {"k": "v"}, 3))
        self.client.ack(d)
        # Moving it to a group keeps one schedule of that name in the queue.
        self.client.create_schedule(q, "tick", cron="0 0 1 1 *", group="acct-7")
        listed = self.client.schedules(q)
        self.assertEqual([(s["name"], s.get("cron"), s.get("group")) for s in listed],
                         [("tick", "0 0 1 1 *", "acct-7")])
        self.assertTrue(self.client.delete_schedule(q, "tick"))
        self.assertFalse(self.client.delete_schedule(q, "tick"))
        self.assertEqual(self.client.schedules(q), [])
        for bad in ({}, {"every": 1, "cron": "* * * * *"}, {"every": 0.5}, {"every": 1, "priority": 10}):
            with self.assertRaises(ValueError):
                self.client.create_schedule(q, "bad", **bad)


if __name__ == "__main__":
    unittest.main()
