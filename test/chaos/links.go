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
)

// shapeHandle is the handle of the root qdisc the Shaper puts on lo; a
// root qdisc with another handle is never touched.
const shapeHandle = "fe7:"

// Shaper makes links between node addresses slow and lossy: an htb root
// qdisc on lo (handle fe7:) whose one rate-limited class only u32 filters
// matching a chosen (source, destination) node address pair lead into;
// everything else on lo passes unshaped. When the kernel has netem, the
// class also delays, jitters, drops and reorders; otherwise loss comes from
// iptables statistic rules in the chaos chain. Heal deletes the qdisc (and
// with it the class and filters); a qdisc left by a killed run is deleted
// when the next run starts.
type Shaper struct {
	mu     sync.Mutex
	ok     bool
	why    string
	active bool
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
	s := &Shaper{}
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
	Rate  string  // htb rate, e.g. "512kbit"
	Delay string  // netem delay, e.g. "80ms" (only with netem)
	Loss  float64 // fraction of packets dropped
}

// Slow shapes the traffic from pair[0] to pair[1] of every pair; loss
// without netem is added to fw. It returns what it did.
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
	netem := tc("qdisc", "add", "dev", "lo", "parent", class, "handle", "fe8:", "netem",
		"delay", sh.Delay, "20ms", "loss", loss, "reorder", "25%", "50%") == nil
	if netem {
		detail += ", netem delay " + sh.Delay + "±20ms, loss " + loss + ", reorder 25%"
	} else {
		detail += ", loss " + loss + " (iptables; no netem in this kernel, so no delay or reordering)"
	}
	var errs []error
	for _, p := range pairs {
		errs = append(errs, tc("filter", "add", "dev", "lo", "parent", shapeHandle, "protocol", "ip", "prio", "1", "u32",
			"match", "ip", "src", p[0].IP+"/32", "match", "ip", "dst", p[1].IP+"/32", "flowid", class))
		if !netem {
			errs = append(errs, fw.Lossy(p[0], p[1], sh.Loss))
		}
	}
	return detail, errors.Join(errs...)
}

// Heal removes the shaping (and the firewall's loss rules).
func (s *Shaper) Heal(fw *Firewall) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ok || !s.active {
		return nil
	}
	s.active = false
	return errors.Join(s.remove(), fw.Heal())
}

// Close removes the shaping. Safe to call more than once.
func (s *Shaper) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok {
		s.remove()
		s.active = false
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
	rates := []string{"128kbit", "512kbit", "2mbit"}
	losses := []float64{0.01, 0.05, 0.15}
	sh := LinkShape{Rate: rates[rng.IntN(len(rates))], Delay: fmt.Sprintf("%dms", 50+rng.IntN(200)), Loss: losses[rng.IntN(len(losses))]}
	rec.Targets = []string{leader.ID, follower.ID}
	detail, err := in.links.Slow(in.fw, pairs, sh)
	rec.Detail += fmt.Sprintf("%s (leader of %s) ↔ %s, %s: %s", leader.ID, p, follower.ID, what, detail)
	heal := func() error { return in.links.Heal(in.fw) }
	if err != nil {
		heal()
		return nil, err
	}
	return heal, nil
}
