package meta

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// sampleCommands has one command of every type, with every field set.
func sampleCommands() []Command {
	cfg := QueueConfig{Partitions: 3, Replicas: 2, Queue: partitionConfig()}
	cfg.Queue.MaxDepth, cfg.Queue.MaxBytes, cfg.Queue.Retention = 10, 1<<20, 7
	n := node("n1")
	n.RegisteredAt = 5
	return []Command{
		{Type: CmdRegisterNode, At: t0, RegisterNode: &RegisterNodeCmd{Node: n}},
		{Type: CmdCreateQueue, At: t0 + 1, CreateQueue: &CreateQueueCmd{Name: "orders", Config: cfg}},
		{Type: CmdUpdateQueue, At: -1, UpdateQueue: &UpdateQueueCmd{Name: "orders", Config: QueueConfig{Queue: cfg.Queue}}},
		{Type: CmdDeleteQueue, At: 0, DeleteQueue: &DeleteQueueCmd{Name: "orders"}},
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
	if got := cmdTypeEnd.String(); got != "command(5)" {
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
		"bad type":   {0x82, 0xa1, 't', 0x09, 0xa2, 'a', 't', 0x00, 0x80},
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
