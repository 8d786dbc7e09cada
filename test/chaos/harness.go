package chaos

import (
	crand "crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/devpki"
	"github.com/ferrymq/ferry/internal/tlsconf"
)

// Node is one ferryd process of the cluster: its own loopback address
// (127.0.1.11, .12, ...), ports, data directory and log file.
type Node struct {
	Index      int
	ID         string
	IP         string
	RaftAddr   string
	ClientAddr string
	HTTPAddr   string
	GossipAddr string
	DataDir    string
	LogPath    string
	// SQSAddr is the node's SQS endpoint (-sqs-addr); empty unless the
	// cluster runs with ClusterOptions.SQS.
	SQSAddr string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	paused  bool
	expect  bool // the current process is expected to exit (we killed it)
	starts  int
	crashes []string // exits we did not cause
}

// Cluster runs N ferryd processes.
type Cluster struct {
	// Nodes are the cluster's members: started at first, or added from
	// Spares later. A fault that adds or retires a node replaces the slice
	// (under nodesMu); code running beside the fault phase reads it through
	// members.
	Nodes []*Node
	// Spares are node slots (addresses, certificates, data directories)
	// not started yet, taken in order by AddSpare; Retired are nodes gone
	// for good.
	Spares, Retired []*Node
	nodesMu         sync.Mutex
	// bootstrapExpect is the number of nodes that form the cluster.
	bootstrapExpect int
	Root            string // holds data/ and logs/
	bin             string
	args            []string // extra ferryd flags
	// extraArgs and maxFiles, when set, give one node's extra flags and
	// its descriptor limit (ClusterOptions).
	extraArgs func(*Node) []string
	maxFiles  func(*Node) int
	logf      func(string, ...any)
	// pki is the directory of the throwaway CA and node certificates; ""
	// when the cluster runs with -insecure.
	pki string
	// ClientTLS is what clients of the cluster dial with (nil: plaintext).
	ClientTLS *tls.Config
	httpc     *http.Client // asks the admin APIs; a paused node must not hang a probe
	scheme    string       // of the admin API URLs
	// gossipKey is the cluster's gossip key (base64), fresh per cluster.
	gossipKey string
	// AdminToken is the secret of a cluster admin token in TokensFile,
	// fresh per cluster; the harness's clients and admin API calls present
	// it.
	AdminToken string
	// TokensFile is the tokens file every node reads (-tokens); edit it
	// and call Reload to change the nodes' tokens.
	TokensFile string
	// mounted lists the data directories on their own tmpfs.
	mounted []string
}

// ClusterOptions configure NewCluster.
type ClusterOptions struct {
	Nodes int
	Root  string
	Bin   string
	Args  []string
	Logf  func(string, ...any)
	// TLS runs the nodes with a throwaway CA and node certificates (made
	// under Root/pki), and the harness's clients with that CA.
	TLS bool
	// Tmpfs, when set (e.g. "160m"), puts each node's data directory on a
	// tmpfs of that size, for disk-full faults; without root it is not
	// done, and Cluster.DiskFaults reports false.
	Tmpfs string
	// NodeArgs, when set, returns extra ferryd flags of one node (after
	// Args), e.g. its own -sqs-addr; it is called at every start.
	NodeArgs func(*Node) []string
	// MaxFiles, when set, returns one node's limit of open file
	// descriptors (RLIMIT_NOFILE, soft and hard, set before ferryd runs);
	// 0 leaves the node's limit as the harness's.
	MaxFiles func(*Node) int
	// SQS gives every node an SQS endpoint (Node.SQSAddr).
	SQS bool
	// Spares is the number of node slots laid out beside the Nodes but not
	// started: faults that add a node take them (AddSpare).
	Spares int
}

// BuildFerryd compiles the server binary into dir and returns its path,
// with the chaosclock and chaosdisk tags: the chaos build's clock can be
// shifted (Cluster.ShiftClock) and its raft log fsyncs and writes made to
// fail (Cluster.ArmFsyncFailures, Cluster.ArmDiskFault).
func BuildFerryd(dir string) (string, error) {
	bin := filepath.Join(dir, "ferryd")
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("go tool not found: %w", err)
	}
	cmd := exec.Command(goTool, "build", "-tags", "chaosclock,chaosdisk", "-o", bin, "github.com/ferrymq/ferry/cmd/ferryd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build ferryd: %v\n%s", err, out)
	}
	return bin, nil
}

// NewCluster lays out the nodes' addresses and directories. Ports come from
// one random base below the ephemeral range, checked free on every node
// address; they stay the same across restarts.
func NewCluster(o ClusterOptions) (*Cluster, error) {
	key := make([]byte, 32)
	if _, err := crand.Read(key); err != nil {
		return nil, err
	}
	c := &Cluster{Root: o.Root, bin: o.Bin, args: o.Args, extraArgs: o.NodeArgs, maxFiles: o.MaxFiles, logf: o.Logf, scheme: "http",
		gossipKey: base64.StdEncoding.EncodeToString(key), bootstrapExpect: o.Nodes}
	for _, d := range []string{"data", "logs"} {
		if err := os.MkdirAll(filepath.Join(o.Root, d), 0o755); err != nil {
			return nil, err
		}
	}
	stride := 4 // ports per node: raft, client, http, gossip (and sqs)
	if o.SQS {
		stride = 5
	}
	base, err := pickPorts(o.Nodes+o.Spares, stride)
	if err != nil {
		return nil, err
	}
	for i := range o.Nodes + o.Spares {
		ip := fmt.Sprintf("127.0.1.%d", 11+i)
		port := func(k int) string { return net.JoinHostPort(ip, strconv.Itoa(base+stride*i+k)) }
		id := fmt.Sprintf("n%d", i+1)
		n := &Node{
			Index: i, ID: id, IP: ip,
			RaftAddr: port(0), ClientAddr: port(1), HTTPAddr: port(2), GossipAddr: port(3),
			DataDir: filepath.Join(o.Root, "data", id), LogPath: filepath.Join(o.Root, "logs", id+".log"),
		}
		if o.SQS {
			n.SQSAddr = port(4)
		}
		if i < o.Nodes {
			c.Nodes = append(c.Nodes, n)
		} else {
			c.Spares = append(c.Spares, n)
		}
	}
	c.httpc = &http.Client{Timeout: time.Second}
	if o.Tmpfs != "" {
		if err := c.mountDataDirs(o.Tmpfs); err != nil && o.Logf != nil {
			o.Logf("!!! DISK-FULL FAULTS WILL BE SKIPPED: data directories not on tmpfs: %v", err)
		}
	}
	if o.TLS {
		if err := c.makePKI(); err != nil {
			return nil, err
		}
	}
	if err := c.makeTokens(); err != nil {
		return nil, err
	}
	return c, nil
}

// makeTokens writes Root/tokens.json with one cluster admin token, and
// has the harness's admin API calls present it.
func (c *Cluster) makeTokens() error {
	secret, err := auth.NewSecret()
	if err != nil {
		return err
	}
	c.AdminToken, c.TokensFile = secret, filepath.Join(c.Root, "tokens.json")
	entry := auth.FileToken{Name: "chaos-admin", SHA256: auth.HashSecret(secret), Cluster: []string{"admin"}}
	if err := auth.AddToFile(c.TokensFile, entry); err != nil {
		return fmt.Errorf("chaos tokens: %w", err)
	}
	base := c.httpc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.httpc.Transport = bearer{base: base, token: secret}
	return nil
}

// bearer adds "Authorization: Bearer <token>" to every request.
type bearer struct {
	base  http.RoundTripper
	token string
}

// RoundTrip sends a copy of r with the token.
func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// Reload sends the node SIGHUP: it re-reads its tokens file (and gossip
// keyring, if any).
func (c *Cluster) Reload(n *Node) error {
	n.marker("SIGHUP")
	_, err := n.signal(syscall.SIGHUP, false)
	return err
}

// HTTPClient returns the client the harness reaches the admin API with
// (TLS as the cluster's, the admin token on every request).
func (c *Cluster) HTTPClient() *http.Client { return c.httpc }

// URL is the address of path on n's admin API.
func (c *Cluster) URL(n *Node, path string) string { return c.url(n, path) }

// makePKI writes a CA and node certificates (naming each node's IP) under
// Root/pki and points the harness's clients at the CA.
func (c *Cluster) makePKI() error {
	c.pki = filepath.Join(c.Root, "pki")
	var ids, ips []string
	for _, n := range c.slots() {
		ids, ips = append(ids, n.ID), append(ips, n.IP)
	}
	if _, err := devpki.Init(c.pki, ids, ips); err != nil {
		return fmt.Errorf("chaos PKI: %w", err)
	}
	cfg, err := tlsconf.Client(devpki.Files{Dir: c.pki}.CA(), "", "")
	if err != nil {
		return err
	}
	c.ClientTLS, c.scheme = cfg, "https"
	c.httpc.Transport = &http.Transport{TLSClientConfig: cfg}
	return nil
}

// url is the address of path on n's admin API.
func (c *Cluster) url(n *Node, path string) string {
	return c.scheme + "://" + n.HTTPAddr + path
}

// pickPorts finds a base port such that base .. base+stride*n-1 are free
// on the node addresses (TCP, and UDP for gossip, the fourth of each
// node's).
func pickPorts(n, stride int) (int, error) {
	for try := 0; try < 50; try++ {
		base := 20000 + rand.N(12000/stride)*stride
		if portsFree(base, n, stride) {
			return base, nil
		}
	}
	return 0, errors.New("no free port range found")
}

func portsFree(base, n, stride int) bool {
	var closers []func() error
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for i := range n {
		ip := fmt.Sprintf("127.0.1.%d", 11+i)
		for k := range stride {
			addr := net.JoinHostPort(ip, strconv.Itoa(base+stride*i+k))
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return false
			}
			closers = append(closers, ln.Close)
			if k == 3 {
				pc, err := net.ListenPacket("udp", addr)
				if err != nil {
					return false
				}
				closers = append(closers, pc.Close)
			}
		}
	}
	return true
}

// ClientAddrs returns every member's client address.
func (c *Cluster) ClientAddrs() []string {
	var out []string
	for _, n := range c.members() {
		out = append(out, n.ClientAddr)
	}
	return out
}

// members returns the cluster's current members (a copy).
func (c *Cluster) members() []*Node {
	c.nodesMu.Lock()
	defer c.nodesMu.Unlock()
	return slices.Clone(c.Nodes)
}

// slots returns every node slot: members, spares and retired nodes.
func (c *Cluster) slots() []*Node {
	c.nodesMu.Lock()
	defer c.nodesMu.Unlock()
	return slices.Concat(c.Nodes, c.Spares, c.Retired)
}

// AddSpare starts the next spare slot as a new member that joins the
// running cluster, and returns it; nil when no spare is left.
func (c *Cluster) AddSpare() (*Node, error) {
	c.nodesMu.Lock()
	if len(c.Spares) == 0 {
		c.nodesMu.Unlock()
		return nil, nil
	}
	n := c.Spares[0]
	c.Spares = slices.Clone(c.Spares[1:])
	c.Nodes = append(slices.Clone(c.Nodes), n)
	c.nodesMu.Unlock()
	n.marker("added to the cluster")
	return n, c.Start(n)
}

// Retire takes a stopped member out of the cluster for good: the harness
// no longer starts, probes or faults it.
func (c *Cluster) Retire(n *Node) error {
	if n.Running() {
		return fmt.Errorf("%s is running", n.ID)
	}
	n.marker("retired from the cluster")
	c.nodesMu.Lock()
	defer c.nodesMu.Unlock()
	c.Nodes = slices.DeleteFunc(slices.Clone(c.Nodes), func(m *Node) bool { return m == n })
	c.Retired = append(slices.Clone(c.Retired), n)
	return nil
}

func (c *Cluster) nodeArgs(n *Node) []string {
	var join []string
	for _, m := range c.members() {
		join = append(join, m.GossipAddr)
	}
	expect := c.bootstrapExpect
	if n.Index >= c.bootstrapExpect {
		expect = 0 // a node added later joins the formed cluster
	}
	args := []string{
		"-id", n.ID, "-data-dir", n.DataDir, "-ip", n.IP,
		"-raft-addr", n.RaftAddr, "-client-addr", n.ClientAddr, "-http-addr", n.HTTPAddr, "-gossip-addr", n.GossipAddr,
		"-join", strings.Join(join, ","), "-bootstrap-expect", strconv.Itoa(expect), "-fast-gossip",
		"-gossip-key", c.gossipKey, "-tokens", c.TokensFile,
	}
	if n.SQSAddr != "" {
		args = append(args, "-sqs-addr", n.SQSAddr)
	}
	if c.pki != "" {
		f := devpki.Files{Dir: c.pki}
		args = append(args, "-tls-cert", f.Cert(n.ID), "-tls-key", f.Key(n.ID), "-tls-ca", f.CA())
	} else {
		args = append(args, "-insecure")
	}
	args = append(args, c.args...)
	if c.extraArgs != nil {
		args = append(args, c.extraArgs(n)...)
	}
	return args
}

// command is the process of node n: ferryd, or under a descriptor limit
// a shell that sets it (soft and hard) and becomes ferryd.
func (c *Cluster) command(n *Node) *exec.Cmd {
	if c.maxFiles != nil {
		if fds := c.maxFiles(n); fds > 0 {
			script := fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, fds)
			return exec.Command("/bin/sh", append([]string{"-c", script, c.bin}, c.nodeArgs(n)...)...)
		}
	}
	return exec.Command(c.bin, c.nodeArgs(n)...)
}

// marker appends a line to a node's log, so the log shows what the
// harness did and when.
func (n *Node) marker(format string, args ...any) {
	f, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "=== chaos %s: %s ===\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	f.Close()
}

// Start launches the node's process (from its data directory as it is).
func (c *Cluster) Start(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("%s already running", n.ID)
	}
	if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.starts++
	fmt.Fprintf(f, "=== chaos %s: start #%d ===\n", time.Now().Format("15:04:05.000"), n.starts)
	cmd := c.command(n)
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group: a Ctrl-C in the terminal reaches the test, which
	// cleans up; Pdeathsig ends the node if the test process dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", n.ID, err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.paused, n.expect = cmd, done, false, false
	go c.reap(n, cmd, f, done)
	return nil
}

// reap waits for a process to end and notes exits the harness did not
// cause.
func (c *Cluster) reap(n *Node, cmd *exec.Cmd, f *os.File, done chan struct{}) {
	err := cmd.Wait()
	f.Close()
	n.mu.Lock()
	if !n.expect {
		msg := fmt.Sprintf("%s exited by itself at %s: %v (see %s)", n.ID, time.Now().Format("15:04:05.000"), err, n.LogPath)
		n.crashes = append(n.crashes, msg)
		if c.logf != nil {
			c.logf("!!! %s", msg)
		}
	}
	if n.cmd == cmd {
		n.cmd = nil
	}
	n.mu.Unlock()
	close(done)
}

// Running reports whether the node's process is up (paused or not).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Paused reports whether the node is stopped by SIGSTOP.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// Crashes lists the exits of the node that the harness did not cause.
func (n *Node) Crashes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.crashes...)
}

// signal sends sig to the node's process; expectExit marks the exit that
// follows as ours.
func (n *Node) signal(sig syscall.Signal, expectExit bool) (chan struct{}, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil, fmt.Errorf("%s is not running", n.ID)
	}
	if expectExit {
		n.expect = true
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return nil, err
	}
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
	return n.done, nil
}

// Kill ends the node with SIGKILL (kill -9) and waits for it.
func (c *Cluster) Kill(n *Node) error {
	n.marker("kill -9")
	done, err := n.signal(syscall.SIGKILL, true)
	if err != nil {
		return err
	}
	<-done
	return nil
}

// Stop ends the node with SIGTERM (a clean stop), escalating to SIGKILL
// after timeout.
func (c *Cluster) Stop(n *Node, timeout time.Duration) {
	if n.Paused() {
		c.Resume(n)
	}
	done, err := n.signal(syscall.SIGTERM, true)
	if err != nil {
		return
	}
	select {
	case <-done:
	case <-time.After(timeout):
		c.Kill(n)
	}
}

// Pause stops the node with SIGSTOP.
func (c *Cluster) Pause(n *Node) error {
	n.marker("SIGSTOP")
	_, err := n.signal(syscall.SIGSTOP, false)
	return err
}

// Resume continues a paused node with SIGCONT.
func (c *Cluster) Resume(n *Node) error {
	n.marker("SIGCONT")
	_, err := n.signal(syscall.SIGCONT, false)
	return err
}

// Wipe deletes a stopped node's data directory.
func (c *Cluster) Wipe(n *Node) error {
	if n.Running() {
		return fmt.Errorf("%s is running", n.ID)
	}
	n.marker("data directory wiped")
	if slices.Contains(c.mounted, n.DataDir) {
		return removeContents(n.DataDir)
	}
	return os.RemoveAll(n.DataDir)
}

// StartAll starts every node that is not running.
func (c *Cluster) StartAll() error {
	var errs []error
	for _, n := range c.members() {
		if !n.Running() {
			errs = append(errs, c.Start(n))
		}
	}
	return errors.Join(errs...)
}

// KillAll kills every running node at once.
func (c *Cluster) KillAll() {
	var dones []chan struct{}
	for _, n := range c.members() {
		n.marker("kill -9 (all nodes)")
		if done, err := n.signal(syscall.SIGKILL, true); err == nil {
			dones = append(dones, done)
		}
	}
	for _, d := range dones {
		<-d
	}
}

// ResumeAll continues every paused node.
func (c *Cluster) ResumeAll() {
	for _, n := range c.members() {
		if n.Paused() {
			c.Resume(n)
		}
	}
}

// Close stops every node: cleanly when clean is set, else with SIGKILL;
// then it unmounts the tmpfs data directories.
func (c *Cluster) Close(clean bool) {
	c.ResumeAll()
	defer c.unmountDataDirs()
	if !clean {
		c.KillAll()
		return
	}
	var wg sync.WaitGroup
	for _, n := range c.members() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Stop(n, 10*time.Second)
		}()
	}
	wg.Wait()
}

// Crashes lists every node exit the harness did not cause.
func (c *Cluster) Crashes() []string {
	var out []string
	for _, n := range c.slots() {
		out = append(out, n.Crashes()...)
	}
	return out
}

// ByID returns the node with the given id, or nil.
func (c *Cluster) ByID(id string) *Node {
	for _, n := range c.members() {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Up returns the nodes that are running and not paused.
func (c *Cluster) Up() []*Node {
	var out []*Node
	for _, n := range c.members() {
		if n.Running() && !n.Paused() {
			out = append(out, n)
		}
	}
	return out
}
