package meta

import (
	"encoding/hex"
	"testing"

	"github.com/ferrymq/ferry/fsm"
	"github.com/vmihailenco/msgpack/v5"
)

// TestQueueConfig_CatalogEncodingUnchanged pins the bytes a queue's config
// is kept with in the catalog's log and snapshots, recorded before fsm's
// settings table existed.
func TestQueueConfig_CatalogEncodingUnchanged(t *testing.T) {
	const recorded = "83aa706172746974696f6e7304a87265706c6963617303a571756575658db27669736962696c6974795f74696d656f7574d300000006fc23ac00ac6d61785f72656365697665730aac6261636b6f66665f62617365d3000000003b9aca00ab6261636b6f66665f6d6178d300000045d964b800ac64656475705f77696e646f77d300000045d964b800b16d61785f6d6573736167655f6279746573ce00100000a96d61785f6465707468d30000000000000003a96d61785f6279746573d30000000000000000a9726574656e74696f6ed30000000000000000a86d61785f64656164d30000000000002710ae6d61785f646561645f6279746573d30000000040000000ae646561645f726574656e74696f6ed30000000000000000ad64656475705f6d61785f696473d300000000000f4240"
	q := fsm.DefaultQueueConfig()
	q.MaxDepth = 3
	c := QueueConfig{Partitions: 4, Replicas: 3, Queue: q}
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
