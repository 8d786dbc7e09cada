"""The client's encoder and decoder against wire/testdata/vectors."""

import glob
import json
import os
import unittest

from ferryclient import wire

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VECTORS = os.path.join(ROOT, "wire", "testdata", "vectors")


def from_json(v):
    """A vector's JSON ``value`` as the Python value msgpack decodes to."""
    if isinstance(v, dict):
        if list(v) == ["$bin"]:
            return bytes.fromhex(v["$bin"])
        return {k: from_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [from_json(x) for x in v]
    return v


def load_vectors():
    """Every frame vector (partition-for.json left out), by name."""
    out = {}
    for path in sorted(glob.glob(os.path.join(VECTORS, "*.json"))):
        with open(path) as f:
            vec = json.load(f)
        if "payload" in vec:
            out[vec["name"]] = vec
    return out


def rebuild_request(op, b):
    """Build a request body with the client's own builders from decoded fields."""
    rcpts = lambda items: [wire.receipt(**r) for r in items]  # noqa: E731
    if op == wire.OP_SEND:
        msgs = [wire.message(m["id"], m.get("body"), m.get("group", ""), m.get("headers"),
                             m.get("delay", 0), m.get("priority", 0)) for m in b["messages"]]
        return wire.send_body(b["queue"], b["partition"], msgs)
    if op == wire.OP_RECEIVE:
        return wire.receive_body(b["queue"], b["partition"], b["max"], b.get("consumer", ""),
                                 b.get("visibility", 0), b.get("wait", 0),
                                 rcpts(b["acks"]) if "acks" in b else None)
    if op == wire.OP_ACK:
        return wire.ack_body(b["queue"], b["partition"], rcpts(b["receipts"]))
    if op == wire.OP_EXTEND:
        items = [wire.extend_item(wire.receipt(**i["receipt"]), i["visibility"])
                 for i in b["items"]]
    elif op == wire.OP_NACK:
        items = [wire.nack_item(wire.receipt(**i["receipt"]), i.get("explicit", False),
                                i.get("delay", 0), i.get("reason", ""), i.get("release", False))
                 for i in b["items"]]
    elif op == wire.OP_REJECT:
        items = [wire.reject_item(wire.receipt(**i["receipt"]), i.get("reason", ""))
                 for i in b["items"]]
    elif op == wire.OP_CREATE_QUEUE:
        return wire.create_queue_body(b["name"], b["config"])
    elif op in (wire.OP_METADATA, wire.OP_DELETE_QUEUE):
        return dict(b)
    else:
        return None
    return wire.items_body(b["queue"], b["partition"], items)


class VectorTest(unittest.TestCase):
    """Each vector's frame from its value, and its value from its frame."""

    @classmethod
    def setUpClass(cls):
        cls.vectors = load_vectors()
        if len(cls.vectors) < 50:
            raise AssertionError(f"only {len(cls.vectors)} vectors found in {VECTORS}")

    def test_encode_and_decode_every_frame(self):
        for name, vec in self.vectors.items():
            with self.subTest(name):
                value = from_json(vec["value"])
                frame = bytes.fromhex(vec["frame"])
                self.assertEqual(wire.encode_frame(value), frame)
                self.assertEqual(frame[4:], bytes.fromhex(vec["payload"]))
                pos = [0]

                def read_exact(n):
                    chunk = frame[pos[0]:pos[0] + n]
                    pos[0] += n
                    return chunk
                self.assertEqual(wire.read_frame(read_exact), value)
                self.assertEqual(pos[0], len(frame))
                if "body" in vec:
                    self.assertEqual(wire.encode_frame(value["body"])[4:], bytes.fromhex(vec["body"]))

    def test_typed_builders_match_requests(self):
        built = 0
        for name, vec in self.vectors.items():
            value = from_json(vec["value"])
            with self.subTest(name):
                if vec["kind"] == "hello":
                    got = wire.hello(value.get("token", ""), value.get("client", ""))
                elif vec["kind"] == "request":
                    body = rebuild_request(value["op"], value.get("body") or {})
                    if body is None:
                        continue
                    got = wire.request(value["id"], value["op"], body)
                else:
                    continue
                self.assertEqual(wire.encode_frame(got).hex(), vec["frame"])
                built += 1
        self.assertGreaterEqual(built, 13)

    def test_error_responses_map_to_exceptions(self):
        for name, vec in self.vectors.items():
            if vec["kind"] != "error":
                continue
            value = from_json(vec["value"])
            with self.subTest(name):
                with self.assertRaises(wire.FerryError) as cm:
                    wire.check_response(value)
                self.assertEqual(cm.exception.code, value["code"])
                self.assertEqual(type(cm.exception).code, value["code"])
                self.assertEqual(cm.exception.leader, value.get("leader", ""))
                retryable = value["code"] in (8, 9, 10, 11, 17)
                self.assertEqual(cm.exception.retryable, retryable)

    def test_answers_decode_to_records(self):
        v = {name: from_json(vec["value"]) for name, vec in self.vectors.items()}
        self.assertEqual(wire.check_response(v["welcome"])["version"], 1)
        body = wire.check_response(v["response-receive"])
        d = wire.parse_delivery("orders", body["messages"][0])
        self.assertEqual((d.partition, d.seq, d.attempt, d.group), (1, 17, 2, "acct-42"))
        self.assertEqual(d.body, b'{"order":1}')
        self.assertEqual(d.deadline - d.enqueued_at, 90 * wire.NS)
        self.assertEqual(d.receipt, {"partition": 1, "seq": 17, "attempt": 2})
        results = wire.check_response(v["response-send"])["results"]
        wire.check_item(results[0])
        self.assertTrue(results[1]["dup"])
        with self.assertRaises(wire.MessageTooLarge):
            wire.check_item(results[2])
        with self.assertRaises(wire.LeaseLost):
            wire.check_item(wire.check_response(v["response-ack"])["results"][1])

    def test_partition_for(self):
        with open(os.path.join(VECTORS, "partition-for.json")) as f:
            cases = json.load(f)["cases"]
        self.assertTrue(cases)
        for c in cases:
            self.assertEqual(wire.partition_for(c["key"], c["partitions"]), c["partition"], c)

    def test_bad_frames_refused(self):
        for data in (b"\0\0\0\0", (wire.FRAME_MAX + 1).to_bytes(4, "big"),
                     b"\0\0\0\x02\x93\x01", b"\0\0\0\x02\x80\x01"):
            with self.subTest(data.hex()), self.assertRaises(wire.ConnectionLost):
                it = iter([data[:4], data[4:]])
                wire.read_frame(lambda n: next(it))


if __name__ == "__main__":
    unittest.main()
