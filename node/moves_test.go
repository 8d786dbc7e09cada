package node

import (
	"fmt"
	"testing"

	"github.com/ferrymq/ferry/meta"
)

// catalogNode returns a node whose catalog is f (enough for the shape
// duties that only read it).
func catalogNode(f *meta.FSM) *Node {
	n := &Node{}
	n.meta = &metaGroup{fsm: f}
	return n
}

func applyMeta(t *testing.T, f *meta.FSM, c meta.Command) meta.Result {
	t.Helper()
	data, err := meta.EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	return f.Apply(data)
}

// The meta leader proposes a gossiped move report only in the move epoch
// it was made under: a "left" report of an earlier move of the same
// replica is not wanted.
func TestReportCommand_RefusesReportsOfAnEarlierMove(t *testing.T) {
	f := meta.New()
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("n%d", i)
		nd := meta.Node{ID: id, RaftAddr: id + ":1", ClientAddr: id + ":2", HTTPAddr: id + ":3"}
		if r := applyMeta(t, f, meta.Command{Type: meta.CmdRegisterNode, RegisterNode: &meta.RegisterNodeCmd{Node: nd}}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	cfg := meta.DefaultQueueConfig()
	cfg.Partitions, cfg.Replicas = 1, 3
	q := applyMeta(t, f, meta.Command{Type: meta.CmdCreateQueue, CreateQueue: &meta.CreateQueueCmd{Name: "jobs", Config: cfg}}).Queue
	from := q.Partitions[0].Replicas[1]
	to := "n4"
	if from == to {
		t.Fatalf("placement %v", q.Partitions[0].Replicas)
	}
	move := func(a, b string) uint64 {
		t.Helper()
		r := applyMeta(t, f, meta.Command{Type: meta.CmdMoveReplica, MoveReplica: &meta.MoveReplicaCmd{Queue: "jobs", QueueID: q.ID, From: a, To: b}})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		p, _ := f.Queue("jobs")
		return p.Partitions[0].MoveEpoch
	}
	n := catalogNode(f)
	e1 := move(from, to)
	left1 := moveReport{Kind: reportLeft, Queue: "jobs", QueueID: q.ID, Node: from, Epoch: e1}
	if cmd, wanted := n.reportCommand(left1); !wanted || cmd.ReplicaLeft.MoveEpoch != e1 {
		t.Fatalf("the current move's report: wanted %v, %+v", wanted, cmd.ReplicaLeft)
	}
	for _, c := range []meta.Command{
		{Type: meta.CmdReplicaCaughtUp, ReplicaCaughtUp: &meta.ReplicaCmd{Queue: "jobs", QueueID: q.ID, Node: to, MoveEpoch: e1}},
		{Type: meta.CmdReplicaLeft, ReplicaLeft: &meta.ReplicaCmd{Queue: "jobs", QueueID: q.ID, Node: from, MoveEpoch: e1}},
	} {
		if r := applyMeta(t, f, c); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	move(to, from) // back again...
	p, _ := f.Queue("jobs")
	if _, wanted := n.reportCommand(moveReport{Kind: reportCaughtUp, Queue: "jobs", QueueID: q.ID, Node: from, Epoch: e1}); wanted {
		t.Fatal("a caught-up report of move 1 was wanted in move 2")
	}
	for _, c := range []meta.Command{
		{Type: meta.CmdReplicaCaughtUp, ReplicaCaughtUp: &meta.ReplicaCmd{Queue: "jobs", QueueID: q.ID, Node: from, MoveEpoch: p.Partitions[0].MoveEpoch}},
		{Type: meta.CmdReplicaLeft, ReplicaLeft: &meta.ReplicaCmd{Queue: "jobs", QueueID: q.ID, Node: to, MoveEpoch: p.Partitions[0].MoveEpoch}},
	} {
		if r := applyMeta(t, f, c); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	move(from, to) // ...and away again: move 1's report still circulates
	if _, wanted := n.reportCommand(left1); wanted {
		t.Fatal("move 1's left report was wanted in move 3: the replica would be recorded gone while it still votes")
	}
}
