package wire

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// sample pairs an op with a populated request and response body.
type sample struct {
	op   Op
	req  any
	resp any
}

func sampleConfig() QueueConfig {
	return QueueConfig{
		Partitions: 4, Replicas: 3, VisibilityTimeout: 30 * time.Second,
		MaxReceives: 10, BackoffBase: time.Second, BackoffMax: 5 * time.Minute,
		DedupWindow: 5 * time.Minute, MaxMessageBytes: 1 << 20,
		MaxDepth: 1_000_000, MaxBytes: 1 << 40, Retention: 72 * time.Hour,
		MaxDead: 500, MaxDeadBytes: 1 << 20, DeadRetention: 24 * time.Hour, DedupMaxIDs: 1000, MaxInFlight: 64,
		MaxDeliveryRate: 500, FairGroups: 1,
	}
}

func sampleQueue() QueueInfo {
	return QueueInfo{Name: "orders", Config: sampleConfig(), Partitions: []PartitionInfo{
		{Index: 0, Leader: "n1", LeaderAddr: "10.0.0.1:7400", Replicas: []string{"n1", "n2", "n3"}},
		{Index: 1, Replicas: []string{"n2", "n3", "n1"}},
	}}
}

func sampleFilter() DeadFilter {
	return DeadFilter{Seqs: []uint64{3, 1 << 40}, Reason: DeadLeaseExpired, Group: "acct-7", Text: "timeout",
		FromAt: 1_700_000_000_000_000_000, ToAt: 1_800_000_000_000_000_000, AfterSeq: 2, Limit: 500}
}

func sampleLetter(withBody bool) DeadLetter {
	d := DeadLetter{
		Partition: 2, Seq: 77, ID: "m-77", Group: "acct-7", Bytes: 321, Attempts: 10,
		FirstEnqueuedAt: 1_700_000_000_000_000_001, EnqueuedAt: 1_700_000_000_000_000_002,
		FirstDeliveredAt: 1_700_000_000_000_000_003, LastDeliveredAt: 1_700_000_000_000_000_004,
		DeadAt: 1_700_000_000_000_000_005, Reason: DeadRetriesExhausted, ReasonText: "db down",
		LastConsumer: "worker-3", History: []Event{
			{Kind: EventNacked, At: 1_700_000_000_000_000_006, Attempt: 9, Consumer: "worker-2", Reason: "timeout"},
			{Kind: EventLeaseExpired, At: 1_700_000_000_000_000_007, Attempt: 10},
		},
	}
	if withBody {
		d.Headers = map[string]string{"trace": "abc"}
		d.Body = []byte{0, 1, 2, 0xc1, 0xff}
	}
	return d
}

func sampleStats() PartitionStats {
	return PartitionStats{
		Partition: 1, Leader: "n2", AppliedIndex: 9_000_000_000, Ready: 10, Eligible: 8,
		Delayed: 2, InFlight: 3, Dead: 4, Bytes: 5000, DeadBytes: 400, OldestEligibleAge: int64(time.Minute),
		Groups: 6, LastSeq: 1 << 33, Counters: Counters{Sent: 1, Duplicates: 2, Leased: 3, Acked: 4,
			Nacked: 5, Rejected: 6, Expired: 7, DeadLettered: 8, Redriven: 9, DeadDeleted: 10,
			Purged: 11, RetentionExpired: 12, DeadEvicted: 13, DeadExpired: 14, DedupEvicted: 15},
	}
}

func receipt(seq uint64) Receipt { return Receipt{Partition: 2, Seq: seq, Attempt: 3} }

// samples returns one populated request and response per op, in op order.
func samples() []sample {
	items := []ItemResult{{}, {Code: CodeLeaseLost, Error: "leased again"}}
	return []sample{
		{OpMetadata, &MetadataRequest{Queue: "orders"}, &MetadataResponse{
			Nodes: []NodeInfo{{ID: "n1", ClientAddr: "10.0.0.1:7400", RaftAddr: "10.0.0.1:7401",
				HTTPAddr: "10.0.0.1:7402", State: NodeAlive}, {ID: "n2", ClientAddr: "b:1", State: NodeSuspect}},
			Queues: []QueueInfo{sampleQueue()}, MetaIndex: 42}},
		{OpCreateQueue, &CreateQueueRequest{Name: "orders", Config: sampleConfig(), Set: FieldMaxReceives | FieldPartitions},
			&CreateQueueResponse{Queue: sampleQueue()}},
		{OpUpdateQueue, &UpdateQueueRequest{Name: "orders", Config: QueueConfig{DedupWindow: 0, MaxDepth: 9}, Set: FieldDedupWindow | FieldMaxDepth},
			&UpdateQueueResponse{Queue: sampleQueue()}},
		{OpDeleteQueue, &DeleteQueueRequest{Name: "orders"}, &DeleteQueueResponse{}},
		{OpListQueues, &ListQueuesRequest{Prefix: "ord"}, &ListQueuesResponse{Queues: []QueueInfo{sampleQueue(), {Name: "x"}}}},
		{OpQueueStats, &QueueStatsRequest{Queue: "orders", Partitions: []int{0, 1}}, &QueueStatsResponse{
			Queue: "orders", Partitions: []PartitionStats{sampleStats(), {Partition: 2, Code: CodeUnavailable, Error: "no leader"}}}},
		{OpSend, &SendRequest{Queue: "orders", Partition: 3, Messages: []Message{
			{ID: "a", Group: "g", Headers: map[string]string{"k": "v", "": "empty"}, Body: []byte("hello"), Delay: 3 * time.Second},
			{ID: "b", Body: []byte{}}}},
			&SendResponse{Results: []SendResult{{Seq: 1}, {Seq: 1 << 50, Duplicate: true}, {Code: CodeQueueFull, Error: "max_depth"}}}},
		{OpReceive, &ReceiveRequest{Queue: "orders", Partition: 1, Consumer: "w1", Max: 32, Visibility: time.Minute, Wait: ReceiveWaitMax,
			Acks: []Receipt{receipt(1), receipt(2)}},
			&ReceiveResponse{Messages: []Delivery{{Partition: 1, Seq: 5, Attempt: 2, ID: "a", Group: "g",
				Headers: map[string]string{"k": "v"}, Body: []byte("x"), EnqueuedAt: -1, Deadline: 1 << 62}}, AckResults: items}},
		{OpAck, &AckRequest{Queue: "orders", Partition: 2, Receipts: []Receipt{receipt(1), receipt(2)}}, &AckResponse{Results: items}},
		{OpExtend, &ExtendRequest{Queue: "orders", Partition: 2, Items: []ExtendItem{{Receipt: receipt(1), Visibility: time.Hour}}},
			&ExtendResponse{Results: items}},
		{OpNack, &NackRequest{Queue: "orders", Partition: 2, Items: []NackItem{
			{Receipt: receipt(1), ExplicitDelay: true}, {Receipt: receipt(2), Delay: time.Second, Reason: "busy"}}},
			&NackResponse{Results: items}},
		{OpReject, &RejectRequest{Queue: "orders", Partition: 2, Items: []RejectItem{{Receipt: receipt(9), Reason: "bad json"}}},
			&RejectResponse{Results: items}},
		{OpDeadList, &DeadListRequest{Queue: "orders", Partition: 2, Filter: sampleFilter()},
			&DeadListResponse{Letters: []DeadLetter{sampleLetter(false)}}},
		{OpDeadPeek, &DeadPeekRequest{Queue: "orders", Partition: 2, Filter: DeadFilter{Limit: 1}},
			&DeadPeekResponse{Letters: []DeadLetter{sampleLetter(true), sampleLetter(false)}}},
		{OpDeadRedrive, &DeadRedriveRequest{Queue: "orders", Partition: 2, Filter: sampleFilter()}, &DeadRedriveResponse{Count: 12}},
		{OpDeadDelete, &DeadDeleteRequest{Queue: "orders", Partition: 2, Filter: DeadFilter{Group: "g"}}, &DeadDeleteResponse{Count: 1}},
		{OpPurge, &PurgeRequest{Queue: "orders", Partition: 0, IncludeLeased: true}, &PurgeResponse{Count: 99}},
		{OpPeek, &PeekRequest{Queue: "orders", Partition: 1, Max: 10, MaxBytes: 1 << 20, AfterSeq: 7, States: []string{StateAll},
			Group: "g", HeaderKey: "k", HeaderValue: "v", OlderThan: time.Minute, NoBodies: true},
			&PeekResponse{Messages: []PeekedMessage{{Partition: 1, Seq: 8, ID: "m8", Group: "g", Headers: map[string]string{"k": "v"},
				Body: []byte("hi"), EnqueuedAt: 1_700_000_000_000_000_000, Attempts: 2, Blocked: true, State: StateLeased,
				VisibleAt: 1_700_000_030_000_000_000, Consumer: "w1"}}, Next: 8}},
		{OpRemoveNode, &RemoveNodeRequest{ID: "n4"}, &RemoveNodeResponse{Moved: 3}},
		{OpListNodes, &ListNodesRequest{}, &ListNodesResponse{Nodes: []NodeStatus{{ID: "n1", State: NodeDead, Draining: true, Replicas: 4,
			Leaders: 2, Joining: 1, Leaving: 1, DeadForMillis: 9, Stuck: "nowhere"}}, MovesInFlight: 2,
			UnderReplicated: []UnderReplicatedInfo{{Queue: "q", Partition: 1, CaughtUp: 2, Want: 3, Reason: "why"}}, UnderReplicatedTotal: 1}},
		{OpDrainNode, &DrainNodeRequest{ID: "n2", Undrain: true}, &DrainNodeResponse{Node: NodeStatus{ID: "n2", State: NodeAlive}}},
		{OpRebalance, &RebalanceRequest{DryRun: true}, &RebalanceResponse{Moves: []MoveInfo{{Queue: "q", Partition: 1, From: "a", To: "b"}},
			Leaders: []LeaderChangeInfo{{Queue: "q", Partition: 2, To: "c"}}, Started: true}},
		{OpSafeToStop, &SafeToStopRequest{ID: "n3"}, &SafeToStopResponse{Safe: false, Leads: 2, Reasons: []string{"x"}}},
		{OpQueueSettings, &QueueSettingsRequest{}, &QueueSettingsResponse{Settings: []SettingInfo{
			{Name: "max_depth", Kind: "count", Min: 0, Zero: "no limit", Help: "h"},
			{Name: "partitions", Kind: "count", Default: 1, Min: 1, Max: 64, Help: "p", Fixed: true}}}},
		{OpPause, &PauseRequest{Queue: "orders", Partition: 1, Paused: true},
			&PauseResponse{Paused: true, PausedBy: "oncall", PausedAt: 1_700_000_000_000_000_000}},
		{OpFindMessage, &FindMessageRequest{Queue: "orders", Partition: 1, ID: "m7"},
			&FindMessageResponse{Messages: []MessageInfo{{Partition: 1, Seq: 7, ID: "m7", Group: "g", State: "leased", Attempts: 2,
				EnqueuedAt: 1_700_000_000_000_000_000, VisibleAt: 1_700_000_030_000_000_000, Consumer: "w1",
				History: []Event{{Kind: EventNacked, At: 1_700_000_010_000_000_000, Attempt: 1, Reason: "busy"}}},
				{Partition: 1, Seq: 9, ID: "m7", State: "dead", Attempts: 1, Dead: func() *DeadLetter { d := sampleLetter(false); return &d }()}}}},
		{OpDeleteMessage, &DeleteMessageRequest{Queue: "orders", Partition: 1, Seq: 7, ID: "m7", Undelivered: true},
			&DeleteMessageResponse{Deleted: 1}},
		{OpDeleteMessages, &DeleteMessagesRequest{Queue: "orders", Partition: 1, Items: []MessageRef{{Seq: 7, ID: "m7"}, {Seq: 9, ID: "m9"}},
			States: []string{StateReady, StateLeased}}, &DeleteMessagesResponse{Deleted: 2}},
		{OpSetSchedule, &SetScheduleRequest{Queue: "orders", Partition: 1, Schedule: Schedule{Name: "nightly", Cron: "0 3 * * *",
			Group: "g", Headers: map[string]string{"k": "v"}, Body: []byte("b"), Priority: 4}},
			&SetScheduleResponse{Schedule: ScheduleStatus{Schedule: Schedule{Name: "nightly", Cron: "0 3 * * *"}, Partition: 1,
				Next: 1_700_010_800_000_000_000, Created: 1_700_000_000_000_000_000}}},
		{OpListSchedules, &ListSchedulesRequest{Queue: "orders", Partition: 1},
			&ListSchedulesResponse{Schedules: []ScheduleStatus{{Schedule: Schedule{Name: "beat", Every: time.Second}, Partition: 1,
				Next: 1_700_000_010_000_000_000, Created: 1_700_000_000_000_000_000, LastTick: 1_700_000_009_000_000_000, Fired: 9,
				Refused: 1, Skipped: 1}}}},
		{OpDeleteSchedule, &DeleteScheduleRequest{Queue: "orders", Partition: 1, Name: "beat"}, &DeleteScheduleResponse{Deleted: 1}},
	}
}

// frameTrip writes v as a frame and reads it back into out.
func frameTrip(t *testing.T, v, out any) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteFrame(&buf, v); err != nil {
		t.Fatalf("WriteFrame(%T): %v", v, err)
	}
	if err := ReadFrame(bufio.NewReader(&buf), 0, out); err != nil {
		t.Fatalf("ReadFrame(%T): %v", v, err)
	}
}

func TestWire_SamplesCoverEveryOp(t *testing.T) {
	s := samples()
	if len(s) != int(opEnd-1) {
		t.Fatalf("%d samples for %d ops", len(s), opEnd-1)
	}
	for i, smp := range s {
		if smp.op != Op(i+1) {
			t.Fatalf("sample %d is %s", i, smp.op)
		}
		if got, want := reflect.TypeOf(NewRequestBody(smp.op)), reflect.TypeOf(smp.req); got != want {
			t.Errorf("NewRequestBody(%s) is %v, sample is %v", smp.op, got, want)
		}
		if got, want := reflect.TypeOf(NewResponseBody(smp.op)), reflect.TypeOf(smp.resp); got != want {
			t.Errorf("NewResponseBody(%s) is %v, sample is %v", smp.op, got, want)
		}
	}
	if NewRequestBody(0) != nil || NewResponseBody(opEnd) != nil {
		t.Error("body for an unknown op")
	}
}

func TestWire_RoundTripEveryOp(t *testing.T) {
	for i, smp := range samples() {
		t.Run(smp.op.String(), func(t *testing.T) {
			id := uint64(i+1) << 40
			req, err := NewRequest(id, smp.op, smp.req)
			if err != nil {
				t.Fatal(err)
			}
			var gotReq Request
			frameTrip(t, req, &gotReq)
			if gotReq.ID != id || gotReq.Op != smp.op {
				t.Fatalf("request envelope %d/%s, want %d/%s", gotReq.ID, gotReq.Op, id, smp.op)
			}
			reqBody := NewRequestBody(smp.op)
			if err := gotReq.Decode(reqBody); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(reqBody, smp.req) {
				t.Errorf("request:\n got %+v\nwant %+v", reqBody, smp.req)
			}

			resp, err := NewResponse(id, smp.resp)
			if err != nil {
				t.Fatal(err)
			}
			var gotResp Response
			frameTrip(t, resp, &gotResp)
			respBody := NewResponseBody(smp.op)
			if err := gotResp.Decode(respBody); err != nil {
				t.Fatal(err)
			}
			if gotResp.ID != id || !reflect.DeepEqual(respBody, smp.resp) {
				t.Errorf("response %d:\n got %+v\nwant %+v", gotResp.ID, respBody, smp.resp)
			}
		})
	}
}

func TestWire_RoundTripEnvelopes(t *testing.T) {
	cases := []any{
		&Request{ID: 1, Op: OpSend},
		&Request{ID: 1<<64 - 1, Op: Op(200), Body: []byte{0x81, 0xa1, 'a', 0x01}},
		&Response{ID: 7},
		&Response{ID: 8, Code: CodeNotLeader, Error: "moved", Leader: "10.0.0.2:7400"},
		&Response{ID: 9, Code: Code(999), Body: []byte{0x93, 1, 2, 3}},
		&Hello{Magic: Magic, Version: ProtocolVersion, Client: "ferry-go/test"},
		&Welcome{Version: 1, NodeID: "n1", Cluster: "prod", Server: "ferryd/0.1", MaxFrameBytes: 1 << 20},
	}
	for _, want := range cases {
		got := reflect.New(reflect.TypeOf(want).Elem()).Interface()
		frameTrip(t, want, got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%T:\n got %+v\nwant %+v", want, got, want)
		}
	}
}

func TestWire_ReaderReusesBufferWithoutAliasing(t *testing.T) {
	var stream bytes.Buffer
	for i := range 3 {
		req, err := NewRequest(uint64(i+1), OpSend, &SendRequest{Queue: "q",
			Messages: []Message{{ID: "m", Body: bytes.Repeat([]byte{byte('a' + i)}, 100)}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteFrame(&stream, req); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(bufio.NewReader(&stream))
	var got []Request
	for range 3 {
		req, err := r.ReadRequest()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, req)
	}
	for i, req := range got {
		var body SendRequest
		if err := req.Decode(&body); err != nil {
			t.Fatal(err)
		}
		if req.ID != uint64(i+1) || body.Messages[0].Body[0] != byte('a'+i) {
			t.Errorf("request %d overwritten by a later frame: id %d body %q", i, req.ID, body.Messages[0].Body[:1])
		}
	}
}

func TestWire_EmptyBodyDecodesToZero(t *testing.T) {
	req, err := NewRequest(1, OpListQueues, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got Request
	frameTrip(t, req, &got)
	body := ListQueuesRequest{Prefix: "kept"}
	if err := got.Decode(&body); err != nil || body.Prefix != "kept" {
		t.Fatalf("empty body: %v, %+v", err, body)
	}
	if err := DecodeBody([]byte{0xc0}, &body); err != nil {
		t.Fatalf("nil body: %v", err)
	}
}

func TestWire_UnknownFieldsIgnored(t *testing.T) {
	// A newer peer adds a field "extra" (an array) to a Receipt.
	raw := []byte{0x84, 0xa9, 'p', 'a', 'r', 't', 'i', 't', 'i', 'o', 'n', 0x02,
		0xa3, 's', 'e', 'q', 0x05, 0xa5, 'e', 'x', 't', 'r', 'a', 0x92, 0x01, 0xa1, 'z',
		0xa7, 'a', 't', 't', 'e', 'm', 'p', 't', 0x03}
	var got Receipt
	if err := DecodeBody(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got != (Receipt{Partition: 2, Seq: 5, Attempt: 3}) {
		t.Fatalf("got %+v", got)
	}
}

// TestWire_EnvelopesThroughPlainMsgpack checks the envelopes' own codecs
// when they are used by msgpack directly, nested in another value.
func TestWire_EnvelopesThroughPlainMsgpack(t *testing.T) {
	type batch struct {
		Reqs  []Request  `msgpack:"reqs"`
		Resps []Response `msgpack:"resps"`
	}
	want := batch{
		Reqs:  []Request{{ID: 1, Op: OpAck, Body: []byte{0x80}}, {ID: 2, Op: OpPurge}},
		Resps: []Response{{ID: 3, Code: CodeNotLeader, Error: "e", Leader: "l", Body: []byte{0x01}}, {ID: 4}},
	}
	raw, err := msgpack.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got batch
	if err := msgpack.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	bad := []byte{0x81, 0xa4, 'r', 'e', 'q', 's', 0x91, 0x81, 0xa2, 'o', 'p', 0xcd, 0x01, 0x00}
	if err := msgpack.Unmarshal(bad, &got); err == nil {
		t.Fatal("op 256 accepted")
	}
}
