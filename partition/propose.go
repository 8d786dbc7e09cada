package partition

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wal/raftlog"
	"github.com/hashicorp/raft"
)

// ReceiveWaitMax is the longest long-poll a Receive may ask for.
const ReceiveWaitMax = 20 * time.Second

// EntryBytesMax bounds one raft entry: a merged proposal of at most
// ProposalBytesMax, or one message of the largest size a queue may allow
// with its id, group and framing. Propose refuses anything larger, so no
// entry that replicas might fail to ship or store is ever written.
const EntryBytesMax = fsm.MessageBytesLimit + 64<<10

// Propose is the one way a command enters the partition: it stamps the
// leader's clock, hands the command to raft, waits for commit and apply, and
// returns the FSM's result. A context deadline bounds the wait to enqueue;
// once enqueued, the outcome is always awaited (it is bounded by raft's
// leader lease), so that a result is never reported lost when it was not.
func (p *Partition) Propose(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	f, err := p.startProposal(ctx, cmd)
	if err != nil {
		return fsm.Result{}, err
	}
	return p.proposalResult(f)
}

// startProposal is Propose's first half: it checks, stamps and encodes cmd
// and hands it to raft, returning the future to wait on with
// proposalResult. Commands started one after the other by one goroutine
// take the raft log in that order.
func (p *Partition) startProposal(ctx context.Context, cmd fsm.Command) (raft.ApplyFuture, error) {
	if err := p.checkLeader(); err != nil {
		return nil, err
	}
	cmd.At = p.now().UnixNano()
	if err := p.checkClockStep(cmd); err != nil {
		return nil, err
	}
	timeout := p.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: %w", ErrTimeout, context.DeadlineExceeded)
	}
	return p.apply(cmd, timeout)
}

// propose encodes a stamped command, hands it to raft and waits for its
// result.
func (p *Partition) propose(cmd fsm.Command, timeout time.Duration) (fsm.Result, error) {
	f, err := p.apply(cmd, timeout)
	if err != nil {
		return fsm.Result{}, err
	}
	return p.proposalResult(f)
}

// apply encodes a stamped command and hands it to raft.
func (p *Partition) apply(cmd fsm.Command, timeout time.Duration) (raft.ApplyFuture, error) {
	data, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	if len(data) > EntryBytesMax {
		return nil, fmt.Errorf("%w: %s command of %d bytes exceeds the %d-byte entry limit",
			fsm.ErrMessageTooLarge, cmd.Type, len(data), EntryBytesMax)
	}
	return p.raft.Apply(data, timeout), nil
}

// proposalResult waits for a proposal's outcome and returns the FSM's
// result.
func (p *Partition) proposalResult(f raft.ApplyFuture) (fsm.Result, error) {
	if err := p.waitApplied(f); err != nil {
		return fsm.Result{}, p.mapRaftError(err)
	}
	res, ok := f.Response().(fsm.Result)
	if !ok {
		return fsm.Result{}, fmt.Errorf("partition %s: unexpected apply response %T", p.cfg.GroupID, f.Response())
	}
	return res, nil
}

func (p *Partition) checkLeader() error {
	select {
	case <-p.closing:
		return ErrClosed
	default:
	}
	if p.raft.State() != raft.Leader {
		return p.notLeader()
	}
	return nil
}

func (p *Partition) notLeader() error {
	addr, id := p.raft.LeaderWithID()
	return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr)}
}

// mapRaftError turns raft's errors into this package's.
func (p *Partition) mapRaftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return p.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost):
		// Also a failed local write of the leader's log: raft sent the
		// entries while writing them (ReplicateBeforeStore), so the
		// followers may commit them.
		return ErrUnknownOutcome
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrTimeout
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, raftlog.ErrFailed):
		// The store could not cut a failed write back: the entries may
		// still be on disk, and a restarted replica could propose them.
		return fmt.Errorf("partition %s: %w: %w", p.cfg.GroupID, ErrUnknownOutcome, err)
	case errors.Is(err, raftlog.ErrIO), errors.Is(err, raftlog.ErrDiskFull):
		// A write failed before any entry left (a follower's own log,
		// or a store refusing up front): the command was not applied.
		return fmt.Errorf("partition %s: %w: %w", p.cfg.GroupID, ErrIO, err)
	}
	return fmt.Errorf("partition %s: %w", p.cfg.GroupID, err)
}

// ReceiveAck acks receipts and leases as Receive does, the acks and the
// first lease attempt in one raft entry (fsm.CmdReceiveAck). It returns
// one error (or nil) per receipt and the deliveries. When that entry
// leased nothing and wait allows, it long-polls as Receive; the acks'
// outcomes stand whatever the long-poll meets (its failure is answered as
// no deliveries). Without receipts it is Receive. A command the FSM
// would refuse as a whole (fsm.ValidateReceive) is answered with that
// error, never proposed.
func (p *Partition) ReceiveAck(ctx context.Context, receipts []fsm.Receipt, rc fsm.ReceiveCmd, wait time.Duration) ([]error, []fsm.Delivery, error) {
	if len(receipts) == 0 {
		ds, err := p.Receive(ctx, rc, wait)
		return nil, ds, err
	}
	if err := fsm.ValidateReceive(&rc, len(receipts)); err != nil {
		return nil, nil, err
	}
	res, err := p.Propose(ctx, fsm.Command{Type: fsm.CmdReceiveAck, ReceiveAck: &fsm.ReceiveAckCmd{Receipts: receipts, Receive: rc}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, nil, err
	}
	if len(res.Settled) != len(receipts) {
		return nil, nil, errors.New("partition: receive-ack answered the wrong number of acks")
	}
	if len(res.Delivered) > 0 || wait <= 0 {
		return res.Settled, res.Delivered, nil
	}
	ds, err := p.Receive(ctx, rc, wait)
	if err != nil {
		ds = nil
	}
	return res.Settled, ds, nil
}

// waitApplied waits for f's outcome, or for raft to have shut down: a
// future raft took into its apply queue just as it shut down is never
// answered (its wait has no shutdown channel), and Close, which waits for
// the replica's loops after shutting raft down, would wait for it forever.
// raft's own futures wait with ErrorUnless on the goroutine that asks;
// for any other future a goroutine calls Error, and is left behind,
// blocked for good, if raft went down first (it holds nothing else).
func (p *Partition) waitApplied(f raft.Future) error {
	if w, ok := f.(errorUnless); ok {
		if err, answered := w.ErrorUnless(p.raftDown); answered {
			return err
		}
		return raft.ErrRaftShutdown
	}
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-p.raftDown:
		select {
		case err := <-done:
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}

// errorUnless is a future that can be waited on until a channel closes
// (the raft fork's futures).
type errorUnless interface {
	ErrorUnless(stop <-chan struct{}) (error, bool)
}
