package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// clockJumps are the offsets a clock-jump fault draws from: seconds to
// hours, forward and backward.
var clockJumps = []time.Duration{
	3 * time.Second, 20 * time.Second, 5 * time.Minute, time.Hour, 3 * time.Hour,
	-3 * time.Second, -20 * time.Second, -5 * time.Minute, -time.Hour,
}

// ShiftClock sets a running node's clock offset through the chaos build's
// control (POST /v1/debug/clock); 0 restores it. The offset does not
// survive a restart.
func (c *Cluster) ShiftClock(ctx context.Context, n *Node, offset time.Duration) error {
	n.marker("clock offset %v", offset)
	u := c.url(n, "/v1/debug/clock?offset="+url.QueryEscape(offset.String()))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return fmt.Errorf("shift %s's clock: %w", n.ID, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("shift %s's clock: %s: %s", n.ID, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// clockFault shifts a node's clock: a random node an hour ahead or behind
// (clock-ahead, clock-behind), or a chosen partition's leader by an offset
// drawn from clockJumps while it leads (clock-jump-leader). The heal sets
// the offset back to zero (a node restarted meanwhile has none).
func (in *Injector) clockFault(ctx context.Context, rng *rand.Rand, k FaultKind, rec *FaultRecord) (func() error, error) {
	c := in.c
	var n *Node
	var offset time.Duration
	switch k {
	case ClockAhead, ClockBehind:
		n, offset = pickNode(rng, c.Up()), time.Hour
		if k == ClockBehind {
			offset = -time.Hour
		}
		if n != nil {
			rec.Detail = fmt.Sprintf("clock %v", offset)
		}
	case ClockJump:
		p := in.parts[rng.IntN(len(in.parts))]
		offset = clockJumps[rng.IntN(len(clockJumps))]
		if n = c.ByID(c.View(ctx).leader(p)); n == nil {
			n = pickNode(rng, c.Up())
			rec.Detail = "no agreed leader of " + p.String() + "; "
		}
		if n != nil {
			rec.Detail += fmt.Sprintf("clock of the leader of %s jumps %v", p, offset)
		}
	}
	if n == nil {
		return nil, fmt.Errorf("no node up")
	}
	rec.Targets, rec.ClockOffset = []string{n.ID}, offset
	if err := c.ShiftClock(ctx, n, offset); err != nil {
		return nil, err
	}
	return func() error {
		if !n.Running() {
			return nil
		}
		hctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.ShiftClock(hctx, n, 0)
	}, nil
}
