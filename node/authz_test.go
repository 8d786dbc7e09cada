package node

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/wire"
)

// Every op of the protocol has a decided permission, and an op this table
// does not know needs cluster admin (deny by default).
func TestAuthz_EveryOpNeedsItsPermission(t *testing.T) {
	want := map[wire.Op]auth.Action{
		wire.OpMetadata: needNothing, wire.OpListQueues: needNothing, wire.OpQueueStats: needSee,
		wire.OpCreateQueue: auth.Admin, wire.OpUpdateQueue: auth.Admin, wire.OpDeleteQueue: auth.Admin,
		wire.OpSend: auth.Send, wire.OpReceive: auth.Receive, wire.OpAck: auth.Receive, wire.OpExtend: auth.Receive,
		wire.OpNack: auth.Receive, wire.OpReject: auth.Receive, wire.OpPeek: auth.Receive | auth.Admin,
		wire.OpDeadList: auth.Admin, wire.OpDeadPeek: auth.Admin, wire.OpDeadRedrive: auth.Admin,
		wire.OpDeadDelete: auth.Admin, wire.OpPurge: auth.Admin, wire.OpRemoveNode: needCluster,
	}
	for op := wire.Op(1); op.Valid(); op++ {
		got, ok := want[op]
		if !ok {
			t.Errorf("%s: no permission decided; add it to requiredAction and this table", op)
			continue
		}
		if _, need := requiredAction(wire.NewRequestBody(op)); need != got {
			t.Errorf("%s: needs %d, want %d", op, need, got)
		}
	}
	if _, need := requiredAction(struct{}{}); need != needCluster {
		t.Errorf("unknown request: needs %d, want cluster admin", need)
	}
	if _, need := requiredAction(&wire.MetadataRequest{Queue: "q"}); need != needSee {
		t.Errorf("metadata of one queue: needs %d, want any permission on it", need)
	}
}

func TestAuthz_AuthorizeByToken(t *testing.T) {
	f := auth.File{Tokens: []auth.FileToken{
		{Name: "ops", SHA256: auth.HashSecret("ops"), Cluster: []string{"admin"}},
		{Name: "orders", SHA256: auth.HashSecret("orders"),
			Permissions: []auth.FilePermission{{Queues: []string{"orders.*"}, Actions: []string{"receive"}}}},
	}}
	data, _ := json.Marshal(f)
	set, err := auth.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	ops, _ := set.Lookup("ops")
	orders, _ := set.Lookup("orders")
	for _, tc := range []struct {
		tok *auth.Token
		req any
		ok  bool
	}{
		{nil, &wire.RemoveNodeRequest{ID: "n1"}, true}, // auth off
		{ops, &wire.RemoveNodeRequest{ID: "n1"}, true},
		{orders, &wire.RemoveNodeRequest{ID: "n1"}, false},
		{orders, &wire.ReceiveRequest{Queue: "orders.eu"}, true},
		{orders, &wire.PeekRequest{Queue: "orders.eu"}, true},
		{orders, &wire.SendRequest{Queue: "orders.eu"}, false},
		{orders, &wire.ReceiveRequest{Queue: "billing"}, false},
		{orders, &wire.QueueStatsRequest{Queue: "orders.eu"}, true},
		{orders, &wire.QueueStatsRequest{Queue: "billing"}, false},
		{orders, &wire.MetadataRequest{Queue: "billing"}, false},
		{orders, &wire.MetadataRequest{}, true},
		{orders, &wire.CreateQueueRequest{Name: "orders.new"}, false},
	} {
		err := authorize(tc.tok, tc.req)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, wire.ErrUnauthorized)) {
			t.Errorf("%v %s: %v, want allowed=%v", tc.tok != nil, reflect.TypeOf(tc.req), err, tc.ok)
		}
	}
	qs := visibleQueues(orders, []wire.QueueInfo{{Name: "orders.eu"}, {Name: "billing"}})
	if len(qs) != 1 || qs[0].Name != "orders.eu" {
		t.Fatalf("visible to orders: %+v", qs)
	}
}

// A connection looks its token up again after a reload: a removed token is
// refused from the next request on; a node without tokens refuses a reload.
func TestAuthz_ReloadReachesOpenConnections(t *testing.T) {
	parse := func(names ...string) *auth.Set {
		var f auth.File
		for _, n := range names {
			f.Tokens = append(f.Tokens, auth.FileToken{Name: n, SHA256: auth.HashSecret(n + "-secret"), Cluster: []string{"admin"}})
		}
		data, _ := json.Marshal(f)
		set, err := auth.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	var store tokenStore
	conn := &connAuth{store: &store}
	if err := conn.checkHello(wire.Hello{}); err != nil {
		t.Fatalf("auth off: %v", err)
	}
	store.store(parse("a", "b"))
	if err := conn.checkHello(wire.Hello{}); !errors.Is(err, wire.ErrUnauthorized) {
		t.Fatalf("no token: %v", err)
	}
	if err := conn.checkHello(wire.Hello{Token: "b-secret"}); err != nil {
		t.Fatal(err)
	}
	if tok, err := conn.token(); err != nil || tok.Name != "b" {
		t.Fatalf("token before reload: %v, %v", tok, err)
	}
	store.store(parse("a"))
	if _, err := conn.token(); !errors.Is(err, wire.ErrUnauthorized) {
		t.Fatalf("token after its removal: %v", err)
	}
	store.store(parse("a", "b"))
	if tok, err := conn.token(); err != nil || tok.Name != "b" {
		t.Fatalf("token after it came back: %v, %v", tok, err)
	}
	if err := (&Node{}).SetTokens(parse("a")); err == nil {
		t.Fatal("SetTokens on a node without tokens succeeded")
	}
}
