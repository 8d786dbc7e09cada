package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// sendTo sends one message to each listed partition of an n-partition
// queue, by choosing ids that route there.
func sendTo(t *testing.T, q *client.Queue, n int, parts ...int) {
	t.Helper()
	var msgs []client.Message
	for i, p := range parts {
		msgs = append(msgs, client.Message{ID: idFor(p, n, "m"+string(rune('a'+i))), Body: []byte{byte(p)}})
	}
	if _, err := q.SendBatch(testCtx(t, 5*time.Second), msgs); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
}

func TestClient_ReceiveGathersPartitionsAndRespectsMax(t *testing.T) {
	fc := newFake(t, 2)
	fc.addQueue("q", wire.QueueConfig{Partitions: 4})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	q := c.Queue("q")
	sendTo(t, q, 4, 0, 1, 1, 2, 3, 3, 3)

	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 5})
	if err != nil || len(ds) != 5 {
		t.Fatalf("Receive: %v, %d deliveries, want 5", err, len(ds))
	}
	parts := map[int]bool{}
	for _, d := range ds {
		parts[d.Partition] = true
	}
	if len(parts) < 2 {
		t.Fatalf("5 deliveries from partitions %v only", parts)
	}
	for _, r := range fc.requests(wire.OpReceive) {
		if req := r.body.(*wire.ReceiveRequest); req.Max > 5 || req.Wait != 0 {
			t.Fatalf("receive request %+v", req)
		}
	}
	rest, err := q.Receive(ctx, client.ReceiveOptions{Max: 10})
	if err != nil || len(rest) != 2 {
		t.Fatalf("second Receive: %v, %d deliveries, want 2", err, len(rest))
	}
	if _, err := q.Receive(ctx, client.ReceiveOptions{Max: client.MaxReceive + 1}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Receive above MaxReceive: %v", err)
	}
}

func TestClient_LongPollReturnsOnAnyPartitionAndBuffersLateAnswers(t *testing.T) {
	fc := newFake(t, 2)
	fc.addQueue("q", wire.QueueConfig{Partitions: 4})
	c := dial(t, fc)
	ctx := testCtx(t, 10*time.Second)
	q := c.Queue("q")

	// Long polls of partition 1 hold their answer until released.
	release := make(chan struct{})
	fc.setHook(func(_ int, op wire.Op, body any) fault {
		if r, ok := body.(*wire.ReceiveRequest); ok && r.Partition == 1 && r.Wait > 0 {
			return fault{hold: release}
		}
		return fault{}
	})
	type result struct {
		ds  []*client.Delivery
		err error
	}
	done := make(chan result, 1)
	go func() {
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 3, Wait: 5 * time.Second})
		done <- result{ds, err}
	}()
	testwait.Until(t, 5*time.Second, "four long polls", func() bool { return fc.waitingPolls() == 4 })
	sendTo(t, q, 4, 1, 2)

	r := <-done
	if r.err != nil || len(r.ds) != 1 || r.ds[0].Partition != 2 {
		t.Fatalf("Receive: %v, %d deliveries; want the message of partition 2", r.err, len(r.ds))
	}
	// Partition 1 leased its message too; its answer arrives late.
	close(release)
	testwait.Until(t, 5*time.Second, "the late answer to be buffered", func() bool { return q.Buffered() == 1 })
	asked := len(fc.requests(wire.OpReceive))
	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 3, Wait: time.Second})
	if err != nil || len(ds) != 1 || ds[0].Partition != 1 {
		t.Fatalf("next Receive: %v, %d deliveries; want the buffered one", err, len(ds))
	}
	if n := len(fc.requests(wire.OpReceive)); n != asked {
		t.Fatalf("a buffered delivery cost %d receive requests", n-asked)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("Ack of the buffered delivery: %v", err)
	}
}

func TestClient_ReceiveWaitRunsOut(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 2})
	c := dial(t, fc)
	start := time.Now()
	ds, err := c.Queue("q").Receive(testCtx(t, 5*time.Second), client.ReceiveOptions{Wait: 100 * time.Millisecond})
	if err != nil || len(ds) != 0 {
		t.Fatalf("Receive: %v, %d deliveries", err, len(ds))
	}
	if el := time.Since(start); el < 100*time.Millisecond || el > 3*time.Second {
		t.Fatalf("Receive with a 100ms wait took %v", el)
	}
}

func TestClient_ReceiveCancellationReturnsPromptly(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 3})
	c := dial(t, fc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Queue("q").Receive(ctx, client.ReceiveOptions{Wait: 20 * time.Second})
		done <- err
	}()
	testwait.Until(t, 5*time.Second, "long polls", func() bool { return fc.waitingPolls() == 3 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Receive: %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Receive did not return after cancellation")
	}
	// A message sent now is leased by the abandoned polls and kept.
	sendTo(t, c.Queue("q"), 3, 0)
	testwait.Until(t, 5*time.Second, "the abandoned poll's lease to be buffered", func() bool { return c.Queue("q").Buffered() == 1 })
}

func TestClient_SettleRequestsCarryReceipts(t *testing.T) {
	fc := newFake(t, 2)
	fc.addQueue("q", wire.QueueConfig{Partitions: 2})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	q := c.Queue("q")
	sendTo(t, q, 2, 0, 0, 1, 1, 1)
	ds := receiveAll(t, q, 5)
	byPart := map[int][]*client.Delivery{}
	for _, d := range ds {
		byPart[d.Partition] = append(byPart[d.Partition], d)
	}
	a, b := byPart[0], byPart[1]

	if errs := q.ExtendBatch(ctx, ds, time.Minute); errs[0] != nil || errs[4] != nil {
		t.Fatalf("ExtendBatch: %v", errs)
	}
	if err := a[0].Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if err := a[1].Nack(ctx, client.NackOptions{Reason: "later"}); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	if err := b[0].Nack(ctx, client.NackOptions{Immediate: true, Reason: "now"}); err != nil {
		t.Fatalf("Nack immediate: %v", err)
	}
	if err := b[1].Nack(ctx, client.NackOptions{Delay: time.Hour}); err != nil {
		t.Fatalf("Nack delayed: %v", err)
	}
	if err := b[2].Reject(ctx, "poison"); err != nil {
		t.Fatalf("Reject: %v", err)
	}

	checkSettleRequests(t, fc, a, b)

	// A stale receipt is refused.
	if err := a[0].Ack(ctx); !errors.Is(err, client.ErrMessageNotFound) {
		t.Fatalf("Ack again: %v", err)
	}
	if err := b[2].Ack(ctx); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("Ack of a rejected message: %v", err)
	}
	if err := (&client.Delivery{}).Ack(ctx); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Ack of a made-up delivery: %v", err)
	}
	if err := a[1].Nack(ctx, client.NackOptions{Immediate: true, Delay: time.Second}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Nack with contradicting options: %v", err)
	}
}

func TestClient_AckWithUnknownOutcomeThenNotFoundSucceeds(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	q := c.Queue("q")
	sendTo(t, q, 1, 0, 0)
	ds := receiveAll(t, q, 2)
	// The first ack is applied but its answer is lost: the retry finds the
	// message gone, which is the first ack's doing.
	fc.setHook(onFirst(wire.OpAck, fault{dropAfter: true}))
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if n := len(fc.requests(wire.OpAck)); n != 2 {
		t.Fatalf("%d ack requests, want 2", n)
	}
	// A reject in the same situation cannot be told from a lost lease.
	fc.setHook(onFirst(wire.OpReject, fault{codeAfter: wire.CodeTimeout}))
	if err := ds[1].Reject(ctx, "bad"); !errors.Is(err, client.ErrUnconfirmed) {
		t.Fatalf("Reject: %v, want ErrUnconfirmed", err)
	}
}

func receipt(d *client.Delivery) wire.Receipt {
	return wire.Receipt{Partition: d.Partition, Seq: d.Seq, Attempt: d.Attempt}
}

// checkSettleRequests checks the recorded extend, ack, nack and reject
// requests of TestClient_SettleRequestsCarryReceipts.
func checkSettleRequests(t *testing.T, fc *fakeCluster, a, b []*client.Delivery) {
	t.Helper()
	ext := fc.requests(wire.OpExtend)
	if len(ext) != 2 {
		t.Fatalf("%d extend requests, want one per partition", len(ext))
	}
	for _, r := range ext {
		req := r.body.(*wire.ExtendRequest)
		for _, it := range req.Items {
			if it.Receipt.Partition != req.Partition || it.Visibility != time.Minute {
				t.Fatalf("extend item %+v in request for partition %d", it, req.Partition)
			}
		}
	}
	ack := fc.requests(wire.OpAck)[0].body.(*wire.AckRequest)
	if ack.Partition != 0 || len(ack.Receipts) != 1 || ack.Receipts[0] != receipt(a[0]) {
		t.Fatalf("ack request %+v for %+v", ack, receipt(a[0]))
	}
	nacks := fc.requests(wire.OpNack)
	if len(nacks) != 3 {
		t.Fatalf("%d nack requests, want 3", len(nacks))
	}
	want := []wire.NackItem{
		{Receipt: receipt(a[1]), Reason: "later"},
		{Receipt: receipt(b[0]), ExplicitDelay: true, Reason: "now"},
		{Receipt: receipt(b[1]), ExplicitDelay: true, Delay: time.Hour},
	}
	for i, r := range nacks {
		req := r.body.(*wire.NackRequest)
		if len(req.Items) != 1 || req.Items[0] != want[i] || req.Partition != want[i].Receipt.Partition {
			t.Fatalf("nack %d: %+v, want %+v", i, req, want[i])
		}
	}
	rej := fc.requests(wire.OpReject)[0].body.(*wire.RejectRequest)
	if rej.Items[0] != (wire.RejectItem{Receipt: receipt(b[2]), Reason: "poison"}) {
		t.Fatalf("reject %+v", rej)
	}
}
