package node

import (
	"context"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wire"
)

// handleDeadList reads dead letters from the partition leader's state,
// once it holds every write confirmed before (ReadBarrier). With bodies, the
// answer holds about wire.PeekBytesMax at most, and Next says where the
// listing goes on when that budget ended it.
func (n *Node) handleDeadList(ctx context.Context, queue string, index int, f wire.DeadFilter, bodies bool) (*wire.DeadPeekResponse, error) {
	p, _, err := n.leaderOf(ctx, queue, index)
	if err != nil {
		return nil, err
	}
	letters, more, err := p.LeaderDead(ctx, deadFilterOf(f), bodies, wire.PeekBytesMax)
	if err != nil {
		return nil, err
	}
	out := &wire.DeadPeekResponse{Letters: make([]wire.DeadLetter, len(letters))}
	for i, d := range letters {
		out.Letters[i] = deadLetterOf(index, d)
	}
	if more {
		out.Next = letters[len(letters)-1].Seq
	}
	return out, nil
}

// handleDeadChange runs change, a redrive or a deletion of the dead
// letters f selects (partition.RedriveDead or DeleteDead), on the
// partition leader. A filter the FSM would refuse (fsm.DeadFilter.Validate)
// is refused before the partition is looked up.
func (n *Node) handleDeadChange(ctx context.Context, queue string, index int,
	change func(*partition.Partition, context.Context, fsm.DeadFilter) (int, error), f wire.DeadFilter) (*wire.DeadRedriveResponse, error) {
	filter := deadFilterOf(f)
	if err := filter.Validate(); err != nil {
		return nil, err
	}
	p, _, err := n.leaderOf(ctx, queue, index)
	if err != nil {
		return nil, err
	}
	count, err := change(p, ctx, filter)
	if err != nil {
		return nil, err
	}
	return &wire.DeadRedriveResponse{Count: count}, nil
}
