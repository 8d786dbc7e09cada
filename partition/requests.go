package partition

import (
	"context"
	"errors"

	"github.com/ferrymq/ferry/fsm"
)

// The typed requests that change a partition besides Send, Ack and
// ReceiveAck (coalesce.go, propose.go): settling leases (Extend, Nack,
// Reject) and the operator's changes (RedriveDead, DeleteDead, Purge).
// Each checks its arguments with the FSM's own rules (fsm.CheckBatch,
// fsm.ExtendItem.Validate, ...) before proposing, so that a request the
// FSM would refuse never takes a place in the raft log, and proposes
// through Propose. Refusals wrap fsm.ErrInvalidArgument.

// Extend moves the deadline of each item's lease to now + its Visibility
// and returns one error (or nil) per item, in order. An item the FSM would
// refuse (fsm.ExtendItem.Validate) gets that error and is not proposed;
// the others go in one raft entry. A batch of no items or more than
// fsm.BatchMax is refused as a whole.
func (p *Partition) Extend(ctx context.Context, items []fsm.ExtendItem) ([]error, error) {
	return settleItems(ctx, p, items, fsm.ExtendItem.Validate, func(valid []fsm.ExtendItem) fsm.Command {
		return fsm.Command{Type: fsm.CmdExtend, Extend: &fsm.ExtendCmd{Items: valid}}
	})
}

// Nack gives each item's leased message back for a retry (or, with
// Release, undoes its delivery) and returns one error (or nil) per item,
// in order. An item the FSM would refuse (fsm.NackItem.Validate) gets
// that error and is not proposed; the others go in one raft entry. A
// batch of no items or more than fsm.BatchMax is refused as a whole.
func (p *Partition) Nack(ctx context.Context, items []fsm.NackItem) ([]error, error) {
	return settleItems(ctx, p, items, fsm.NackItem.Validate, func(valid []fsm.NackItem) fsm.Command {
		return fsm.Command{Type: fsm.CmdNack, Nack: &fsm.NackCmd{Items: valid}}
	})
}

// Reject dead-letters each item's leased message at once and returns one
// error (or nil) per item, in order, all from one raft entry. A batch of
// no items or more than fsm.BatchMax is refused as a whole.
func (p *Partition) Reject(ctx context.Context, items []fsm.RejectItem) ([]error, error) {
	return settleItems(ctx, p, items, nil, func(valid []fsm.RejectItem) fsm.Command {
		return fsm.Command{Type: fsm.CmdReject, Reject: &fsm.RejectCmd{Items: valid}}
	})
}

// RedriveDead moves the dead letters f selects back to ready as new
// messages at the end of the queue and returns how many it moved. A
// filter the FSM would refuse (fsm.DeadFilter.Validate) is refused
// before anything is proposed.
func (p *Partition) RedriveDead(ctx context.Context, f fsm.DeadFilter) (int, error) {
	return p.changeDead(ctx, f, fsm.Command{Type: fsm.CmdRedrive, Redrive: &f})
}

// DeleteDead discards the dead letters f selects for good and returns how
// many it discarded. A filter the FSM would refuse
// (fsm.DeadFilter.Validate) is refused before anything is proposed.
func (p *Partition) DeleteDead(ctx context.Context, f fsm.DeadFilter) (int, error) {
	return p.changeDead(ctx, f, fsm.Command{Type: fsm.CmdDeleteDead, DeleteDead: &f})
}

// Purge deletes every ready or delayed message, and with leased the
// leased ones too (fsm.CmdPurgeAll), and returns how many it deleted.
// Dead letters stay.
func (p *Partition) Purge(ctx context.Context, leased bool) (int, error) {
	if leased {
		return p.proposeCount(ctx, fsm.Command{Type: fsm.CmdPurgeAll})
	}
	return p.proposeCount(ctx, fsm.Command{Type: fsm.CmdPurge})
}

// DeleteMessages deletes the named messages that are in one of states
// when the command applies (see fsm.DeleteMessagesCmd) and returns how
// many it deleted. A command the FSM would refuse is refused before
// anything is proposed.
func (p *Partition) DeleteMessages(ctx context.Context, items []fsm.MessageRef, states fsm.StateSet) (int, error) {
	c := fsm.DeleteMessagesCmd{Items: items, States: states}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	return p.proposeCount(ctx, fsm.Command{Type: fsm.CmdDeleteMessages, DeleteMany: &c})
}

// SetPaused pauses (paused) or resumes the partition's deliveries, by
// naming who asked (see fsm.PauseCmd), and returns the pause state once
// the command applied.
func (p *Partition) SetPaused(ctx context.Context, paused bool, by string) (fsm.PauseState, error) {
	c := fsm.PauseCmd{Paused: paused, By: by}
	if err := fsm.ValidatePause(&c); err != nil {
		return fsm.PauseState{}, err
	}
	res, err := p.Propose(ctx, fsm.Command{Type: fsm.CmdPause, Pause: &c})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fsm.PauseState{}, err
	}
	return p.Stats().Pause, nil
}

// DeleteMessage deletes one message by seq and id, in any state (only
// before its first delivery with undelivered); see fsm.DeleteMessageCmd.
func (p *Partition) DeleteMessage(ctx context.Context, seq uint64, id string, undelivered bool) error {
	c := fsm.DeleteMessageCmd{Seq: seq, ID: id, Undelivered: undelivered}
	if err := c.Validate(); err != nil {
		return err
	}
	_, err := p.proposeCount(ctx, fsm.Command{Type: fsm.CmdDeleteMessage, Delete: &c})
	return err
}

// changeDead proposes c, a redrive or deletion of the dead letters f
// selects, once f passes the FSM's check.
func (p *Partition) changeDead(ctx context.Context, f fsm.DeadFilter, c fsm.Command) (int, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	return p.proposeCount(ctx, c)
}

// proposeCount proposes c and returns the count the FSM answers, or its
// error.
func (p *Partition) proposeCount(ctx context.Context, c fsm.Command) (int, error) {
	res, err := p.Propose(ctx, c)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return 0, err
	}
	return res.Count, nil
}

// settleItems proposes, in one command built by command, the items that
// pass check (all of them when check is nil), and returns one error (or
// nil) per item: check's refusal for an item it refuses, which is not
// proposed, and the FSM's answer for the others. Nothing is proposed when
// every item is refused.
func settleItems[I any](ctx context.Context, p *Partition, items []I, check func(I) error, command func([]I) fsm.Command) ([]error, error) {
	if err := fsm.CheckBatch(len(items)); err != nil {
		return nil, err
	}
	if err := p.checkLeader(); err != nil {
		return nil, err
	}
	out := make([]error, len(items))
	valid := items
	if check != nil {
		valid = make([]I, 0, len(items))
		for i, it := range items {
			if out[i] = check(it); out[i] == nil {
				valid = append(valid, it)
			}
		}
	}
	if len(valid) == 0 {
		return out, nil
	}
	res, err := p.Propose(ctx, command(valid))
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, err
	}
	if len(res.Settled) != len(valid) {
		return nil, errors.New("partition: settle answered the wrong number of items")
	}
	k := 0
	for i := range out {
		if out[i] == nil {
			out[i] = res.Settled[k]
			k++
		}
	}
	return out, nil
}
