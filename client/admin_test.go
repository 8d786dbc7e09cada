package client_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/wire"
)

func TestClient_QueueAdmin(t *testing.T) {
	fc := newFake(t, 3)
	// Seeds start with node 1: catalog changes are redirected to node 0.
	addrs := fc.Addrs()
	c, err := client.Dial(testCtx(t, 5*time.Second), []string{addrs[1], addrs[2], addrs[0]})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	ctx := testCtx(t, 5*time.Second)

	err = c.CreateQueue(ctx, "jobs",
		client.Partitions(3), client.MaxReceives(0), client.DedupWindow(0), client.VisibilityTimeout(time.Minute))
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	creates := fc.requests(wire.OpCreateQueue)
	if len(creates) != 2 || creates[0].node != 1 || creates[1].node != 0 {
		t.Fatalf("create requests went to %v, want node 1 then node 0", nodesOf(creates))
	}
	req := creates[1].body.(*wire.CreateQueueRequest)
	wantSet := wire.FieldPartitions | wire.FieldMaxReceives | wire.FieldDedupWindow | wire.FieldVisibilityTimeout
	if req.Set != wantSet || req.Config.MaxReceives != 0 || req.Config.DedupWindow != 0 || req.Config.Partitions != 3 {
		t.Fatalf("create request %+v (set %v)", req.Config, req.Set)
	}
	if err := c.CreateQueue(ctx, "jobs"); !errors.Is(err, client.ErrQueueExists) {
		t.Fatalf("second CreateQueue: %v", err)
	}
	if err := c.CreateQueue(ctx, "bad", client.Partitions(65)); !errors.Is(err, client.ErrInvalidConfig) {
		t.Fatalf("CreateQueue with 65 partitions: %v", err)
	}
	// The new queue is usable at once, through the cached placement.
	if _, err := c.Queue("jobs").SendBatch(ctx, make([]client.Message, 9)); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	checkQueueAdmin(t, fc, c)
}

// checkQueueAdmin updates, lists, inspects, purges and deletes the queue
// "jobs" made by TestClient_QueueAdmin.
func checkQueueAdmin(t *testing.T, fc *fakeCluster, c *client.Client) {
	ctx := testCtx(t, 5*time.Second)
	if err := c.UpdateQueue(ctx, "jobs", client.MaxDepth(100), client.BackoffBase(time.Second)); err != nil {
		t.Fatalf("UpdateQueue: %v", err)
	}
	upd := fc.requests(wire.OpUpdateQueue)
	if u := upd[len(upd)-1].body.(*wire.UpdateQueueRequest); u.Set != wire.FieldMaxDepth|wire.FieldBackoffBase {
		t.Fatalf("update set %v", u.Set)
	}
	qs, err := c.ListQueues(ctx, "jo")
	if err != nil || len(qs) != 1 {
		t.Fatalf("ListQueues: %v %+v", err, qs)
	}
	cfg := qs[0].Config
	if cfg.Partitions != 3 || cfg.MaxReceives != 0 || cfg.DedupWindow != 0 ||
		cfg.MaxDepth != 100 || cfg.VisibilityTimeout != time.Minute || len(qs[0].Partitions) != 3 {
		t.Fatalf("listed config %+v", qs[0])
	}
	// A config read back can be edited and sent back as it is; its zeros
	// stay zeros.
	cfg.MaxDepth = 0
	if err := c.UpdateQueue(ctx, "jobs", client.SettingsOf(cfg)); err != nil {
		t.Fatalf("UpdateQueue with a read-back config: %v", err)
	}
	upd = fc.requests(wire.OpUpdateQueue)
	u := upd[len(upd)-1].body.(*wire.UpdateQueueRequest)
	if u.Set.Has(wire.FieldPartitions) || u.Set.Has(wire.FieldReplicas) || !u.Set.Has(wire.FieldMaxDepth|wire.FieldMaxReceives) {
		t.Fatalf("read-back update set %v", u.Set)
	}
	if qs, err = c.ListQueues(ctx, "jobs"); err != nil || qs[0].Config != cfg {
		t.Fatalf("config after a read-back update: %v %+v, want %+v", err, qs, cfg)
	}

	st, err := c.QueueStats(ctx, "jobs")
	if err != nil || len(st.Partitions) != 3 || st.Total().Ready != 9 {
		t.Fatalf("QueueStats: %v %+v", err, st)
	}
	n, err := c.Purge(ctx, "jobs")
	if err != nil || n != 9 {
		t.Fatalf("Purge: %d, %v", n, err)
	}
	ci, err := c.Cluster(ctx)
	if err != nil || len(ci.Nodes) != 3 || len(ci.Queues) != 1 || ci.Nodes[0].State != client.NodeAlive {
		t.Fatalf("Cluster: %v %+v", err, ci)
	}
	if got, want := ci.Queues[0].Partitions[2].LeaderAddr, fc.Addrs()[2]; got != want {
		t.Fatalf("partition 2 led at %s, want %s", got, want)
	}
	if err := c.DeleteQueue(ctx, "jobs"); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	if _, err := c.Queue("jobs").Send(ctx, client.Message{}); !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("Send to a deleted queue: %v", err)
	}
}

func TestClient_DeadLetters(t *testing.T) {
	fc := newFake(t, 2)
	fc.addQueue("q", wire.QueueConfig{Partitions: 2})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	q := c.Queue("q")
	var msgs []client.Message
	for i := range 7 {
		msgs = append(msgs, client.Message{ID: idFor(i%2, 2, "d"+string(rune('a'+i))), Group: "", Body: []byte{byte(i)}})
	}
	if _, err := q.SendBatch(ctx, msgs); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	for i, err := range q.RejectBatch(ctx, receiveAll(t, q, 7), "broken") {
		if err != nil {
			t.Fatalf("reject %d: %v", i, err)
		}
	}
	letters, err := c.DeadLetters(ctx, "q", client.DeadFilter{})
	if err != nil || len(letters) != 7 {
		t.Fatalf("DeadLetters: %v, %d letters", err, len(letters))
	}
	if l := letters[0]; l.Reason != client.DeadRejected || l.ReasonText != "broken" || l.Body != nil || l.DeadAt.IsZero() {
		t.Fatalf("letter %+v", l)
	}
	peeked, err := c.PeekDeadLetters(ctx, "q", client.DeadFilter{Limit: 3})
	if err != nil || len(peeked) != 3 || peeked[0].Body == nil {
		t.Fatalf("PeekDeadLetters: %v %+v", err, peeked)
	}
	one := letters[0]
	n, err := c.DeleteDeadLetters(ctx, "q", client.DeadFilter{Partitions: []int{one.Partition}, Seqs: []uint64{one.Seq}})
	if err != nil || n != 1 {
		t.Fatalf("DeleteDeadLetters: %d, %v", n, err)
	}
	if _, err := c.DeleteDeadLetters(ctx, "q", client.DeadFilter{Seqs: []uint64{1}}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Seqs without a partition: %v", err)
	}
	n, err = c.RedriveDeadLetters(ctx, "q", client.DeadFilter{Limit: 4})
	if err != nil || n != 4 {
		t.Fatalf("RedriveDeadLetters with limit 4: %d, %v", n, err)
	}
	n, err = c.RedriveDeadLetters(ctx, "q", client.DeadFilter{})
	if err != nil || n != 2 {
		t.Fatalf("RedriveDeadLetters: %d, %v", n, err)
	}
	st, err := c.QueueStats(ctx, "q")
	if err != nil || st.Total().Ready != 6 || st.Total().Dead != 0 {
		t.Fatalf("stats after redrive %+v, %v", st.Total(), err)
	}
}

func TestClient_DeadLetterPaging(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	q := c.Queue("q")
	const total = 1500 // more than one page
	if _, err := q.SendBatch(ctx, make([]client.Message, total)); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	ds := receiveAll(t, q, total)
	for _, err := range q.RejectBatch(ctx, ds, "x") {
		if err != nil {
			t.Fatalf("RejectBatch: %v", err)
		}
	}
	letters, err := c.DeadLetters(ctx, "q", client.DeadFilter{})
	if err != nil || len(letters) != total {
		t.Fatalf("DeadLetters: %v, %d letters", err, len(letters))
	}
	n, err := c.RedriveDeadLetters(ctx, "q", client.DeadFilter{})
	if err != nil || n != total {
		t.Fatalf("RedriveDeadLetters: %d, %v", n, err)
	}
	for _, r := range fc.requests(wire.OpReject) {
		if k := len(r.body.(*wire.RejectRequest).Items); k > 1000 {
			t.Fatalf("reject request of %d items", k)
		}
	}
}

// A dead-letter peek whose letters hold more than the server's answer
// budget (wire.PeekBytesMax) comes back in pages the server ends by bytes;
// the client follows them and returns every letter.
func TestClient_PeekDeadLettersFollowsByteBoundedPages(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{MaxMessageBytes: 2 << 20})
	c := dial(t, fc)
	ctx := testCtx(t, 10*time.Second)
	q := c.Queue("q")
	const total, size = 6, 1 << 20 // 6 MiB of bodies: more than one answer
	msgs := make([]client.Message, total)
	for i := range msgs {
		msgs[i].Body = bytes.Repeat([]byte{byte('a' + i)}, size)
	}
	if _, err := q.SendBatch(ctx, msgs); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	for _, err := range q.RejectBatch(ctx, receiveAll(t, q, total), "x") {
		if err != nil {
			t.Fatalf("RejectBatch: %v", err)
		}
	}
	letters, err := c.PeekDeadLetters(ctx, "q", client.DeadFilter{})
	if err != nil || len(letters) != total {
		t.Fatalf("PeekDeadLetters: %v, %d letters", err, len(letters))
	}
	for i, l := range letters {
		if len(l.Body) != size || l.Body[0] != byte('a'+i) {
			t.Fatalf("letter %d: %d bytes starting %q", i, len(l.Body), l.Body[:1])
		}
	}
	if n := len(fc.requests(wire.OpDeadPeek)); n < 2 {
		t.Fatalf("%d dead-peek requests, want the pages the byte budget cut", n)
	}
}

// A delete or redrive by sequence numbers honours every other field of the
// filter, and Letters may name dead letters of several partitions.
func TestClient_DeadLettersBySeqsHonourEveryField(t *testing.T) {
	fc := newFake(t, 2)
	fc.addQueue("q", wire.QueueConfig{Partitions: 2})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	q := c.Queue("q")
	var msgs []client.Message
	for i := range 8 {
		msgs = append(msgs, client.Message{ID: idFor(i%2, 2, fmt.Sprintf("m%d", i)), Body: []byte{byte(i)}})
	}
	if _, err := q.SendBatch(ctx, msgs); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	ds := receiveAll(t, q, 8)
	for i, d := range ds {
		reason := "timeout talking to db"
		if i%2 == 1 {
			reason = "bad payload"
		}
		if err := d.Reject(ctx, reason); err != nil {
			t.Fatalf("reject: %v", err)
		}
	}
	all, err := c.DeadLetters(ctx, "q", client.DeadFilter{})
	if err != nil || len(all) != 8 {
		t.Fatalf("DeadLetters: %v, %d", err, len(all))
	}
	var refs []client.LetterRef
	parts := map[int]bool{}
	for _, l := range all {
		refs = append(refs, l.Ref())
		parts[l.Partition] = true
	}
	if len(parts) != 2 {
		t.Fatalf("letters in %d partitions, want 2", len(parts))
	}
	// Every letter named, but only the "bad payload" ones selected.
	n, err := c.DeleteDeadLetters(ctx, "q", client.DeadFilter{Letters: refs, Text: "bad"})
	if err != nil || n != 4 {
		t.Fatalf("DeleteDeadLetters by letters and text: %d, %v", n, err)
	}
	left, err := c.DeadLetters(ctx, "q", client.DeadFilter{})
	if err != nil || len(left) != 4 {
		t.Fatalf("after delete: %v, %d letters", err, len(left))
	}
	for _, l := range left {
		if l.ReasonText != "timeout talking to db" {
			t.Fatalf("the delete took a letter the filter excluded; left %+v", l)
		}
	}
	// Seqs of one partition with a group that matches none: nothing goes.
	p := left[0].Partition
	var seqs []uint64
	for _, l := range left {
		if l.Partition == p {
			seqs = append(seqs, l.Seq)
		}
	}
	for _, f := range []client.DeadFilter{
		{Partitions: []int{p}, Seqs: seqs, Group: "nobody"},
		{Partitions: []int{p}, Seqs: seqs, Reason: client.DeadLeaseExpired},
		{Partitions: []int{p}, Seqs: seqs, From: time.Now().Add(time.Hour)},
		{Partitions: []int{p}, Seqs: seqs, To: time.Unix(1, 0)},
		{Letters: refs, Text: "bad"},
	} {
		if n, err := c.DeleteDeadLetters(ctx, "q", f); err != nil || n != 0 {
			t.Fatalf("DeleteDeadLetters(%+v) = %d, %v; want 0", f, n, err)
		}
		if n, err := c.RedriveDeadLetters(ctx, "q", f); err != nil || n != 0 {
			t.Fatalf("RedriveDeadLetters(%+v) = %d, %v; want 0", f, n, err)
		}
	}
	for _, r := range fc.requests(wire.OpDeadDelete) {
		if f := r.body.(*wire.DeadDeleteRequest).Filter; len(f.Seqs) > 0 && f.Group == "" && f.Reason == 0 && f.Text == "" && f.FromAt == 0 && f.ToAt == 0 {
			t.Fatalf("a delete by seqs went out without the rest of its filter: %+v", f)
		}
	}
	// Letters restricted by Partitions, then everything named.
	other := 1 - p
	want := len(left) - len(seqs)
	n, err = c.RedriveDeadLetters(ctx, "q", client.DeadFilter{Letters: refs, Partitions: []int{other}, Reason: client.DeadRejected})
	if err != nil || n != want {
		t.Fatalf("RedriveDeadLetters of partition %d: %d, %v", other, n, err)
	}
	n, err = c.RedriveDeadLetters(ctx, "q", client.DeadFilter{Letters: refs, Text: "timeout", Limit: 1})
	if err != nil || n != min(1, len(seqs)) {
		t.Fatalf("RedriveDeadLetters with limit 1: %d, %v", n, err)
	}
	for _, bad := range []client.DeadFilter{
		{Letters: refs, Partitions: []int{0}, Seqs: []uint64{1}},
		{Text: strings.Repeat("x", client.MaxDeadTextBytes+1)},
		{From: time.Unix(10, 0), To: time.Unix(5, 0)},
	} {
		if _, err := c.DeleteDeadLetters(ctx, "q", bad); !errors.Is(err, client.ErrInvalidArgument) {
			t.Fatalf("DeleteDeadLetters(%+v): %v, want ErrInvalidArgument", bad, err)
		}
	}
}
