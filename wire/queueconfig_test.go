package wire

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// fullConfig sets every field to a value unlike its default.
func fullConfig() QueueConfig {
	return QueueConfig{Partitions: 2, Replicas: 3, VisibilityTimeout: 45 * time.Second, MaxReceives: 7,
		BackoffBase: 2 * time.Second, BackoffMax: time.Hour, DedupWindow: time.Minute, MaxMessageBytes: 4096,
		MaxDepth: 100, MaxBytes: 1 << 20, Retention: 90 * time.Minute, MaxDead: 50, MaxDeadBytes: 1 << 25,
		DeadRetention: 48 * time.Hour, DedupMaxIDs: 5000}
}

// TestQueueConfig_EncodingsUnchanged pins the bytes of a config and of a
// create request, recorded before the field set was derived from the
// struct.
func TestQueueConfig_EncodingsUnchanged(t *testing.T) {
	const (
		full    = "8faa706172746974696f6e7302a87265706c6963617303b27669736962696c6974795f74696d656f7574d30000000a7a358200ac6d61785f726563656976657307ac6261636b6f66665f62617365d30000000077359400ab6261636b6f66665f6d6178d30000034630b8a000ac64656475705f77696e646f77d30000000df8475800b16d61785f6d6573736167655f6279746573cd1000a96d61785f6465707468d30000000000000064a96d61785f6279746573d30000000000100000a9726574656e74696f6ed3000004e94914f000a86d61785f64656164d30000000000000032ae6d61785f646561645f6279746573d30000000002000000ae646561645f726574656e74696f6ed300009d29229e0000ad64656475705f6d61785f696473d30000000000001388"
		partial = "82a96d61785f6465707468d30000000000000009a9726574656e74696f6ed3000000003b9aca00"
		create  = "83a46e616d65a171a6636f6e666967" + full + "a3736574ce00000500"
	)
	for _, k := range []struct {
		name string
		v    any
		want string
	}{
		{"full config", fullConfig(), full},
		{"partial config", QueueConfig{MaxDepth: 9, Retention: time.Second}, partial},
		{"create request", CreateQueueRequest{Name: "q", Config: fullConfig(), Set: FieldMaxDepth | FieldRetention}, create},
	} {
		b, err := msgpack.Marshal(k.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != k.want {
			t.Errorf("%s: encoding changed:\n got %s\nwant %s", k.name, got, k.want)
		}
	}
}

// TestConfigFields_BitsAndNamesPinned pins each field's bit and name: bits
// are part of the protocol.
func TestConfigFields_BitsAndNamesPinned(t *testing.T) {
	const want = "partitions|replicas|visibility_timeout|max_receives|backoff_base|backoff_max|dedup_window|" +
		"max_message_bytes|max_depth|max_bytes|retention|max_dead|max_dead_bytes|dead_retention|dedup_max_ids|max_in_flight|max_delivery_rate|fair_groups"
	if got := AllConfigFields.String(); got != want {
		t.Fatalf("fields %s, want %s", got, want)
	}
	for _, k := range []struct {
		f    ConfigFields
		name string
	}{{FieldPartitions, "partitions"}, {FieldVisibilityTimeout, "visibility_timeout"}, {FieldMaxDepth, "max_depth"},
		{FieldRetention, "retention"}, {FieldDedupMaxIDs, "dedup_max_ids"}, {FieldMaxInFlight, "max_in_flight"}} {
		if got, ok := ConfigFieldNamed(k.name); !ok || got != k.f {
			t.Errorf("%s: bit %v (%v), want %v", k.name, got, ok, k.f)
		}
	}
	if _, ok := ConfigFieldNamed("no_such_setting"); ok {
		t.Error("an unknown name has a bit")
	}
}

// TestConfigFields_ApplyGetSetCoverEveryField sets each field alone and
// checks that Apply copies exactly that field, so a new field cannot be
// left out of them.
func TestConfigFields_ApplyGetSetCoverEveryField(t *testing.T) {
	src := fullConfig()
	src.MaxInFlight, src.MaxDeliveryRate, src.FairGroups = 64, 500, 1 // set after the pinned encodings were recorded
	for _, f := range ConfigFieldList() {
		var dst QueueConfig
		f.Field.Apply(&dst, src)
		var want QueueConfig
		want.Set(f.Field, src.Get(f.Field))
		if dst != want || dst.Get(f.Field) == 0 {
			t.Errorf("%s: Apply gave %+v, want %+v", f.Name, dst, want)
		}
	}
	var all QueueConfig
	AllConfigFields.Apply(&all, src)
	if all != src {
		t.Fatalf("Apply(all) = %+v, want %+v", all, src)
	}
	var c QueueConfig
	c.Set(FieldMaxDepth|FieldMaxBytes, 5) // two bits: not one field
	c.Set(1<<31, 5)                       // a bit this version does not know
	if c != (QueueConfig{}) || c.Get(1<<31) != 0 {
		t.Fatalf("Set with a bad field changed the config: %+v", c)
	}
}
