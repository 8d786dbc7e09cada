package wire_test

// Test vectors of the client protocol, for clients written in other
// languages: each file of testdata/vectors holds one frame as this
// package writes it (hex) and its payload decoded as plain JSON. The
// format is described in docs/protocol.md ("Test vectors"). The tests
// below regenerate every file from the Go values and fail on any
// difference (go test ./wire/ -run Vectors -update rewrites them), decode
// every frame back into its Go value, rebuild every payload from its JSON
// alone with the smallest-form msgpack rules a second-language encoder
// follows, and check that docs/protocol.md names every op and code.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/wire"
)

var updateVectors = flag.Bool("update", false, "rewrite testdata/vectors from the Go values")

// vectorDir holds the vector files; protocolDoc is the protocol's description.
const (
	vectorDir    = "testdata/vectors"
	protocolDoc  = "../docs/protocol.md"
	partitionFor = "partition-for"
)

// Sample times: 2026-01-01T00:00:00Z and later, Unix nanoseconds.
const (
	t0 = int64(1_767_225_600_000_000_000)
	t1 = t0 + int64(30*time.Second)
)

// vector is one frame: its kind (hello, welcome, request, response or
// error), the Go value a peer writes, the op whose body it carries (0 for
// the hello and connection-level answers) and that body's Go value, as a
// pointer of the type wire.NewRequestBody or wire.NewResponseBody returns
// (a *wire.Welcome for the welcome).
type vector struct {
	name, doc, kind string
	frame           any
	op              wire.Op
	body            any
}

// mustRequest builds a request vector.
func mustRequest(name, doc string, id uint64, op wire.Op, body any) vector {
	req, err := wire.NewRequest(id, op, body)
	if err != nil {
		panic(err)
	}
	return vector{name: name, doc: doc, kind: "request", frame: req, op: op, body: body}
}

// mustResponse builds a successful answer vector.
func mustResponse(name, doc string, id uint64, op wire.Op, body any) vector {
	resp, err := wire.NewResponse(id, body)
	if err != nil {
		panic(err)
	}
	return vector{name: name, doc: doc, kind: "response", frame: resp, op: op, body: body}
}

// failure builds an error answer vector; op is the op of the refused
// request (0 for a connection-level answer, id 0).
func failure(name, doc string, id uint64, op wire.Op, code wire.Code, msg, leader string) vector {
	return vector{name: name, doc: doc, kind: "error", frame: wire.Response{ID: id, Code: code, Error: msg, Leader: leader}, op: op}
}

// allVectors returns every vector, in the order the tests check them.
func allVectors() []vector {
	var out []vector
	for _, part := range [][]vector{handshakeVectors(), exampleVectors(), catalogVectors(), sendReceiveVectors(),
		settleVectors(), deadVectors(), adminVectors(), errorVectors()} {
		out = append(out, part...)
	}
	return out
}

func handshakeVectors() []vector {
	hello := wire.Hello{Magic: wire.Magic, Version: wire.ProtocolVersion, Client: "ferry-py/0.1",
		Token: "ferry_RXhhbXBsZS10b2tlbi1ub3QtYS1yZWFsLXNlY3JldC0wMDA"}
	welcome := &wire.Welcome{Version: wire.ProtocolVersion, NodeID: "node1", Cluster: "prod", Server: "ferryd"}
	return []vector{
		{name: "hello", doc: "The client's first frame: magic, protocol version, client name and token.", kind: "hello", frame: hello},
		{name: "hello-no-token", doc: "A hello to a node that runs without tokens.", kind: "hello",
			frame: wire.Hello{Magic: wire.Magic, Version: wire.ProtocolVersion, Client: "ferry-py/0.1"}},
		{name: "welcome", doc: "The server's answer to an accepted hello: a response with id 0 whose body is the welcome.",
			kind: "welcome", frame: wire.Response{ID: 0, Body: mustBody(welcome)}, body: welcome},
	}
}

// exampleVectors are the worked example of docs/protocol.md: a send, a
// receive and an ack on queue "jobs" (one partition).
func exampleVectors() []vector {
	return []vector{
		mustRequest("example-send", "Worked example: send one message to partition 0 of queue jobs.", 1, wire.OpSend,
			&wire.SendRequest{Queue: "jobs", Messages: []wire.Message{{ID: "m-1", Body: []byte("hi")}}}),
		mustResponse("example-send-answer", "Worked example: the message was stored as seq 1.", 1, wire.OpSend,
			&wire.SendResponse{Results: []wire.SendResult{{Seq: 1}}}),
		mustRequest("example-receive", "Worked example: lease one message, waiting up to 5 s.", 2, wire.OpReceive,
			&wire.ReceiveRequest{Queue: "jobs", Consumer: "w1", Max: 1, Wait: 5 * time.Second}),
		mustResponse("example-receive-answer", "Worked example: the leased message; its receipt is partition 0, seq 1, attempt 1.",
			2, wire.OpReceive, &wire.ReceiveResponse{Messages: []wire.Delivery{{Seq: 1, Attempt: 1, ID: "m-1",
				Body: []byte("hi"), EnqueuedAt: t0, Deadline: t1}}}),
		mustRequest("example-ack", "Worked example: ack the delivery by its receipt.", 3, wire.OpAck,
			&wire.AckRequest{Queue: "jobs", Receipts: []wire.Receipt{{Seq: 1, Attempt: 1}}}),
		mustResponse("example-ack-answer", "Worked example: the ack succeeded (an empty result is OK).", 3, wire.OpAck,
			&wire.AckResponse{Results: []wire.ItemResult{{}}}),
	}
}

// sampleConfig is a queue's effective configuration as a server reports it.
func sampleConfig() wire.QueueConfig {
	return wire.QueueConfig{Partitions: 2, Replicas: 3, VisibilityTimeout: time.Minute, MaxReceives: 10,
		BackoffBase: time.Second, BackoffMax: 5 * time.Minute, DedupWindow: 5 * time.Minute, MaxMessageBytes: 1 << 20,
		MaxDead: 10_000, MaxDeadBytes: 1 << 30, DedupMaxIDs: 1_000_000}
}

func sampleQueue() wire.QueueInfo {
	return wire.QueueInfo{Name: "orders", Config: sampleConfig(), Partitions: []wire.PartitionInfo{
		{Index: 0, Leader: "node1", LeaderAddr: "ferry-1.example.net:7100", Replicas: []string{"node1", "node2", "node3"}},
		{Index: 1, Leader: "node2", LeaderAddr: "ferry-2.example.net:7100", Replicas: []string{"node2", "node3", "node1"}},
	}}
}

func catalogVectors() []vector {
	nodes := []wire.NodeInfo{
		{ID: "node1", ClientAddr: "ferry-1.example.net:7100", RaftAddr: "ferry-1.example.net:7000",
			HTTPAddr: "ferry-1.example.net:7200", State: wire.NodeAlive},
		{ID: "node2", ClientAddr: "ferry-2.example.net:7100", RaftAddr: "ferry-2.example.net:7000",
			HTTPAddr: "ferry-2.example.net:7200", State: wire.NodeAlive},
		{ID: "node3", ClientAddr: "ferry-3.example.net:7100", RaftAddr: "ferry-3.example.net:7000",
			HTTPAddr: "ferry-3.example.net:7200", State: wire.NodeSuspect},
	}
	stats := wire.PartitionStats{Partition: 0, Leader: "node1", AppliedIndex: 5120, Ready: 40, Eligible: 38, Delayed: 2,
		InFlight: 5, Dead: 1, Bytes: 61_440, DeadBytes: 900, OldestEligibleAge: int64(1500 * time.Millisecond), Groups: 3,
		LastSeq: 4711, Counters: wire.Counters{Sent: 4711, Duplicates: 3, Leased: 4700, Acked: 4660, Nacked: 20, Expired: 4, DeadLettered: 1}}
	return []vector{
		mustRequest("request-metadata", "Metadata of one queue (an empty queue asks for every queue).", 4, wire.OpMetadata,
			&wire.MetadataRequest{Queue: "orders"}),
		mustResponse("response-metadata", "Nodes, the queue's effective config and its partitions' leaders.", 4, wire.OpMetadata,
			&wire.MetadataResponse{Nodes: nodes, Queues: []wire.QueueInfo{sampleQueue()}, MetaIndex: 42}),
		mustRequest("request-create-queue", "Create orders with 2 partitions and a 60 s visibility timeout (set = partitions|visibility_timeout).",
			5, wire.OpCreateQueue, &wire.CreateQueueRequest{Name: "orders",
				Config: wire.QueueConfig{Partitions: 2, VisibilityTimeout: time.Minute}, Set: wire.FieldPartitions | wire.FieldVisibilityTimeout}),
		mustResponse("response-create-queue", "The new queue with its effective config.", 5, wire.OpCreateQueue,
			&wire.CreateQueueResponse{Queue: sampleQueue()}),
		mustRequest("request-update-queue", "Turn deduplication off: dedup_window 0, named in set.", 6, wire.OpUpdateQueue,
			&wire.UpdateQueueRequest{Name: "orders", Set: wire.FieldDedupWindow}),
		mustResponse("response-update-queue", "The queue with its new config.", 6, wire.OpUpdateQueue,
			&wire.UpdateQueueResponse{Queue: sampleQueue()}),
		mustRequest("request-delete-queue", "Delete queue scratch.", 7, wire.OpDeleteQueue, &wire.DeleteQueueRequest{Name: "scratch"}),
		mustResponse("response-delete-queue", "An empty body: the queue is gone.", 7, wire.OpDeleteQueue, &wire.DeleteQueueResponse{}),
		mustRequest("request-list-queues", "Queues whose names start with ord.", 8, wire.OpListQueues, &wire.ListQueuesRequest{Prefix: "ord"}),
		mustResponse("response-list-queues", "One queue matched.", 8, wire.OpListQueues,
			&wire.ListQueuesResponse{Queues: []wire.QueueInfo{sampleQueue()}}),
		mustRequest("request-queue-stats", "Figures of every partition of orders.", 9, wire.OpQueueStats, &wire.QueueStatsRequest{Queue: "orders"}),
		mustResponse("response-queue-stats", "Partition 0 answered; partition 1 is led elsewhere (ask its leader).", 9, wire.OpQueueStats,
			&wire.QueueStatsResponse{Queue: "orders", Partitions: []wire.PartitionStats{stats,
				{Partition: 1, Code: wire.CodeNotLeader, Error: "not leader (leader is node2)"}}}),
		mustRequest("request-queue-settings", "The queue settings with their defaults and ranges.", 10, wire.OpQueueSettings,
			&wire.QueueSettingsRequest{}),
		mustResponse("response-queue-settings", "Three of the settings a server reports (a real answer lists every one).", 10,
			wire.OpQueueSettings, &wire.QueueSettingsResponse{Settings: []wire.SettingInfo{
				{Name: "partitions", Kind: "count", Default: 1, Min: 1, Max: 64, Help: "number of partitions", Fixed: true},
				{Name: "visibility_timeout", Kind: "duration", Default: int64(30 * time.Second), Max: int64(12 * time.Hour),
					Help: "lease a receive gets when it names none"},
				{Name: "dedup_window", Kind: "duration", Default: int64(5 * time.Minute), Max: int64(24 * time.Hour), Zero: "off",
					Help: "how long message ids are remembered to drop duplicate sends"},
			}}),
	}
}

func sendReceiveVectors() []vector {
	group := "acct-42"
	p := wire.PartitionFor(group, 2)
	return []vector{
		mustRequest("request-send", "Three messages of group acct-42 to the group's partition of orders; the second has a header and a delay.",
			11, wire.OpSend, &wire.SendRequest{Queue: "orders", Partition: p, Messages: []wire.Message{
				{ID: "01KDX6Y2G0A5C3S9W1V7N4Q8R2", Group: group, Body: []byte(`{"order":1}`)},
				{ID: "01KDX6Y2G0A5C3S9W1V7N4Q8R3", Group: group, Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
					Body: []byte(`{"order":2}`), Delay: 5 * time.Second},
				{ID: "01KDX6Y2G0A5C3S9W1V7N4Q8R4", Group: group, Body: []byte(`{"order":3}`)},
			}}),
		mustResponse("response-send", "Stored as seq 17; a duplicate of seq 9; refused (over max_message_bytes).", 11, wire.OpSend,
			&wire.SendResponse{Results: []wire.SendResult{{Seq: 17}, {Seq: 9, Duplicate: true},
				{Code: wire.CodeMessageTooLarge, Error: "message too large: 2000000 bytes (limit 1048576)"}}}),
		mustRequest("request-receive", "Ack one receipt, then lease up to 10 messages for 30 s, waiting up to 20 s.", 12, wire.OpReceive,
			&wire.ReceiveRequest{Queue: "orders", Partition: p, Consumer: "worker-1", Max: 10, Visibility: 30 * time.Second,
				Wait: 20 * time.Second, Acks: []wire.Receipt{{Partition: p, Seq: 15, Attempt: 1}}}),
		mustResponse("response-receive", "One delivery (its second attempt) and the result of the carried ack.", 12, wire.OpReceive,
			&wire.ReceiveResponse{Messages: []wire.Delivery{{Partition: p, Seq: 17, Attempt: 2, ID: "01KDX6Y2G0A5C3S9W1V7N4Q8R2",
				Group: group, Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
				Body: []byte(`{"order":1}`), EnqueuedAt: t0, Deadline: t1 + int64(time.Minute)}},
				AckResults: []wire.ItemResult{{}}}),
		mustRequest("request-peek", "Read up to 10 ready messages after seq 16 without leasing them.", 13, wire.OpPeek,
			&wire.PeekRequest{Queue: "orders", Partition: p, Max: 10, MaxBytes: 65536, AfterSeq: 16}),
		mustResponse("response-peek", "One ready message, blocked behind its group's head; next continues the listing.", 13, wire.OpPeek,
			&wire.PeekResponse{Messages: []wire.PeekedMessage{{Partition: p, Seq: 18, ID: "01KDX6Y2G0A5C3S9W1V7N4Q8R4", Group: group,
				Body: []byte(`{"order":3}`), EnqueuedAt: t0, Blocked: true}}, Next: 18}),
		mustRequest("request-purge", "Delete every unleased message of partition 0.", 14, wire.OpPurge, &wire.PurgeRequest{Queue: "orders"}),
		mustResponse("response-purge", "120 messages deleted.", 14, wire.OpPurge, &wire.PurgeResponse{Count: 120}),
		mustRequest("request-pause", "Pause the deliveries of partition 0.", 15, wire.OpPause,
			&wire.PauseRequest{Queue: "orders", Paused: true}),
		mustResponse("response-pause", "Paused by the token named oncall, at its partition clock.", 15, wire.OpPause,
			&wire.PauseResponse{Paused: true, PausedBy: "oncall", PausedAt: 1_700_000_000_000_000_000}),
		mustRequest("request-find-message", "Look message order-42 up in partition 1.", 16, wire.OpFindMessage,
			&wire.FindMessageRequest{Queue: "orders", Partition: 1, ID: "order-42"}),
		mustResponse("response-find-message", "Found leased by worker-7, after one nack.", 16, wire.OpFindMessage,
			&wire.FindMessageResponse{Messages: []wire.MessageInfo{{Partition: 1, Seq: 42, ID: "order-42", State: "leased",
				Attempts: 2, EnqueuedAt: 1_700_000_000_000_000_000, VisibleAt: 1_700_000_060_000_000_000, Consumer: "worker-7",
				History: []wire.Event{{Kind: wire.EventNacked, At: 1_700_000_030_000_000_000, Attempt: 1, Consumer: "worker-7",
					Reason: "busy"}}}}}),
		mustRequest("request-delete-message", "Delete order-42 (seq 42) whatever its state.", 17, wire.OpDeleteMessage,
			&wire.DeleteMessageRequest{Queue: "orders", Partition: 1, Seq: 42, ID: "order-42"}),
		mustResponse("response-delete-message", "One message deleted.", 17, wire.OpDeleteMessage,
			&wire.DeleteMessageResponse{Deleted: 1}),
	}
}

func receipt(seq uint64, attempt uint32) wire.Receipt {
	return wire.Receipt{Partition: 1, Seq: seq, Attempt: attempt}
}

func settleVectors() []vector {
	return []vector{
		mustRequest("request-ack", "Ack two receipts of partition 1.", 15, wire.OpAck,
			&wire.AckRequest{Queue: "orders", Partition: 1, Receipts: []wire.Receipt{receipt(17, 2), receipt(9, 1)}}),
		mustResponse("response-ack", "The first ack succeeded; the second receipt is stale (the message was leased again).", 15, wire.OpAck,
			&wire.AckResponse{Results: []wire.ItemResult{{}, {Code: wire.CodeLeaseLost, Error: "lease lost: seq 9 attempt 1 (current attempt 2)"}}}),
		mustRequest("request-extend", "Move one lease's deadline to now plus 2 minutes.", 16, wire.OpExtend,
			&wire.ExtendRequest{Queue: "orders", Partition: 1, Items: []wire.ExtendItem{{Receipt: receipt(17, 2), Visibility: 2 * time.Minute}}}),
		mustResponse("response-extend", "Extended.", 16, wire.OpExtend, &wire.ExtendResponse{Results: []wire.ItemResult{{}}}),
		mustRequest("request-nack", "Retry after an explicit 10 s; give back an unused delivery; retry after the queue's backoff.", 17, wire.OpNack,
			&wire.NackRequest{Queue: "orders", Partition: 1, Items: []wire.NackItem{
				{Receipt: receipt(17, 2), ExplicitDelay: true, Delay: 10 * time.Second, Reason: "database busy"},
				{Receipt: receipt(18, 1), Release: true},
				{Receipt: receipt(19, 3), Reason: "upstream timeout"}}}),
		mustResponse("response-nack", "All three applied.", 17, wire.OpNack, &wire.NackResponse{Results: []wire.ItemResult{{}, {}, {}}}),
		mustRequest("request-reject", "Dead-letter one delivery at once.", 18, wire.OpReject,
			&wire.RejectRequest{Queue: "orders", Partition: 1, Items: []wire.RejectItem{{Receipt: receipt(20, 1), Reason: "invalid payload"}}}),
		mustResponse("response-reject", "No message has seq 20 any more (it was acked or deleted).", 18, wire.OpReject,
			&wire.RejectResponse{Results: []wire.ItemResult{{Code: wire.CodeMessageNotFound, Error: "message not found: seq 20"}}}),
	}
}

func sampleLetter(withBody bool) wire.DeadLetter {
	d := wire.DeadLetter{Partition: 1, Seq: 77, ID: "01KDX6Y2G0A5C3S9W1V7N4Q8R9", Group: "acct-42", Bytes: 11, Attempts: 10,
		FirstEnqueuedAt: t0, EnqueuedAt: t0, FirstDeliveredAt: t0 + 1_000_000, LastDeliveredAt: t0 + int64(9*time.Minute),
		DeadAt: t0 + int64(10*time.Minute), Reason: wire.DeadRetriesExhausted, ReasonText: "upstream timeout",
		LastConsumer: "worker-3", History: []wire.Event{
			{Kind: wire.EventLeaseExpired, At: t0 + int64(8*time.Minute), Attempt: 9, Consumer: "worker-2"},
			{Kind: wire.EventNacked, At: t0 + int64(10*time.Minute), Attempt: 10, Consumer: "worker-3", Reason: "upstream timeout"},
		}}
	if withBody {
		d.Headers = map[string]string{"source": "billing"}
		d.Body = []byte(`{"order":7}`)
	}
	return d
}

func deadVectors() []vector {
	return []vector{
		mustRequest("request-dead-list", "List up to 100 dead letters whose retries ran out.", 19, wire.OpDeadList,
			&wire.DeadListRequest{Queue: "orders", Partition: 1, Filter: wire.DeadFilter{Reason: wire.DeadRetriesExhausted, Limit: 100}}),
		mustResponse("response-dead-list", "One dead letter, without headers and body.", 19, wire.OpDeadList,
			&wire.DeadListResponse{Letters: []wire.DeadLetter{sampleLetter(false)}}),
		mustRequest("request-dead-peek", "Read dead letter seq 77 with its headers and body.", 20, wire.OpDeadPeek,
			&wire.DeadPeekRequest{Queue: "orders", Partition: 1, Filter: wire.DeadFilter{Seqs: []uint64{77}}}),
		mustResponse("response-dead-peek", "The dead letter with headers and body.", 20, wire.OpDeadPeek,
			&wire.DeadPeekResponse{Letters: []wire.DeadLetter{sampleLetter(true)}}),
		mustRequest("request-dead-redrive", "Move the dead letters of group acct-42 dead-lettered in one hour back to ready.", 21, wire.OpDeadRedrive,
			&wire.DeadRedriveRequest{Queue: "orders", Partition: 1, Filter: wire.DeadFilter{Group: "acct-42", FromAt: t0, ToAt: t0 + int64(time.Hour)}}),
		mustResponse("response-dead-redrive", "3 dead letters moved.", 21, wire.OpDeadRedrive, &wire.DeadRedriveResponse{Count: 3}),
		mustRequest("request-dead-delete", "Delete up to 50 dead letters after seq 10 whose reason text contains invalid.", 22, wire.OpDeadDelete,
			&wire.DeadDeleteRequest{Queue: "orders", Partition: 1, Filter: wire.DeadFilter{Text: "invalid", AfterSeq: 10, Limit: 50}}),
		mustResponse("response-dead-delete", "2 dead letters deleted.", 22, wire.OpDeadDelete, &wire.DeadDeleteResponse{Count: 2}),
	}
}

func adminVectors() []vector {
	status := wire.NodeStatus{ID: "node3", State: wire.NodeAlive, Draining: true, Replicas: 4, Leaders: 1, Leaving: 1, Leading: 1}
	return []vector{
		mustRequest("request-list-nodes", "Every node's status (an empty body would do as well).", 23, wire.OpListNodes, &wire.ListNodesRequest{}),
		mustResponse("response-list-nodes", "Three nodes, one move under way, one under-replicated partition.", 23, wire.OpListNodes,
			&wire.ListNodesResponse{Nodes: []wire.NodeStatus{
				{ID: "node1", State: wire.NodeAlive, Replicas: 6, Leaders: 2, Leading: 3},
				{ID: "node2", State: wire.NodeAlive, Replicas: 6, Leaders: 2, Joining: 1, Leading: 2},
				{ID: "node3", State: wire.NodeDead, Replicas: 6, Leaders: 2, DeadForMillis: 45_000}},
				MovesInFlight: 1, Moving: []wire.MovingInfo{{Queue: "orders", Partition: 1, Joining: []string{"node2"}, Leaving: []string{"node3"}}},
				UnderReplicated:      []wire.UnderReplicatedInfo{{Queue: "orders", Partition: 0, CaughtUp: 2, Want: 3, Reason: "replica on node3 is down"}},
				UnderReplicatedTotal: 1}),
		mustRequest("request-drain-node", "Drain node3.", 24, wire.OpDrainNode, &wire.DrainNodeRequest{ID: "node3"}),
		mustResponse("response-drain-node", "node3's status right after the change.", 24, wire.OpDrainNode, &wire.DrainNodeResponse{Node: status}),
		mustRequest("request-rebalance", "Plan the moves that even out the cluster, without starting them.", 25, wire.OpRebalance,
			&wire.RebalanceRequest{DryRun: true}),
		mustResponse("response-rebalance", "One replica move and one leader change planned, not started.", 25, wire.OpRebalance,
			&wire.RebalanceResponse{Moves: []wire.MoveInfo{{Queue: "orders", Partition: 1, From: "node1", To: "node4"}},
				Leaders: []wire.LeaderChangeInfo{{Queue: "orders", Partition: 0, To: "node4"}}}),
		mustRequest("request-safe-to-stop", "May node2 be stopped now?", 26, wire.OpSafeToStop, &wire.SafeToStopRequest{ID: "node2"}),
		mustResponse("response-safe-to-stop", "Not now, and why.", 26, wire.OpSafeToStop, &wire.SafeToStopResponse{Leads: 2,
			Reasons: []string{"orders/1: only 1 of 3 replicas caught up on alive nodes without node2"}}),
		mustRequest("request-remove-node", "Remove node4 for good.", 27, wire.OpRemoveNode, &wire.RemoveNodeRequest{ID: "node4"}),
		mustResponse("response-remove-node", "6 of its replicas moved to other nodes.", 27, wire.OpRemoveNode, &wire.RemoveNodeResponse{Moved: 6}),
	}
}

func errorVectors() []vector {
	return []vector{
		failure("error-internal", "An unexpected server failure; the outcome is unknown.", 30, wire.OpPurge, wire.CodeInternal,
			"purge partition 0: body store: input/output error", ""),
		failure("error-malformed-frame", "Connection level: the envelope could not be decoded; the server closes the connection.", 0, 0,
			wire.CodeMalformed, "malformed payload: envelope is not a map (byte 0x93)", ""),
		failure("error-malformed-op", "Request level: an op this server does not know.", 31, 0, wire.CodeMalformed, "unknown op 99", ""),
		failure("error-protocol-version", "In place of the welcome: the server does not speak the hello's version.", 0, 0,
			wire.CodeProtocolVersion, "client speaks version 2, server speaks version 1", ""),
		failure("error-invalid-argument", "A field out of range.", 32, wire.OpReceive, wire.CodeInvalidArgument,
			"receive max 5000 (want 1..1000)", ""),
		failure("error-invalid-config", "A queue setting out of range.", 33, wire.OpCreateQueue, wire.CodeInvalidConfig,
			"visibility_timeout 24h0m0s (want 0s..12h0m0s)", ""),
		failure("error-queue-not-found", "No such queue.", 34, wire.OpSend, wire.CodeQueueNotFound, `queue "ordres" not found`, ""),
		failure("error-queue-exists", "A create for a name already taken.", 35, wire.OpCreateQueue, wire.CodeQueueExists,
			`queue "orders" exists`, ""),
		failure("error-not-leader", "This node does not lead the partition; leader is the leader's client address.", 36, wire.OpSend,
			wire.CodeNotLeader, "not leader (leader is node2)", "ferry-2.example.net:7100"),
		failure("error-not-leader-no-hint", "Not leader, and no leader known: refresh the metadata.", 37, wire.OpCreateQueue,
			wire.CodeNotLeader, "not leader (no leader known)", ""),
		failure("error-unavailable", "Nothing was done; retry after a backoff.", 38, wire.OpSend, wire.CodeUnavailable,
			`no leader for partition 1 of queue "orders" (no quorum of its replicas reachable?)`, ""),
		failure("error-timeout", "Started, outcome unknown.", 39, wire.OpSend, wire.CodeTimeout,
			"outcome unknown: leadership lost before the commit was confirmed", ""),
		failure("error-queue-full", "The whole request refused for want of space (per-message refusals come in the results).", 40,
			wire.OpSend, wire.CodeQueueFull, "disk full: 104857600 bytes free, 0 needed and 536870912 kept for receives and acks", ""),
		failure("error-frame-too-large", "Connection level: a frame longer than the limit; the server closes the connection.", 0, 0,
			wire.CodeFrameTooLarge, "frame of 40000000 bytes exceeds 33554432", ""),
		failure("error-limit-exceeded", "Queue creates over the node's rate or the cluster's count limits.", 41, wire.OpCreateQueue,
			wire.CodeLimitExceeded, "queue creates come faster than 10 per second (burst 20); retry in a moment", ""),
		failure("error-too-many-connections", "In place of the welcome: the node is at its connection limit.", 0, 0,
			wire.CodeTooManyConnections, "node node1 serves 10000 connections, its limit", ""),
		failure("error-unauthorized-hello", "In place of the welcome: no token, or an unknown one.", 0, 0,
			wire.CodeUnauthorized, "this node requires a token (none given)", ""),
		failure("error-unauthorized-request", "The token does not permit this request.", 42, wire.OpSend, wire.CodeUnauthorized,
			`token "orders-worker": send permission on queue "billing" needed`, ""),
	}
}

// vectorFile is the JSON form of a vector.
type vectorFile struct {
	Name    string          `json:"name"`
	Doc     string          `json:"doc"`
	From    string          `json:"from"`
	Kind    string          `json:"kind"`
	Op      uint8           `json:"op,omitempty"`
	OpName  string          `json:"op_name,omitempty"`
	Frame   string          `json:"frame"`
	Payload string          `json:"payload"`
	Body    string          `json:"body,omitempty"`
	Value   json.RawMessage `json:"value"`
}

// A decoded msgpack value is nil, bool, uint64, int64, string, binValue,
// []any or orderedMap (a map in wire order).
type (
	binValue   []byte
	orderedMap []keyValue
	keyValue   struct {
		key   string
		value any
	}
)

// MarshalJSON writes {"$bin": hex}.
func (b binValue) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"$bin": hex.EncodeToString(b)})
}

// MarshalJSON writes the map with its keys in wire order.
func (m orderedMap) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, kv := range m {
		k, _ := json.Marshal(kv.key)
		v, err := json.Marshal(kv.value)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// mustBody encodes a body.
func mustBody(v any) []byte {
	b, err := wire.EncodeBody(v)
	if err != nil {
		panic(err)
	}
	return b
}

// encodeVector renders a vector's file; it fails if the encoding is not
// the same twice (a Go map of several keys in a vector).
func encodeVector(v vector) ([]byte, error) {
	var frame, again bytes.Buffer
	if err := wire.WriteFrame(&frame, v.frame); err != nil {
		return nil, err
	}
	if err := wire.WriteFrame(&again, v.frame); err != nil || !bytes.Equal(frame.Bytes(), again.Bytes()) {
		return nil, fmt.Errorf("vector %s: encoding not deterministic (a map with several keys?)", v.name)
	}
	payload := frame.Bytes()[4:]
	value, err := decodeMsgpack(payload)
	if err != nil {
		return nil, fmt.Errorf("vector %s: %w", v.name, err)
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	from := map[bool]string{true: "client", false: "server"}[v.kind == "hello" || v.kind == "request"]
	f := vectorFile{Name: v.name, Doc: v.doc, From: from, Kind: v.kind, Op: uint8(v.op),
		Frame: hex.EncodeToString(frame.Bytes()), Payload: hex.EncodeToString(payload), Value: raw}
	if v.op != 0 {
		f.OpName = v.op.String()
	}
	switch fr := v.frame.(type) {
	case wire.Request:
		f.Body = hex.EncodeToString(fr.Body)
	case wire.Response:
		f.Body = hex.EncodeToString(fr.Body)
	}
	return marshalFile(f)
}

// marshalFile writes indented JSON without HTML escapes, ending in a
// newline.
func marshalFile(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// decodeMsgpack decodes one msgpack value that fills data exactly.
func decodeMsgpack(data []byte) (any, error) {
	r := &mpReader{data: data}
	v, err := r.value()
	if err == nil && r.pos != len(data) {
		err = fmt.Errorf("%d trailing bytes", len(data)-r.pos)
	}
	return v, err
}

// mpReader walks msgpack bytes; it knows the types the protocol uses.
type mpReader struct {
	data []byte
	pos  int
}

func (r *mpReader) take(n int) ([]byte, error) {
	if n < 0 || n > len(r.data)-r.pos {
		return nil, fmt.Errorf("truncated at offset %d", r.pos)
	}
	r.pos += n
	return r.data[r.pos-n : r.pos], nil
}

// num reads a big-endian unsigned number of n bytes.
func (r *mpReader) num(n int) (uint64, error) {
	b, err := r.take(n)
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v, err
}

func (r *mpReader) value() (any, error) {
	b, err := r.take(1)
	if err != nil {
		return nil, err
	}
	c := b[0]
	switch {
	case c <= 0x7f:
		return uint64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c <= 0x8f:
		return r.mapOf(int(c & 0x0f))
	case c <= 0x9f:
		return r.arrayOf(int(c & 0x0f))
	case c <= 0xbf:
		s, err := r.take(int(c & 0x1f))
		return string(s), err
	case c == 0xc0:
		return nil, nil
	case c == 0xc2 || c == 0xc3:
		return c == 0xc3, nil
	case c >= 0xcc && c <= 0xcf:
		n, err := r.num(1 << (c - 0xcc))
		return n, err
	case c >= 0xd0 && c <= 0xd3:
		size := 1 << (c - 0xd0)
		n, err := r.num(size)
		shift := 64 - 8*size
		return int64(n<<shift) >> shift, err
	}
	return r.sized(c)
}

// sized reads the length-prefixed kinds: str, bin, array and map.
func (r *mpReader) sized(c byte) (any, error) {
	sizes := map[byte]int{0xd9: 1, 0xda: 2, 0xdb: 4, 0xc4: 1, 0xc5: 2, 0xc6: 4, 0xdc: 2, 0xdd: 4, 0xde: 2, 0xdf: 4}
	size, ok := sizes[c]
	if !ok {
		return nil, fmt.Errorf("msgpack byte %#x at offset %d is not used by the protocol", c, r.pos-1)
	}
	n64, err := r.num(size)
	if err != nil {
		return nil, err
	}
	n := int(n64)
	switch c {
	case 0xdc, 0xdd:
		return r.arrayOf(n)
	case 0xde, 0xdf:
		return r.mapOf(n)
	}
	b, err := r.take(n)
	if c >= 0xd9 {
		return string(b), err
	}
	return binValue(bytes.Clone(b)), err
}

func (r *mpReader) arrayOf(n int) (any, error) {
	out := make([]any, 0, min(n, 1024))
	for range n {
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (r *mpReader) mapOf(n int) (any, error) {
	out := orderedMap{}
	for range n {
		k, err := r.value()
		if err != nil {
			return nil, err
		}
		key, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("map key %v is not a string", k)
		}
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		out = append(out, keyValue{key, v})
	}
	return out, nil
}

// partitionForCase is one PartitionFor example.
type partitionForCase struct {
	Key        string `json:"key"`
	Partitions int    `json:"partitions"`
	Partition  int    `json:"partition"`
}

// partitionForFile renders the PartitionFor examples.
func partitionForFile() ([]byte, error) {
	keys := []string{"", "a", "order-1", "order-2", "acct-42", "01KDX6Y2G0A5C3S9W1V7N4Q8R2", "käse", "m-1"}
	var cases []partitionForCase
	for _, k := range keys {
		for _, n := range []int{1, 2, 3, 8, 16, 64} {
			cases = append(cases, partitionForCase{k, n, wire.PartitionFor(k, n)})
		}
	}
	return marshalFile(struct {
		Name  string             `json:"name"`
		Doc   string             `json:"doc"`
		Cases []partitionForCase `json:"cases"`
	}{partitionFor, "Partition of a key (a message's group, or its id when it has no group): " +
		"FNV-1a 32-bit of the key's UTF-8 bytes modulo the partition count; 0 for an empty key or a count below 2.", cases})
}

// wantFiles renders every file of the vector directory, by file name.
func wantFiles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, v := range allVectors() {
		b, err := encodeVector(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := out[v.name+".json"]; dup {
			t.Fatalf("two vectors named %s", v.name)
		}
		out[v.name+".json"] = b
	}
	b, err := partitionForFile()
	if err != nil {
		t.Fatal(err)
	}
	out[partitionFor+".json"] = b
	return out
}

// TestVectors_MatchTheEncoder re-encodes every vector from its Go value
// and compares it with its file; -update rewrites the directory.
func TestVectors_MatchTheEncoder(t *testing.T) {
	want := wantFiles(t)
	if *updateVectors {
		writeVectors(t, want)
	}
	names, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range names {
		if _, ok := want[filepath.Base(path)]; !ok {
			t.Errorf("%s: no Go value makes this vector (remove it, or run go test ./wire/ -run Vectors -update)", path)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		got, err := os.ReadFile(filepath.Join(vectorDir, name))
		if err != nil {
			t.Errorf("%v (run go test ./wire/ -run Vectors -update)", err)
			continue
		}
		if !bytes.Equal(got, want[name]) {
			t.Errorf("%s differs from what the encoder writes now (%s); if the change is intended, "+
				"run go test ./wire/ -run Vectors -update and say so in docs/protocol.md", name, firstDiff(got, want[name]))
		}
	}
}

// writeVectors replaces the directory's JSON files with want.
func writeVectors(t *testing.T, want map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(vectorDir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	for _, path := range old {
		if _, ok := want[filepath.Base(path)]; !ok {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, b := range want {
		if err := os.WriteFile(filepath.Join(vectorDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// firstDiff names the first line where two files differ.
func firstDiff(got, want []byte) string {
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) && i < len(wl); i++ {
		if gl[i] != wl[i] {
			return fmt.Sprintf("line %d: file has %.120q, encoder gives %.120q", i+1, gl[i], wl[i])
		}
	}
	return fmt.Sprintf("the file has %d lines, the encoder gives %d", len(gl), len(wl))
}

// readVectorFile reads a vector file.
func readVectorFile(name string) (vectorFile, error) {
	var f vectorFile
	b, err := os.ReadFile(filepath.Join(vectorDir, name))
	if err != nil {
		return f, fmt.Errorf("%w (run go test ./wire/ -run Vectors -update)", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// TestVectors_DecodeToTheirGoValues reads every vector file's frame with
// the package's reader and decodes its body, comparing with the Go value.
func TestVectors_DecodeToTheirGoValues(t *testing.T) {
	for _, v := range allVectors() {
		f, err := readVectorFile(v.name + ".json")
		if err != nil {
			t.Error(err)
			continue
		}
		frame, err := hex.DecodeString(f.Frame)
		if err != nil {
			t.Fatalf("%s: frame: %v", v.name, err)
		}
		if err := decodeVector(v, frame); err != nil {
			t.Errorf("vector %s: %v", v.name, err)
		}
	}
}

// decodeVector decodes frame as v's kind of frame and compares.
func decodeVector(v vector, frame []byte) error {
	rd := wire.NewReader(bufio.NewReader(bytes.NewReader(frame)))
	var got, body any
	switch want := v.frame.(type) {
	case wire.Hello:
		var h wire.Hello
		if err := rd.Read(&h); err != nil || wire.CheckHello(h) != nil {
			return fmt.Errorf("hello: %v, %v", err, wire.CheckHello(h))
		}
		got = h
	case wire.Request:
		req, err := rd.ReadRequest()
		if err != nil {
			return err
		}
		body = wire.NewRequestBody(req.Op)
		if err := req.Decode(body); err != nil {
			return err
		}
		got, req.Body = req, want.Body // the body is compared decoded
	case wire.Response:
		resp, err := rd.ReadResponse()
		if err != nil {
			return err
		}
		if body = wire.NewResponseBody(v.op); v.kind == "welcome" {
			body = new(wire.Welcome)
		}
		if err := resp.Decode(body); err != nil && resp.Code == wire.CodeOK {
			return err
		}
		got, resp.Body = resp, want.Body // a failure's code and text are compared in the envelope
	}
	if !reflect.DeepEqual(got, v.frame) {
		return fmt.Errorf("envelope decodes as %+v, want %+v", got, v.frame)
	}
	if v.body != nil && !reflect.DeepEqual(body, v.body) {
		return fmt.Errorf("body decodes as %+v, want %+v", body, v.body)
	}
	if _, err := rd.ReadRaw(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("bytes after the frame: %v", err)
	}
	return nil
}

// TestVectors_PayloadFromJSONAlone rebuilds every vector file's payload
// from its "value" with the smallest-form msgpack rules of
// docs/protocol.md, reading only the file: what a second-language encoder
// that follows them produces, byte for byte.
func TestVectors_PayloadFromJSONAlone(t *testing.T) {
	for _, v := range allVectors() {
		f, err := readVectorFile(v.name + ".json")
		if err != nil {
			t.Error(err)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(f.Value))
		dec.UseNumber()
		var enc bytes.Buffer
		if err := packJSON(dec, &enc); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if got := hex.EncodeToString(enc.Bytes()); got != f.Payload {
			t.Errorf("%s: the JSON value packs as\n%s\nwant\n%s", v.name, got, f.Payload)
		}
		var prefix [4]byte
		binary.BigEndian.PutUint32(prefix[:], uint32(enc.Len()))
		if f.Frame != hex.EncodeToString(prefix[:])+f.Payload {
			t.Errorf("%s: frame is not the length prefix and the payload", v.name)
		}
		if f.Body != "" && !strings.Contains(f.Payload, f.Body) {
			t.Errorf("%s: body is not part of the payload", v.name)
		}
	}
}

// packJSON encodes the next JSON value of dec as msgpack in the smallest
// form: an object {"$bin": hex} is bin, other objects maps (keys in
// order), integers the shortest int or uint form.
func packJSON(dec *json.Decoder, w *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok := tok.(type) {
	case nil:
		w.WriteByte(0xc0)
	case bool:
		w.WriteByte(map[bool]byte{false: 0xc2, true: 0xc3}[tok])
	case json.Number:
		return packNumber(tok, w)
	case string:
		packHead(w, len(tok), 0xa0, 32, strForms)
		w.WriteString(tok)
	case json.Delim:
		return packContainer(tok, dec, w)
	}
	return nil
}

// packContainer packs an array or an object whose opening delimiter was
// read.
func packContainer(open json.Delim, dec *json.Decoder, w *bytes.Buffer) error {
	var items bytes.Buffer
	n := 0
	for dec.More() {
		if open == '{' {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			if key == "$bin" && n == 0 {
				return packBin(dec, w)
			}
			packHead(&items, len(key.(string)), 0xa0, 32, strForms)
			items.WriteString(key.(string))
		}
		if err := packJSON(dec, &items); err != nil {
			return err
		}
		n++
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return err
	}
	if open == '[' {
		packHead(w, n, 0x90, 16, arrayForms)
	} else {
		packHead(w, n, 0x80, 16, mapForms)
	}
	w.Write(items.Bytes())
	return nil
}

// packBin packs {"$bin": hex} once its key was read.
func packBin(dec *json.Decoder, w *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	b, err := hex.DecodeString(tok.(string))
	if err != nil {
		return err
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	packHead(w, len(b), 0, 0, [3]byte{0xc4, 0xc5, 0xc6})
	w.Write(b)
	return nil
}

// Header forms: a fix form for n below fixMax (fix | n), then the codes
// of the 8-, 16- and 32-bit lengths (0: no 8-bit form).
var (
	strForms   = [3]byte{0xd9, 0xda, 0xdb}
	arrayForms = [3]byte{0, 0xdc, 0xdd}
	mapForms   = [3]byte{0, 0xde, 0xdf}
)

// packHead writes a str, bin, array or map header in its shortest form.
func packHead(w *bytes.Buffer, n int, fix byte, fixMax int, forms [3]byte) {
	switch {
	case n < fixMax:
		w.WriteByte(fix | byte(n))
	case forms[0] != 0 && n <= math.MaxUint8:
		writeBE(w, forms[0], uint64(n), 1)
	case n <= math.MaxUint16:
		writeBE(w, forms[1], uint64(n), 2)
	default:
		writeBE(w, forms[2], uint64(n), 4)
	}
}

// writeBE writes code and then the low size bytes of v, big-endian.
func writeBE(w *bytes.Buffer, code byte, v uint64, size int) {
	w.WriteByte(code)
	for i := size - 1; i >= 0; i-- {
		w.WriteByte(byte(v >> (8 * i)))
	}
}

// packNumber writes an integer in its shortest form: positive fixint or
// uint 8..64 when not negative, else negative fixint or int 8..64.
func packNumber(n json.Number, w *bytes.Buffer) error {
	if u, err := strconv.ParseUint(n.String(), 10, 64); err == nil {
		if u <= 0x7f {
			w.WriteByte(byte(u))
			return nil
		}
		for k, limit := range []uint64{math.MaxUint8, math.MaxUint16, math.MaxUint32, math.MaxUint64} {
			if u <= limit {
				writeBE(w, 0xcc+byte(k), u, 1<<k)
				return nil
			}
		}
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return fmt.Errorf("number %s is not an integer of 64 bits", n)
	}
	if i >= -32 {
		w.WriteByte(byte(int8(i)))
		return nil
	}
	for k, limit := range []int64{math.MinInt8, math.MinInt16, math.MinInt32, math.MinInt64} {
		if i >= limit {
			writeBE(w, 0xd0+byte(k), uint64(i), 1<<k)
			break
		}
	}
	return nil
}

// TestVectors_CoverEveryOpAndCode fails when an op has no request and
// answer vector, or a code appears in no vector.
func TestVectors_CoverEveryOpAndCode(t *testing.T) {
	reqs, resps, codes := map[wire.Op]bool{}, map[wire.Op]bool{}, map[wire.Code]bool{}
	for _, v := range allVectors() {
		switch f := v.frame.(type) {
		case wire.Request:
			reqs[f.Op] = true
		case wire.Response:
			codes[f.Code] = true
			if f.Code == wire.CodeOK && v.op != 0 {
				resps[v.op] = true
			}
		}
		if v.body != nil {
			collectCodes(reflect.ValueOf(v.body), codes)
		}
	}
	for op := wire.Op(1); op.Valid(); op++ {
		if !reqs[op] || !resps[op] {
			t.Errorf("op %d (%s) lacks a request or an answer vector", op, op)
		}
	}
	for c := wire.Code(0); c.Known(); c++ {
		if !codes[c] {
			t.Errorf("code %d (%s) appears in no vector", c, c)
		}
	}
}

// collectCodes records every wire.Code field reachable from v.
func collectCodes(v reflect.Value, codes map[wire.Code]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			collectCodes(v.Elem(), codes)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			collectCodes(v.Field(i), codes)
		}
	case reflect.Slice:
		for i := range v.Len() {
			collectCodes(v.Index(i), codes)
		}
	}
	if v.Type() == reflect.TypeFor[wire.Code]() && v.Uint() != 0 {
		codes[wire.Code(v.Uint())] = true
	}
}

// The protocol document's conventions the test reads: each op has a
// heading "### NAME (op N)", and the table of the section whose heading
// starts with codeSection has rows "| N | NAME | meaning | yes-or-no |
// what to do |" whose fourth cell is Code.Retryable.
const codeSection = "## Error codes"

var (
	opHeading = regexp.MustCompile(`^### ([a-z-]+) \(op ([0-9]+)\)$`)
	codeRow   = regexp.MustCompile(`^\| *([0-9]+) *\| *([a-z ]+?) *\|[^|]*\| *(yes|no) *\|`)
)

// TestVectors_DocNamesEveryOpAndCode fails, naming them, when
// docs/protocol.md lacks an op of op.go or a code of code.go, names one
// that does not exist, or says a code is retryable when Code.Retryable
// says otherwise.
func TestVectors_DocNamesEveryOpAndCode(t *testing.T) {
	text, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatalf("%v: the protocol document must exist", err)
	}
	ops, codes, retry := map[int]string{}, map[int]string{}, map[int]string{}
	inCodes := false
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "## ") {
			inCodes = strings.HasPrefix(line, codeSection)
		}
		if m := opHeading.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[2])
			ops[n] = m[1]
		}
		if m := codeRow.FindStringSubmatch(line); inCodes && m != nil {
			n, _ := strconv.Atoi(m[1])
			codes[n], retry[n] = m[2], m[3]
		}
	}
	for op := wire.Op(1); op.Valid(); op++ {
		if got, ok := ops[int(op)]; !ok || got != op.String() {
			t.Errorf("%s: no heading %q for op %d", protocolDoc, fmt.Sprintf("### %s (op %d)", op, op), op)
		}
	}
	for n, name := range ops {
		if n > 255 || !wire.Op(n).Valid() {
			t.Errorf("%s: op %d (%s) is not an op of wire/op.go", protocolDoc, n, name)
		}
	}
	for c := wire.Code(0); c.Known(); c++ {
		want := map[bool]string{true: "yes", false: "no"}[c.Retryable()]
		switch got, ok := codes[int(c)]; {
		case !ok || got != c.String():
			t.Errorf("%s: no error table row %q for code %d", protocolDoc, fmt.Sprintf("| %d | %s | ... | %s |", c, c, want), c)
		case retry[int(c)] != want:
			t.Errorf("%s: code %d (%s) marked retryable %q, Code.Retryable says %q", protocolDoc, c, c, retry[int(c)], want)
		}
	}
	for n, name := range codes {
		if n > math.MaxUint16 || !wire.Code(n).Known() {
			t.Errorf("%s: code %d (%s) is not a code of wire/code.go", protocolDoc, n, name)
		}
	}
}
