package wire_test

// The vectors themselves: the Go values each file of testdata/vectors is
// made from (vectors_test.go writes, reads and checks them).

import (
	"time"

	"github.com/ferrymq/ferry/wire"
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
		priorityVectors(), settleVectors(), deadVectors(), adminVectors(), scheduleVectors(), errorVectors()} {
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
		mustRequest("request-peek-filtered", "Read up to 100 leased or delayed messages of group acct-42 whose header tenant is blue, enqueued at least 10 minutes ago, without headers and bodies.",
			18, wire.OpPeek, &wire.PeekRequest{Queue: "orders", Partition: p, Max: 100, States: []string{wire.StateLeased, wire.StateDelayed},
				Group: group, HeaderKey: "tenant", HeaderValue: "blue", OlderThan: 10 * time.Minute, NoBodies: true}),
		mustResponse("response-peek-leased", "One leased message: its holder and lease deadline.", 18, wire.OpPeek,
			&wire.PeekResponse{Messages: []wire.PeekedMessage{{Partition: p, Seq: 17, ID: "01KDX6Y2G0A5C3S9W1V7N4Q8R2", Group: group,
				EnqueuedAt: t0, Attempts: 1, State: wire.StateLeased, VisibleAt: t1 + int64(time.Minute), Consumer: "worker-1"}}}),
		mustRequest("request-purge-leased", "Delete every message of partition 0, leased ones included.", 19, wire.OpPurge,
			&wire.PurgeRequest{Queue: "orders", IncludeLeased: true}),
		mustRequest("request-delete-messages", "Delete seqs 17 and 18 if they are still ready or leased.", 20, wire.OpDeleteMessages,
			&wire.DeleteMessagesRequest{Queue: "orders", Partition: p, Items: []wire.MessageRef{{Seq: 17, ID: "01KDX6Y2G0A5C3S9W1V7N4Q8R2"},
				{Seq: 18, ID: "01KDX6Y2G0A5C3S9W1V7N4Q8R4"}}, States: []string{wire.StateReady, wire.StateLeased}}),
		mustResponse("response-delete-messages", "One deleted; the other had been acked in between.", 20, wire.OpDeleteMessages,
			&wire.DeleteMessagesResponse{Deleted: 1}),
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
