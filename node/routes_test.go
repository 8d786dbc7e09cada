package node

import (
	"context"
	"reflect"
	"testing"

	"github.com/ferrymq/ferry/wire"
)

// Every op the wire decodes has one entry in the request table, for the
// body type the wire decodes it into, and the entry names that op as the
// permission it needs (a metadata request with a queue; without one it is
// a listing). An op added to the wire without an entry fails here.
func TestRoutes_EveryOpHasOneEntry(t *testing.T) {
	seen := map[reflect.Type]wire.Op{}
	for op := wire.Op(1); op.Valid(); op++ {
		in := wire.NewRequestBody(op)
		if in == nil {
			t.Errorf("%s: the wire decodes no body for it", op)
			continue
		}
		rt, ok := routes[op]
		if !ok {
			t.Errorf("%s: no entry in the request table", op)
			continue
		}
		if got := reflect.TypeOf(in); rt.body != got {
			t.Errorf("%s: entry takes %v, the wire decodes %v", op, rt.body, got)
		}
		if prev, dup := seen[rt.body]; dup {
			t.Errorf("%s and %s share body type %v", op, prev, rt.body)
		}
		seen[rt.body] = op
		if m, ok := in.(*wire.MetadataRequest); ok {
			m.Queue = "q"
		}
		if _, named := rt.action(in); named != op {
			t.Errorf("%s: entry checks permission as %s", op, named)
		}
	}
	if len(routes) != len(seen) {
		t.Errorf("%d entries, %d ops the wire decodes", len(routes), len(seen))
	}
}

// An op the table does not know is refused as malformed before anything
// else, and never reaches a handler.
func TestRoutes_UnknownOpIsMalformed(t *testing.T) {
	n := &Node{}
	_, err := n.dispatchDecoded(context.Background(), wire.Request{ID: 1, Op: wire.Op(200)}, nil)
	if wire.CodeOf(err) != wire.CodeMalformed {
		t.Fatalf("unknown op: %v, want malformed", err)
	}
}
