package fsm

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestSettings_BoundsAreEnforcedByValidate walks the settings table: each
// setting's minimum and maximum are accepted, one past either is refused
// with an error naming the field, so the table and Validate cannot say
// different things.
func TestSettings_BoundsAreEnforcedByValidate(t *testing.T) {
	for _, s := range Settings() {
		try := func(v int64) error {
			c := DefaultQueueConfig()
			c.BackoffBase, c.BackoffMax = 0, BackoffMaxLimit // keep the cross-field rule out of the way
			s.Set(&c, v)
			if got := s.Get(c); got != v {
				t.Fatalf("%s: Set %d, Get %d", s.Name, v, got)
			}
			return c.Validate()
		}
		if err := try(s.Min); err != nil {
			t.Errorf("%s: minimum %d refused: %v", s.Name, s.Min, err)
		}
		err := try(s.Min - 1)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "QueueConfig."+s.FieldName()+" ") {
			t.Errorf("%s: %d accepted or refused without naming the field: %v", s.Name, s.Min-1, err)
		}
		if s.Max == 0 {
			continue
		}
		if err := try(s.Max); err != nil {
			t.Errorf("%s: maximum %d refused: %v", s.Name, s.Max, err)
		}
		if err := try(s.Max + 1); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %d accepted: %v", s.Name, s.Max+1, err)
		}
	}
}

// TestSettings_DefaultsComeFromTheTable checks DefaultQueueConfig field by
// field against the table, and pins the defaults the design documents.
func TestSettings_DefaultsComeFromTheTable(t *testing.T) {
	c := DefaultQueueConfig()
	for _, s := range Settings() {
		if got := s.Get(c); got != s.Default {
			t.Errorf("%s: default %d, table %d", s.Name, got, s.Default)
		}
	}
	if c.VisibilityTimeout.String() != "30s" || c.MaxReceives != 10 || c.MaxMessageBytes != 1<<20 || c.MaxDead != 10_000 {
		t.Errorf("defaults drifted: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestSettings_BackoffMaxBelowBaseIsRefused keeps the one rule that spans
// two settings.
func TestSettings_BackoffMaxBelowBaseIsRefused(t *testing.T) {
	c := DefaultQueueConfig()
	c.BackoffBase = 2 * c.BackoffMax
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "QueueConfig.BackoffMax") {
		t.Fatalf("BackoffMax < BackoffBase: %v", err)
	}
}

// TestQueueConfig_EncodingUnchanged pins the bytes a config is stored with
// in the log and in snapshots, recorded before the settings table existed.
func TestQueueConfig_EncodingUnchanged(t *testing.T) {
	const recorded = "8db27669736962696c6974795f74696d656f7574d300000006fc23ac00ac6d61785f72656365697665730aac6261636b6f66665f62617365d3000000003b9aca00ab6261636b6f66665f6d6178d300000045d964b800ac64656475705f77696e646f77d300000045d964b800b16d61785f6d6573736167655f6279746573ce00100000a96d61785f6465707468d30000000000000003a96d61785f6279746573d30000000000000000a9726574656e74696f6ed30000000000000000a86d61785f64656164d30000000000002710ae6d61785f646561645f6279746573d30000000040000000ae646561645f726574656e74696f6ed30000000000000000ad64656475705f6d61785f696473d300000000000f4240"
	c := DefaultQueueConfig()
	c.MaxDepth = 3
	b, err := msgpack.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(b); got != recorded {
		t.Fatalf("encoding changed:\n got %s\nwant %s", got, recorded)
	}
	var back QueueConfig
	if err := msgpack.Unmarshal(b, &back); err != nil || back != c {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}
