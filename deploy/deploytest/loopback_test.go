package deploytest

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

// loopbackCluster is the compose file's cluster run as plain processes:
// every node IP moved to a loopback address with the same last byte, /pki
// and /data moved under a temporary directory, and everything else as the
// compose file says.
type loopbackCluster struct {
	c      composeCluster
	bins   binaries
	path   string            // PATH for the image's commands: its /usr/local/bin and /bin
	dir    string            // holds pki/ and the nodes' data and logs
	ipMap  map[string]string // compose IP -> loopback IP
	hcArgs []string          // the image's health check command, its binary first
}

// nodeIPPattern matches an IPv4 address in a compose value.
var nodeIPPattern = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)

// remap moves a compose value (an environment value) to the loopback run.
func (lc *loopbackCluster) remap(node, v string) string {
	v = nodeIPPattern.ReplaceAllStringFunc(v, func(ip string) string {
		if to, ok := lc.ipMap[ip]; ok {
			return to
		}
		return ip
	})
	switch {
	case v == "/pki" || strings.HasPrefix(v, "/pki/"):
		return filepath.Join(lc.dir, v)
	case v == "/data" || strings.HasPrefix(v, "/data/"):
		return filepath.Join(lc.dir, node, v)
	}
	return v
}

// env is the environment of service svc, remapped, with the image's PATH.
func (lc *loopbackCluster) env(name string, svc service) []string {
	out := []string{"PATH=" + lc.path}
	for k, v := range svc.Environment {
		out = append(out, k+"="+lc.remap(name, v))
	}
	slices.Sort(out)
	return out
}

// pickLoopback maps every node IP to 127.A.B.<its last byte> with A and B
// picked at random until every port the nodes listen on is free there.
func pickLoopback(t *testing.T, c composeCluster) map[string]string {
	t.Helper()
	for range 50 {
		a, b := 100+rand.IntN(150), 1+rand.IntN(250)
		m, free := map[string]string{}, true
		for _, n := range c.nodes {
			last := n.ip.As4()[3]
			m[n.ip.String()] = fmt.Sprintf("127.%d.%d.%d", a, b, last)
			for role, ap := range n.listenAddrs(t) {
				addr := net.JoinHostPort(m[n.ip.String()], fmt.Sprint(ap.Port()))
				if !portFree(addr, role == "gossip") {
					free = false
				}
			}
		}
		if free {
			return m
		}
	}
	t.Fatal("no loopback block 127.A.B.0/24 found with the nodes' ports free")
	return nil
}

func portFree(addr string, udp bool) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	if !udp {
		return true
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	return pc.Close() == nil
}

// runInit runs compose/init.sh as the init service would, with the
// image's busybox, and returns its output.
func (lc *loopbackCluster) runInit(t *testing.T) string {
	t.Helper()
	env := append(lc.env("init", lc.c.init), "PKI_DIR="+filepath.Join(lc.dir, "pki"))
	out, code := run(t, lc.bins.sh, env, filepath.Join(repoRoot, "deploy/compose/init.sh"))
	if code != 0 {
		t.Fatalf("init.sh: exit %d: %s", code, out)
	}
	return out
}

// checkCertificates checks that every node certificate init.sh made names
// every node's (remapped) IP and service name.
func (lc *loopbackCluster) checkCertificates(t *testing.T) {
	t.Helper()
	for _, n := range lc.c.nodes {
		text, err := os.ReadFile(filepath.Join(lc.dir, "pki", n.id+".pem"))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(text)
		if block == nil {
			t.Fatalf("%s.pem: no PEM block", n.id)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range lc.c.nodes {
			if err := cert.VerifyHostname(lc.ipMap[other.ip.String()]); err != nil {
				t.Errorf("%s.pem: %v", n.id, err)
			}
			if err := cert.VerifyHostname(other.service); err != nil {
				t.Errorf("%s.pem: %v", n.id, err)
			}
		}
	}
}

// start starts every node's ferryd with its remapped compose environment
// and stops them when the test ends.
func (lc *loopbackCluster) start(t *testing.T) {
	t.Helper()
	for _, n := range lc.c.nodes {
		data := filepath.Join(lc.dir, n.service, "data")
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(lc.dir, n.service+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(lc.bins.ferryd) // the image's entrypoint, no arguments: all is in the environment
		cmd.Env, cmd.Dir = lc.env(n.service, n.svc), data
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); logf.Close(); close(done) }()
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				log, _ := os.ReadFile(logf.Name())
				t.Logf("%s log (last lines):\n%s", n.service, lastLines(string(log), 15))
			}
		})
	}
}

// healthy waits until the image's health check command passes in every
// node's environment.
func (lc *loopbackCluster) healthy(t *testing.T) {
	t.Helper()
	for _, n := range lc.c.nodes {
		testwait.UntilNil(t, time.Minute, n.service+" passing the image's health check", func() error {
			out, code := run(t, lc.hcArgs[0], lc.env(n.service, n.svc), lc.hcArgs[1:]...)
			if code != 0 {
				return fmt.Errorf("exit %d: %s", code, lastLines(out, 2))
			}
			return nil
		})
	}
}

// cli runs the image's ferry with args in the environment of the compose
// file's first node, as `compose exec node1 ferry ...` does.
func (lc *loopbackCluster) cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	n := lc.c.nodes[0]
	return run(t, lc.bins.ferry, lc.env(n.service, n.svc), append([]string{"--timeout", "10s"}, args...)...)
}

// sendReceiveAck checks the cluster end to end through the CLI: status
// showing every node, then a queue, a send, a receive and its ack.
func (lc *loopbackCluster) sendReceiveAck(t *testing.T) {
	t.Helper()
	testwait.UntilNil(t, time.Minute, "ferry cluster status listing every node", func() error {
		out, code := lc.cli(t, "cluster", "status")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, lastLines(out, 2))
		}
		for _, n := range lc.c.nodes {
			if !strings.Contains(out, n.id) || !strings.Contains(out, lc.ipMap[n.ip.String()]) {
				return fmt.Errorf("%s at %s missing:\n%s", n.id, lc.ipMap[n.ip.String()], out)
			}
		}
		t.Logf("ferry cluster status:\n%s", out)
		return nil
	})
	must := func(args ...string) string {
		t.Helper()
		out, code := lc.cli(t, args...)
		if code != 0 {
			t.Fatalf("ferry %s: exit %d: %s", strings.Join(args, " "), code, out)
		}
		return out
	}
	testwait.UntilNil(t, time.Minute, "queue created", func() error {
		if out, code := lc.cli(t, "queue", "create", "orders"); code != 0 && !strings.Contains(out, "exists") {
			return fmt.Errorf("exit %d: %s", code, lastLines(out, 2))
		}
		return nil
	})
	must("send", "orders", "hello from the image")
	var got []struct{ Body, Receipt string }
	testwait.UntilNil(t, 30*time.Second, "the message received", func() error {
		out, code := lc.cli(t, "--json", "recv", "orders")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, lastLines(out, 2))
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			return fmt.Errorf("recv --json: %v: %s", err, out)
		}
		if len(got) != 1 {
			return fmt.Errorf("received %d messages", len(got))
		}
		return nil
	})
	if got[0].Body != "hello from the image" || got[0].Receipt == "" {
		t.Fatalf("received %+v", got[0])
	}
	must("ack", got[0].Receipt)
	if out := must("recv", "orders"); !strings.Contains(out, "no messages") {
		t.Fatalf("after the ack the queue still delivers: %s", out)
	}
}
