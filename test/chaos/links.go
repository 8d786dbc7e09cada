package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/ferrymq/ferry/test/chaos/nfq"
)

// shapeHandle is the handle of the root qdisc the Shaper puts on lo; a
// root qdisc with another handle is never touched.
const shapeHandle = "fe7:"

// delayQueue is the NFQUEUE number of the harness's link delayer (the nfq
// package's own tests use 7310-7317).
const delayQueue = 7301

// Shaper makes links between node addresses slow and lossy: an htb root
// qdisc on lo (handle fe7:) whose one rate-limited class only u32 filters
// matching a chosen (source, destination) node address pair lead into;
// everything else on lo passes unshaped. When the kernel has netem, the
// class also delays, jitters, drops and reorders. Otherwise loss comes from
// iptables statistic rules in the chaos chain, and delay, jitter and
// reordering from an nfq.Delayer: NFQUEUE rules in the chaos chain hand
// the pair's packets to it, and it accepts each after a drawn delay. Heal
// deletes the qdisc (and with it the class and filters), flushes the chain
// and stops the delayer, which accepts the packets it still holds; a qdisc
// left by a killed run is deleted when the next run starts (its chain and
// rules with the Firewall's; a dead delayer's queue lets packets by, as
// the rules carry --queue-bypass).
type Shaper struct {
	mu      sync.Mutex
	ok      bool
	why     string
	active  bool
	queue   uint16 // the delayer's NFQUEUE number: delayQueue, but for tests
	delayer *nfq.Delayer
	// last holds the counters of the delayer the last Heal stopped.
	last      nfq.Stats
	lastValid bool
}

// tcBin is the tc binary: from PATH or /usr/sbin.
var tcBin = func() string {
	if p, err := exec.LookPath("tc"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/tc", "/sbin/tc"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}()

func tc(args ...string) error {
	out, err := exec.Command(tcBin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("tc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NewShaper checks that tc can be used (root, binary, not turned off with
// FERRY_CHAOS_NO_TC=1) and removes a qdisc left by an earlier run.
func NewShaper() *Shaper {
	s := &Shaper{queue: delayQueue}
	switch {
	case os.Getenv("FERRY_CHAOS_NO_TC") == "1":
		s.why = "FERRY_CHAOS_NO_TC=1"
	case os.Geteuid() != 0:
		s.why = "not running as root"
	case tcBin == "":
		s.why = "tc not installed"
	}
	if s.why != "" {
		return s
	}
	s.ok = true
	s.remove()
	return s
}

// Available reports whether links can be slowed.
func (s *Shaper) Available() bool { return s.ok }

// Reason says why links cannot be slowed.
func (s *Shaper) Reason() string { return s.why }

// remove deletes the Shaper's root qdisc on lo if there is one.
func (s *Shaper) remove() error {
	out, err := exec.Command(tcBin, "qdisc", "show", "dev", "lo").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "htb "+shapeHandle) {
		return nil
	}
	return tc("qdisc", "del", "dev", "lo", "root", "handle", shapeHandle)
}

// LinkShape is how a slowed link behaves.
type LinkShape struct {
	Rate    string        // htb rate, e.g. "512kbit"
	Delay   time.Duration // mean delay each packet gets
	Jitter  time.Duration // uniform spread around Delay (netem: its jitter)
	Reorder float64       // fraction of packets reordered
	Loss    float64       // fraction of packets dropped
	Seed    uint64        // seeds the delayer's draws (without netem)
}

// Slow shapes the traffic from pair[0] to pair[1] of every pair; without
// netem, loss and queueing rules are added to fw. It returns what it did.
func (s *Shaper) Slow(fw *Firewall, pairs [][2]*Node, sh LinkShape) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ok {
		return "", errors.New("link shaping unavailable: " + s.why)
	}
	if s.active {
		return "", errors.New("a link is already slowed")
	}
	s.active = true
	if err := tc("qdisc", "add", "dev", "lo", "root", "handle", shapeHandle, "htb", "default", "0"); err != nil {
		return "", err
	}
	class := shapeHandle + "10"
	if err := tc("class", "add", "dev", "lo", "parent", shapeHandle, "classid", class, "htb",
		"rate", sh.Rate, "ceil", sh.Rate, "burst", "16k"); err != nil {
		return "", err
	}
	detail := "rate " + sh.Rate
	loss := fmt.Sprintf("%.1f%%", sh.Loss*100)
	reorder := fmt.Sprintf("%.0f%%", sh.Reorder*100)
	s.lastValid = false
	netem := tc("qdisc", "add", "dev", "lo", "parent", class, "handle", "fe8:", "netem",
		"delay", tcMillis(sh.Delay), tcMillis(sh.Jitter), "loss", loss, "reorder", reorder, "50%") == nil
	if netem {
		detail += fmt.Sprintf(", netem delay %v ±%v, loss %s, reorder %s", sh.Delay, sh.Jitter, loss, reorder)
	} else {
		detail += ", " + s.startDelayer(sh) + ", loss " + loss + " (iptables)"
	}
	var errs []error
	for _, p := range pairs {
		errs = append(errs, tc("filter", "add", "dev", "lo", "parent", shapeHandle, "protocol", "ip", "prio", "1", "u32",
			"match", "ip", "src", p[0].IP+"/32", "match", "ip", "dst", p[1].IP+"/32", "flowid", class))
	}
	if !netem {
		errs = append(errs, s.pairRules(fw, pairs, sh.Loss))
	}
	return detail, errors.Join(errs...)
}

// pairRules adds the chaos chain's rules of a link slowed without netem:
// for every pair a loss rule and, when the delayer runs, a queueing rule
// after it (dropped packets are not queued).
func (s *Shaper) pairRules(fw *Firewall, pairs [][2]*Node, loss float64) error {
	var errs []error
	for _, p := range pairs {
		errs = append(errs, fw.Lossy(p[0], p[1], loss))
		if s.delayer != nil {
			errs = append(errs, fw.Queue(p[0], p[1], s.queue))
		}
	}
	return errors.Join(errs...)
}

func tcMillis(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

// startDelayer starts the NFQUEUE delayer for a kernel without netem and
// says what it applies, or why there is no delay.
func (s *Shaper) startDelayer(sh LinkShape) string {
	if os.Getenv("FERRY_CHAOS_NO_NFQUEUE") == "1" {
		return "no delay or reordering (no netem in this kernel; FERRY_CHAOS_NO_NFQUEUE=1)"
	}
	d, err := nfq.Start(nfq.Config{Queue: s.queue, Delay: sh.Delay, Jitter: sh.Jitter, Reorder: sh.Reorder,
		ReorderExtra: sh.Delay, MaxHeld: 4096, Seed: sh.Seed})
	if err != nil {
		return "no delay or reordering (no netem in this kernel, and " + err.Error() + ")"
	}
	s.delayer = d
	return fmt.Sprintf("delay %v ±%v (uniform), reorder %.0f%% (held %v longer) by the NFQUEUE %d delayer (no netem in this kernel)",
		sh.Delay, sh.Jitter, sh.Reorder*100, sh.Delay, s.queue)
}

// stopDelayer stops the delayer, if one runs, keeping its counters.
func (s *Shaper) stopDelayer() error {
	if s.delayer == nil {
		return nil
	}
	err := s.delayer.Stop()
	s.last, s.lastValid = s.delayer.Stats(), true
	s.delayer = nil
	return err
}

// LastDelayStats returns the counters of the delayer the last Heal
// stopped, if the last slowed link had one.
func (s *Shaper) LastDelayStats() (nfq.Stats, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.lastValid
}

// Heal removes the shaping and the firewall's loss and queueing rules,
// then stops the delayer, which accepts the packets it still holds.
func (s *Shaper) Heal(fw *Firewall) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ok || !s.active {
		return nil
	}
	s.active = false
	return errors.Join(s.remove(), fw.Heal(), s.stopDelayer())
}

// Close removes the shaping and stops the delayer. Safe to call more than
// once.
func (s *Shaper) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok {
		s.remove()
		s.stopDelayer()
		s.active = false
	}
}

// drawShape draws a slowed link's rate, delay (20-150 ms), jitter (5-30
// ms), reordering and loss.
func drawShape(rng *rand.Rand) LinkShape {
	rates := []string{"128kbit", "512kbit", "2mbit"}
	losses := []float64{0.01, 0.05, 0.15}
	reorders := []float64{0.05, 0.1, 0.25}
	return LinkShape{
		Rate:    rates[rng.IntN(len(rates))],
		Delay:   time.Duration(20+rng.IntN(131)) * time.Millisecond,
		Jitter:  time.Duration(5+rng.IntN(26)) * time.Millisecond,
		Reorder: reorders[rng.IntN(len(reorders))],
		Loss:    losses[rng.IntN(len(losses))],
		Seed:    rng.Uint64(),
	}
}

// linkFault slows the link between a chosen partition's leader and one of
// its followers: both ways (slow-link) or one way, either direction
// (slow-link-one-way).
func (in *Injector) linkFault(ctx context.Context, rng *rand.Rand, k FaultKind, rec *FaultRecord) (func() error, error) {
	if !in.links.Available() {
		rec.Skipped = "tc unavailable: " + in.links.Reason()
		return nil, nil
	}
	c := in.c
	p := in.parts[rng.IntN(len(in.parts))]
	v := c.View(ctx)
	leader := c.ByID(v.leader(p))
	var follower *Node
	for _, r := range v[p] {
		if n := c.ByID(r.node); n != nil && n != leader && follower == nil {
			follower = n
		}
	}
	if leader == nil || follower == nil {
		nodes := c.Up()
		if len(nodes) < 2 {
			return nil, fmt.Errorf("fewer than two nodes up")
		}
		i := rng.IntN(len(nodes))
		leader, follower = nodes[i], nodes[(i+1)%len(nodes)]
		rec.Detail = "no agreed leader of " + p.String() + "; "
	}
	pairs := [][2]*Node{{leader, follower}, {follower, leader}}
	what := "both ways"
	if k == SlowOneWay {
		pairs = pairs[rng.IntN(2):][:1]
		what = pairs[0][0].ID + "→" + pairs[0][1].ID + " only"
	}
	sh := drawShape(rng)
	rec.Targets = []string{leader.ID, follower.ID}
	detail, err := in.links.Slow(in.fw, pairs, sh)
	rec.Detail += fmt.Sprintf("%s (leader of %s) ↔ %s, %s: %s", leader.ID, p, follower.ID, what, detail)
	heal := func() error {
		err := in.links.Heal(in.fw)
		if st, ok := in.links.LastDelayStats(); ok {
			rec.Detail += fmt.Sprintf("; the delayer took %d packets (%d reordered, %d released early at heal, %d let by at once over its bound)",
				st.Queued, st.Reordered, st.Flushed, st.Overflow)
		}
		return err
	}
	if err != nil {
		heal()
		return nil, err
	}
	return heal, nil
}
