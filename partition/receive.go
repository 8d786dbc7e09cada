package partition

import (
	"context"
	"errors"
	"time"

	"github.com/ferrymq/ferry/fsm"
)

// receiveLeaderCheck is how often a waiting long poll checks that this
// replica still leads.
const receiveLeaderCheck = 250 * time.Millisecond

// Receive leases up to max messages, waiting up to wait (at most
// ReceiveWaitMax) for one to become eligible. It proposes a receive only
// for messages the leader's state shows it could lease and no other
// waiting receive already counts on (see claimReceiveLocked): idle long
// polls cost no raft traffic, and one message that becomes eligible
// draws one receive entry however many consumers wait for it.
//
// A long poll also looks again every receiveLeaderCheck whether this
// replica still leads: one that lost leadership may learn of the new
// leader's commits only CommitTimeout later, and until then nothing
// would wake the poll to answer not-leader (the client then goes on with
// its wait at the new leader).
//
// A receive the FSM would refuse (fsm.ValidateReceive) is answered with
// that error at once, never proposed.
func (p *Partition) Receive(ctx context.Context, rc fsm.ReceiveCmd, wait time.Duration) ([]fsm.Delivery, error) {
	if err := fsm.ValidateReceive(&rc, 0); err != nil {
		return nil, err
	}
	wait = min(max(wait, 0), ReceiveWaitMax)
	p.receivesWaiting.Add(1)
	defer p.receivesWaiting.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var recheck <-chan time.Time
	if wait > receiveLeaderCheck {
		t := time.NewTicker(receiveLeaderCheck)
		defer t.Stop()
		recheck = t.C
	}
	for {
		if err := p.checkLeader(); err != nil {
			return nil, err
		}
		claim, rateWait, ready := p.claimReceive(rc.Max)
		if claim > 0 {
			res, err := p.Propose(ctx, fsm.Command{Type: fsm.CmdReceive, Receive: &rc})
			p.releaseReceive(claim)
			if err != nil || res.Err != nil || len(res.Delivered) > 0 {
				return res.Delivered, errors.Join(err, res.Err)
			}
			continue // a receive-ack or an earlier receive took them first
		}
		if done, err := p.awaitReceivable(ctx, ready, rateWait, timer.C, recheck); done {
			return nil, err
		}
	}
}

// awaitReceivable waits until the leader's state may have changed: ready
// closed, the delivery rate bound's wait (rateWait, when above 0) over, or
// the leader check due. It reports done (with the error to answer, nil
// for an empty answer) when the receive's wait is over, ctx ends or the
// partition closes.
func (p *Partition) awaitReceivable(ctx context.Context, ready <-chan struct{}, rateWait time.Duration, expired, recheck <-chan time.Time) (bool, error) {
	var rated <-chan time.Time
	if rateWait > 0 {
		// The delivery rate bound lets nothing go yet: wait for it
		// rather than propose a receive that would lease nothing.
		rt := time.NewTimer(rateWait)
		defer rt.Stop()
		rated = rt.C
	}
	select {
	case <-ready:
	case <-rated:
	case <-recheck:
	case <-expired:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	case <-p.closing:
		return true, ErrClosed
	}
	return false, nil
}

// claimReceive books, for a receive of at most maxN messages, the
// messages it may count on (claim, 0 when none: then it waits on ready,
// or rateWait when the delivery rate bound holds eligible messages back).
// The claims of receives proposed and not yet answered are subtracted
// from what the leader's state could lease (fsm.Leasable), so that
// waiting receives propose only for messages nobody counts on yet. A
// claim is an estimate, never a reservation: the FSM decides what each
// receive leases, and one that leases nothing waits again.
func (p *Partition) claimReceive(maxN int) (claim int64, rateWait time.Duration, ready <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now().UnixNano()
	if !p.fsm.HasEligible() {
		return 0, 0, p.ready
	}
	if rateWait = p.fsm.RateWait(now); rateWait > 0 {
		return 0, rateWait, p.ready
	}
	free := p.fsm.Leasable(now) - p.receiveClaimed
	if free <= 0 {
		return 0, 0, p.ready
	}
	claim = min(int64(maxN), free)
	p.receiveClaimed += claim
	return claim, 0, p.ready
}

// releaseReceive returns a claim once its receive is answered, and wakes
// the waiting receives while messages are eligible: some may be counted
// on by nobody now (the receive leased fewer than it claimed, or messages
// became eligible while every one was counted on), or held back by the
// delivery rate bound, whose wait a receive that saw every message
// claimed has not armed. Waking costs no raft entry: each looks again.
func (p *Partition) releaseReceive(claim int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.receiveClaimed -= claim
	if p.receiveClaimed < 0 {
		panic("partition: receive claims below zero")
	}
	if p.fsm.HasEligible() {
		p.wakeReceivesLocked()
	}
}

// ReceivesWaiting returns how many receives are in progress on this
// replica: long polls waiting for messages and receives being proposed.
func (p *Partition) ReceivesWaiting() int64 { return p.receivesWaiting.Load() }

// wakeReceivesLocked wakes every waiting receive to look at the leader's
// state again. The caller holds p.mu.
func (p *Partition) wakeReceivesLocked() {
	close(p.ready)
	p.ready = make(chan struct{})
}
