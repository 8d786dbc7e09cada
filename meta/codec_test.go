package meta

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
)

// sampleCommands has one command of every type, with every field set.
func sampleCommands() []Command {
	cfg := QueueConfig{Partitions: 3, Replicas: 2, Queue: partitionConfig()}
	cfg.Queue.MaxDepth, cfg.Queue.MaxBytes, cfg.Queue.Retention = 10, 1<<20, 7
	n := node("n1")
	n.RegisteredAt, n.Incarnation, n.Draining = 5, 77, true
	return []Command{
		{Type: CmdRegisterNode, At: t0, RegisterNode: &RegisterNodeCmd{Node: n}},
		{Type: CmdCreateQueue, At: t0 + 1, CreateQueue: &CreateQueueCmd{Name: "orders", Config: cfg}},
		{Type: CmdUpdateQueue, At: -1, UpdateQueue: &UpdateQueueCmd{Name: "orders", Config: QueueConfig{Queue: cfg.Queue}}},
		{Type: CmdDeleteQueue, At: 0, DeleteQueue: &DeleteQueueCmd{Name: "orders"}},
		{Type: CmdRemoveNode, At: t0 + 2, RemoveNode: &RemoveNodeCmd{ID: "n1"}},
		{Type: CmdReplicaCaughtUp, At: t0 + 3, ReplicaCaughtUp: &ReplicaCmd{Queue: "orders", QueueID: 4, Index: 2, Node: "n2", Incarnation: 9}},
		{Type: CmdReplicaLeft, At: t0 + 4, ReplicaLeft: &ReplicaCmd{Queue: "orders", QueueID: 4, Index: 1, Node: "n3"}},
		{Type: CmdMoveReplica, At: t0 + 5, MoveReplica: &MoveReplicaCmd{Queue: "orders", QueueID: 4, Index: 0, From: "n1", To: "n4"}},
		{Type: CmdSetDraining, At: t0 + 6, SetDraining: &SetDrainingCmd{ID: "n2", Draining: true}},
		{Type: CmdPreferLeader, At: t0 + 7, PreferLeader: &ReplicaCmd{Queue: "orders", QueueID: 4, Index: 0, Node: "n2"}},
	}
}

func TestMeta_CommandTypesHaveNames(t *testing.T) {
	seen := map[string]bool{}
	for ct := CommandType(1); ct < cmdTypeEnd; ct++ {
		name := ct.String()
		if name == "" || strings.HasPrefix(name, "command(") || seen[name] {
			t.Fatalf("type %d named %q", ct, name)
		}
		seen[name] = true
	}
	if got := CommandType(0).String(); got != "command(0)" {
		t.Fatalf("zero type named %q", got)
	}
	if got := cmdTypeEnd.String(); got != "command(11)" {
		t.Fatalf("unknown type named %q", got)
	}
}

func TestMeta_CommandsRoundTripThroughEncoding(t *testing.T) {
	cmds := sampleCommands()
	if len(cmds) != int(cmdTypeEnd)-1 {
		t.Fatalf("sample covers %d of %d types", len(cmds), cmdTypeEnd-1)
	}
	for _, c := range cmds {
		data, err := EncodeCommand(c)
		if err != nil {
			t.Fatalf("encode %s: %v", c.Type, err)
		}
		got, err := DecodeCommand(data)
		if err != nil {
			t.Fatalf("decode %s: %v", c.Type, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("%s round trip:\n got %+v\nwant %+v", c.Type, got, c)
		}
		again, _ := EncodeCommand(got)
		if !bytes.Equal(again, data) {
			t.Fatalf("%s encodes differently after a round trip", c.Type)
		}
	}
}

func TestMeta_DecodeRejectsGarbage(t *testing.T) {
	good, _ := EncodeCommand(sampleCommands()[1])
	for name, data := range map[string][]byte{
		"empty":      nil,
		"junk":       []byte("not msgpack at all"),
		"truncated":  good[:len(good)-3],
		"trailing":   append(bytes.Clone(good), 0xc0),
		"bad type":   {0x82, 0xa1, 't', 0x0c, 0xa2, 'a', 't', 0x00, 0x80},
		"no payload": {0x82, 0xa1, 't', 0x02, 0xa2, 'a', 't', 0x00},
	} {
		if _, err := DecodeCommand(data); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestMeta_ApplyPanicsOnUndecodableEntry(t *testing.T) {
	f := New()
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("Apply accepted garbage")
		} else if !strings.Contains(r.(string), "undecodable") {
			t.Fatalf("panic %v", r)
		}
	}()
	f.Apply([]byte{0xff, 0x00, 0x13})
}

// createQueueV1 is a create-queue command as written to meta logs before
// the client stopped using -1 for 0: every layer below the client already
// meant "no limit" or "off" by 0, so old entries keep their meaning.
const createQueueV1 = "82a17402a26174cf17979cfe362a000082a46e616d65a66f7264657273a6636f6e66696783aa706172746974696f6e7302" +
	"a87265706c6963617300a5717565756589b27669736962696c6974795f74696d656f7574cf00000006fc23ac00ac6d61785f7265636569766573" +
	"00ac6261636b6f66665f62617365ce3b9aca00ab6261636b6f66665f6d6178cf00000045d964b800ac64656475705f77696e646f7700b16d61785f" +
	"6d6573736167655f6279746573ce00100000a96d61785f646570746800a96d61785f6279746573ce40000000a9726574656e74696f6e00"

func TestMeta_StoredCreateQueueKeepsItsMeaning(t *testing.T) {
	data, err := hex.DecodeString(createQueueV1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommand(data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	// Replicas 0 asks the catalog for its default; the zeros of the
	// partition config are no limit (receives, depth), dedup off and no
	// retention. The bounds on dead letters and on the dedup window, which
	// the entry predates, take their defaults.
	want := Command{Type: CmdCreateQueue, At: 1_700_000_000_000_000_000, CreateQueue: &CreateQueueCmd{Name: "orders",
		Config: QueueConfig{Partitions: 2, Replicas: 0, Queue: fsm.QueueConfig{VisibilityTimeout: 30 * time.Second,
			MaxReceives: 0, BackoffBase: time.Second, BackoffMax: 5 * time.Minute, DedupWindow: 0,
			MaxMessageBytes: 1 << 20, MaxDepth: 0, MaxBytes: 1 << 30, Retention: 0,
			MaxDead: fsm.DefaultMaxDead, MaxDeadBytes: fsm.DefaultMaxDeadBytes, DedupMaxIDs: fsm.DefaultDedupMaxIDs}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant %+v", got.CreateQueue, want.CreateQueue)
	}
	if err := got.CreateQueue.Config.Validate(); err != nil {
		t.Fatalf("stored config no longer valid: %v", err)
	}
	// Re-encoded, it now spells the bounds out and still means the same.
	again, err := EncodeCommand(got)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	if back, err := DecodeCommand(again); err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("re-encoded entry decodes to %+v (%v)", back.CreateQueue, err)
	}
}
