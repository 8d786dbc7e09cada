package node

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/wire"
)

// Every op of the protocol has a decided permission in auth's table, each
// request names its own op, and an op the table does not know needs
// cluster admin (deny by default).
func TestAuthz_EveryOpNeedsItsPermission(t *testing.T) {
	want := map[wire.Op]auth.Need{
		wire.OpMetadata: auth.NeedSee, wire.OpListQueues: auth.NeedNothing, wire.OpQueueStats: auth.NeedSee,
		wire.OpCreateQueue: auth.NeedAdmin, wire.OpUpdateQueue: auth.NeedAdmin, wire.OpDeleteQueue: auth.NeedAdmin,
		wire.OpSend: auth.NeedSend, wire.OpReceive: auth.NeedReceive, wire.OpAck: auth.NeedReceive, wire.OpExtend: auth.NeedReceive,
		wire.OpNack: auth.NeedReceive, wire.OpReject: auth.NeedReceive, wire.OpPeek: auth.NeedReceiveOrAdmin,
		wire.OpDeadList: auth.NeedAdmin, wire.OpDeadPeek: auth.NeedAdmin, wire.OpDeadRedrive: auth.NeedAdmin,
		wire.OpDeadDelete: auth.NeedAdmin, wire.OpPurge: auth.NeedAdmin, wire.OpPause: auth.NeedAdmin,
		wire.OpFindMessage: auth.NeedReceiveOrAdmin, wire.OpDeleteMessage: auth.NeedAdmin, wire.OpDeleteMessages: auth.NeedAdmin,
		wire.OpSetSchedule: auth.NeedAdmin, wire.OpListSchedules: auth.NeedAdmin, wire.OpDeleteSchedule: auth.NeedAdmin,
		wire.OpRemoveNode: auth.NeedCluster,
		wire.OpListNodes:  auth.NeedCluster, wire.OpDrainNode: auth.NeedCluster, wire.OpRebalance: auth.NeedCluster,
		wire.OpSafeToStop: auth.NeedCluster, wire.OpQueueSettings: auth.NeedNothing,
	}
	for op := wire.Op(1); op.Valid(); op++ {
		got, ok := want[op]
		if !ok {
			t.Errorf("%s: no permission decided; add it to auth's table and this one", op)
			continue
		}
		if need := auth.OpNeed(op); need != got {
			t.Errorf("%s: needs %s, want %s", op, need, got)
		}
		in := wire.NewRequestBody(op)
		if m, ok := in.(*wire.MetadataRequest); ok {
			m.Queue = "q"
		}
		if _, named := requiredAction(in); named != op {
			t.Errorf("%s request is checked as %s", op, named)
		}
	}
	if _, op := requiredAction(struct{}{}); auth.OpNeed(op) != auth.NeedCluster {
		t.Errorf("unknown request: checked as %s, want cluster admin", op)
	}
	if auth.OpNeed(wire.Op(200)) != auth.NeedCluster {
		t.Error("an op the table does not know must need cluster admin")
	}
	if _, op := requiredAction(&wire.MetadataRequest{}); op != wire.OpListQueues {
		t.Errorf("metadata without a queue: checked as %s, want a listing", op)
	}
}

func TestAuthz_AuthorizeByToken(t *testing.T) {
	f := auth.File{Tokens: []auth.FileToken{
		{Name: "ops", SHA256: auth.HashSecret("ops"), Cluster: []string{"admin"}},
		{Name: "orders", SHA256: auth.HashSecret("orders"),
			Permissions: []auth.FilePermission{{Queues: []string{"orders.*"}, Actions: []string{"receive"}}}},
		{Name: "every", SHA256: auth.HashSecret("every"),
			Permissions: []auth.FilePermission{{Queues: []string{"*", "sqs.*", "sqs.meta"}, Actions: []string{"send", "receive", "admin"}}}},
	}}
	data, _ := json.Marshal(f)
	set, err := auth.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	ops, _ := set.Lookup("ops")
	orders, _ := set.Lookup("orders")
	every, _ := set.Lookup("every")
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
		// The reserved queues are no token's: not a "*" pattern's, not a
		// cluster admin's; only the cluster's own identity reaches them.
		{every, &wire.SendRequest{Queue: auth.SQSMetaQueue}, false},
		{every, &wire.DeadPeekRequest{Queue: auth.SQSMetaQueue}, false},
		{every, &wire.SendRequest{Queue: "anything"}, true},
		{ops, &wire.SendRequest{Queue: auth.SQSMetaQueue}, false},
		{ops, &wire.CreateQueueRequest{Name: auth.SQSMetaQueue}, false},
		{ops, &wire.MetadataRequest{Queue: auth.SQSMetaQueue}, false},
		{memberToken, &wire.SendRequest{Queue: auth.SQSMetaQueue}, true},
		{memberToken, &wire.DeadDeleteRequest{Queue: auth.SQSMetaQueue}, true},
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
	all := []wire.QueueInfo{{Name: "jobs"}, {Name: auth.SQSMetaQueue}}
	for _, tok := range []*auth.Token{every, ops} {
		if qs := visibleQueues(tok, all); len(qs) != 1 || qs[0].Name != "jobs" {
			t.Errorf("visible to %s: %+v, want jobs without the reserved queue", tok.Name, qs)
		}
	}
	if qs := visibleQueues(memberToken, all); len(qs) != 2 {
		t.Errorf("visible to a member: %+v", qs)
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

// TestAuthz_TokensReloadedClosesAfterTheNewSet: the channel closes at the
// next reload, when the new set is already the current one, and a new
// channel waits for the reload after.
func TestAuthz_TokensReloadedClosesAfterTheNewSet(t *testing.T) {
	var store tokenStore
	store.store(&auth.Set{})
	ch := store.next()
	select {
	case <-ch:
		t.Fatal("closed before any reload")
	default:
	}
	next := &auth.Set{}
	store.store(next)
	select {
	case <-ch:
	default:
		t.Fatal("not closed by the reload")
	}
	if store.load().set != next {
		t.Fatal("closed before the new set was in force")
	}
	select {
	case <-store.next():
		t.Fatal("the next channel is closed already")
	default:
	}
}
