package partition

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// DefaultCampaignsMax is how many of a node's replicas may campaign at
// once (Config.Campaigns): enough that thousands of groups whose leader's
// node died elect new leaders within a few seconds, few enough that their
// votes and first entries never swamp the surviving nodes so badly that
// rounds outlast the election timeout and restart without end.
const DefaultCampaignsMax = 32

// Campaigns bounds the replicas of one node that campaign at once; see
// raft.CampaignLimiter in third_party/raft. Create one per node and give
// it to every replica's Config. Safe for concurrent use.
type Campaigns struct{ slots chan struct{} }

var _ raft.CampaignLimiter = (*Campaigns)(nil)

// NewCampaigns returns a bound of n campaigns at once, 1..65536.
func NewCampaigns(n int) (*Campaigns, error) {
	if n < 1 || n > 1<<16 {
		return nil, fmt.Errorf("%w: %d campaigns at once, want 1..65536", ErrInvalidConfig, n)
	}
	return &Campaigns{slots: make(chan struct{}, n)}, nil
}

// TryAcquire takes a slot, reporting false when all are taken.
func (c *Campaigns) TryAcquire() bool {
	select {
	case c.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release returns a slot; releasing more than was taken is a bug.
func (c *Campaigns) Release() {
	select {
	case <-c.slots:
	default:
		panic("partition: campaign slot released but none was taken")
	}
}

// InUse returns the slots taken now.
func (c *Campaigns) InUse() int { return len(c.slots) }
