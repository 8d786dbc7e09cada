package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// Chain is the iptables chain that holds every partition rule. It is
// hooked into INPUT and OUTPUT while a run lasts and removed afterwards;
// a chain left behind by a killed run is removed when the next one starts.
const Chain = "FERRY-CHAOS"

// Firewall cuts links between node addresses with iptables DROP rules in
// the dedicated chain. Raft and gossip UDP traffic leave each node from its
// own address, so one rule per direction of each cut pair covers them.
// Memberlist dials its TCP connections (push/pull, fallback pings) without
// binding a source address, so they leave from 127.0.0.1: while a cut is
// in force, TCP to the gossip ports of the nodes on either side is dropped
// as well. Client traffic (from 127.0.0.1 to the client ports) is never
// cut: the workload's clients reach every node, as Jepsen's do.
type Firewall struct {
	chain   string // Chain, but for tests of the rules
	mu      sync.Mutex
	ok      bool
	why     string // why partitions cannot be made, when !ok
	hooked  bool
	cutting bool
}

// NewFirewall checks that iptables can be used (root, binary present, not
// turned off with FERRY_CHAOS_NO_IPTABLES=1), removes a stale chain and
// installs a fresh one. When iptables cannot be used, Available reports
// false and Reason says why; nothing fails.
func NewFirewall() *Firewall { return newFirewall(Chain) }

// newFirewall is NewFirewall with another chain, for tests that must not
// disturb a chaos run's chain.
func newFirewall(chain string) *Firewall {
	f := &Firewall{chain: chain}
	switch {
	case os.Getenv("FERRY_CHAOS_NO_IPTABLES") == "1":
		f.why = "FERRY_CHAOS_NO_IPTABLES=1"
	case os.Geteuid() != 0:
		f.why = "not running as root"
	case !haveIPTables():
		f.why = "iptables not installed"
	}
	if f.why != "" {
		return f
	}
	f.removeChain()
	if err := f.install(); err != nil {
		f.why = err.Error()
		f.removeChain()
		return f
	}
	f.ok, f.hooked = true, true
	return f
}

// iptablesBin is the iptables binary: from PATH, or where Debian puts it
// (root's PATH may lack /usr/sbin).
var iptablesBin = func() string {
	if p, err := exec.LookPath("iptables"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/iptables", "/sbin/iptables"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}()

func haveIPTables() bool { return iptablesBin != "" }

// Available reports whether partition faults can be injected.
func (f *Firewall) Available() bool { return f.ok }

// Reason says why partition faults cannot be injected.
func (f *Firewall) Reason() string { return f.why }

func iptables(args ...string) error {
	out, err := exec.Command(iptablesBin, append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (f *Firewall) install() error {
	if err := iptables("-N", f.chain); err != nil {
		return err
	}
	for _, hook := range []string{"OUTPUT", "INPUT"} {
		if err := iptables("-I", hook, "1", "-j", f.chain); err != nil {
			return err
		}
	}
	return nil
}

// removeChain unhooks, flushes and deletes the chain, ignoring what is
// not there.
func (f *Firewall) removeChain() {
	for _, hook := range []string{"OUTPUT", "INPUT"} {
		for i := 0; i < 10 && iptables("-D", hook, "-j", f.chain) == nil; i++ {
		}
	}
	_ = iptables("-F", f.chain)
	_ = iptables("-X", f.chain)
}

// Cut drops all traffic between every node of a and every node of b, in
// both directions.
func (f *Firewall) Cut(a, b []*Node) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ok {
		return errors.New("partitions unavailable: " + f.why)
	}
	var errs []error
	rule := func(args ...string) { errs = append(errs, iptables(append([]string{"-A", f.chain}, args...)...)) }
	for _, x := range a {
		for _, y := range b {
			rule("-s", x.IP, "-d", y.IP, "-j", "DROP")
			rule("-s", y.IP, "-d", x.IP, "-j", "DROP")
		}
	}
	for _, n := range append(append([]*Node(nil), a...), b...) {
		_, port, _ := strings.Cut(n.GossipAddr, ":")
		rule("-s", "127.0.0.1", "-d", n.IP, "-p", "tcp", "--dport", port, "-j", "DROP")
	}
	f.cutting = true
	return errors.Join(errs...)
}

// Lossy drops a fraction p of the packets from one node to another. The
// rule matches "-o lo", that is only where the chain is reached from
// OUTPUT: a packet between two loopback addresses passes OUTPUT and then
// INPUT, and a rule matching in both would drop it twice over.
func (f *Firewall) Lossy(from, to *Node, p float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ok {
		return errors.New("partitions unavailable: " + f.why)
	}
	f.cutting = true
	return iptables("-A", f.chain, "-s", from.IP, "-d", to.IP, "-o", "lo", "-m", "statistic", "--mode", "random",
		"--probability", fmt.Sprintf("%.3f", p), "-j", "DROP")
}

// Queue sends the packets from one node to another to NFQUEUE number num,
// once (on OUTPUT, as Lossy), with --queue-bypass: while no process has
// the queue bound, the packets pass unqueued.
func (f *Firewall) Queue(from, to *Node, num uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ok {
		return errors.New("partitions unavailable: " + f.why)
	}
	f.cutting = true
	return iptables("-A", f.chain, "-s", from.IP, "-d", to.IP, "-o", "lo", "-j", "NFQUEUE",
		"--queue-num", fmt.Sprint(num), "--queue-bypass")
}

// Heal removes every rule (the chain stays, empty).
func (f *Firewall) Heal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ok || !f.cutting {
		return nil
	}
	f.cutting = false
	return iptables("-F", f.chain)
}

// Close removes the chain and its hooks. Safe to call more than once.
func (f *Firewall) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hooked {
		f.removeChain()
		f.hooked, f.cutting = false, false
	}
}
