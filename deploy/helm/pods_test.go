package helm_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/freeport"
)

// localPod stands in for one pod of the StatefulSet: its volumes are
// directories, its containers processes, its IP a loopback address.
type localPod struct {
	name, ip string
	dir      string
	bin      string            // directory of the ferryd and ferry binaries
	objs     []object          // the rendered chart
	spec     any               // the pod template's spec
	mounts   map[string]string // mount path -> local directory
	env      [][2]string       // the ferryd container's resolved environment
	ferryd   *exec.Cmd
	exited   chan error
}

// newLocalPod lays out the pod's volumes under dir: Secrets and
// ConfigMaps written from the rendered objects (their paths rewritten to
// the local directories), emptyDirs and the data volume as empty
// directories.
func newLocalPod(t *testing.T, objs []object, name, ip, bin string) *localPod {
	t.Helper()
	sts := only(t, objs, "StatefulSet")
	p := &localPod{name: name, ip: ip, dir: t.TempDir(), bin: bin, objs: objs,
		spec: get(sts, "spec", "template", "spec"), mounts: map[string]string{}}
	for _, field := range []string{"initContainers", "containers"} {
		for _, c := range list(p.spec, field) {
			for path, vol := range mountsOf(c) {
				local := filepath.Join(p.dir, vol)
				if prev, ok := p.mounts[path]; ok && prev != local {
					t.Fatalf("%s is the mount path of two volumes", path)
				}
				p.mounts[path] = local
			}
		}
	}
	// The hooks log to the container's output through PID 1's stderr,
	// which here is a file of the pod.
	p.mounts["/proc/1/fd/2"] = filepath.Join(p.dir, "hooks.log")
	for _, v := range list(p.spec, "volumes") {
		p.writeVolume(t, v)
	}
	if err := os.MkdirAll(filepath.Join(p.dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// local rewrites the container paths in s to the pod's directories.
func (p *localPod) local(s string) string {
	paths := make([]string, 0, len(p.mounts))
	for m := range p.mounts {
		paths = append(paths, m)
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	pairs := make([]string, 0, 2*len(paths))
	for _, m := range paths {
		pairs = append(pairs, m, p.mounts[m])
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

func (p *localPod) writeVolume(t *testing.T, v any) {
	t.Helper()
	dir := filepath.Join(p.dir, str(v, "name"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var files map[string][]byte
	var items []any
	switch {
	case get(v, "secret") != nil:
		o := find(t, p.objs, "Secret", str(v, "secret", "secretName"))
		files = map[string][]byte{}
		for k, val := range get(o, "data").(map[string]any) {
			b, err := base64.StdEncoding.DecodeString(val.(string))
			if err != nil {
				t.Fatalf("secret %s key %s: %v", str(o, "metadata", "name"), k, err)
			}
			files[k] = b
		}
		items = list(v, "secret", "items")
	case get(v, "configMap") != nil:
		o := find(t, p.objs, "ConfigMap", str(v, "configMap", "name"))
		files = map[string][]byte{}
		for k, val := range get(o, "data").(map[string]any) {
			files[k] = []byte(p.local(val.(string)))
		}
		items = list(v, "configMap", "items")
	default:
		return // an emptyDir
	}
	if items != nil {
		picked := map[string][]byte{}
		for _, it := range items {
			picked[str(it, "path")] = files[str(it, "key")]
		}
		files = picked
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

// baseEnv is the environment of every process of the pod: the binaries
// built from this checkout first on the PATH, nothing of the test's.
func (p *localPod) baseEnv() []string {
	return []string{"PATH=" + p.bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + p.dir}
}

// command runs a container's command (or a hook's) with env, paths
// rewritten, and returns its combined output.
func (p *localPod) command(t *testing.T, argv []any, env [][2]string, timeout time.Duration) (string, error) {
	t.Helper()
	var args []string
	vals := map[string]string{}
	for _, kv := range env {
		vals[kv[0]] = kv[1]
	}
	for _, a := range argv {
		args = append(args, p.local(expandRefs(fmt.Sprint(a), vals)))
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = p.baseEnv()
	for _, kv := range env {
		cmd.Env = append(cmd.Env, kv[0]+"="+p.local(kv[1]))
	}
	done := make(chan struct{})
	timer := time.AfterFunc(timeout, func() {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
		close(done)
	})
	out, err := cmd.CombinedOutput()
	if !timer.Stop() {
		<-done
		return string(out), fmt.Errorf("%v: killed after %v", args, timeout)
	}
	return string(out), err
}

// runInit runs the init container, as the kubelet would before ferryd.
func (p *localPod) runInit(t *testing.T) {
	t.Helper()
	c := container(t, p.spec, "initContainers", "node-certificate")
	out, err := p.command(t, list(c, "command"), podEnv(t, c, p.name, p.ip), time.Minute)
	if err != nil {
		t.Fatalf("%s: init container: %v\n%s", p.name, err, out)
	}
}

// start runs the ferryd container: its command and arguments, its
// environment with the headless Service's name in -join replaced by the
// gossip addresses it stands for (there is no cluster DNS here).
func (p *localPod) start(t *testing.T, join string) {
	t.Helper()
	c := container(t, p.spec, "containers", "ferryd")
	p.env = nil
	for _, kv := range podEnv(t, c, p.name, p.ip) {
		if kv[0] == "FERRY_JOIN" {
			kv[1] = join
		}
		p.env = append(p.env, kv)
	}
	argv := append(list(c, "command"), list(c, "args")...)
	var args []string
	for _, a := range argv {
		args = append(args, p.local(fmt.Sprint(a)))
	}
	log, err := os.OpenFile(filepath.Join(p.dir, "ferryd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(p.bin, args[0]), args[1:]...)
	cmd.Env = p.baseEnv()
	for _, kv := range p.env {
		cmd.Env = append(cmd.Env, kv[0]+"="+p.local(kv[1]))
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.ferryd, p.exited = cmd, make(chan error, 1)
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() { p.stop(t, 30*time.Second) })
}

// stop sends ferryd SIGTERM and waits for it to exit within grace; it
// returns how it exited, or fails after killing it.
func (p *localPod) stop(t *testing.T, grace time.Duration) error {
	t.Helper()
	if p.ferryd == nil {
		return nil
	}
	cmd := p.ferryd
	p.ferryd = nil
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		return err
	case <-time.After(grace):
		cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s: ferryd did not stop within %v of SIGTERM\n%s", p.name, grace, p.logTail())
		return nil
	}
}

func (p *localPod) logTail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "ferryd.log"))
	return tail(string(b))
}

// probe asks one of the ferryd container's HTTP probes as the kubelet
// does (HTTPS without verifying the certificate) and returns the status.
func (p *localPod) probe(t *testing.T, name string) (int, error) {
	t.Helper()
	c := container(t, p.spec, "containers", "ferryd")
	g := get(c, name, "httpGet")
	port := 0
	for _, cp := range list(c, "ports") {
		if str(cp, "name") == str(g, "port") {
			port = num(cp, "containerPort")
		}
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := fmt.Sprintf("%s://%s%s", strings.ToLower(str(g, "scheme")), net.JoinHostPort(p.ip, strconv.Itoa(port)), str(g, "path"))
	resp, err := hc.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// waitReady polls the readiness probe until it answers 200.
func (p *localPod) waitReady(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, err := p.probe(t, "readinessProbe")
		if code == http.StatusOK {
			return
		}
		select {
		case err := <-p.exited:
			t.Fatalf("%s: ferryd exited: %v\n%s", p.name, err, p.logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready within %v (last: %d, %v)\n%s", p.name, within, code, err, p.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hook runs a lifecycle hook of the ferryd container with its environment
// and returns what it logged.
func (p *localPod) hook(t *testing.T, name string, timeout time.Duration) string {
	t.Helper()
	c := container(t, p.spec, "containers", "ferryd")
	out, err := p.command(t, list(c, "lifecycle", name, "exec", "command"), p.env, timeout)
	logged, _ := os.ReadFile(filepath.Join(p.dir, "hooks.log"))
	if err != nil {
		t.Fatalf("%s: %s hook: %v\n%s%s", p.name, name, err, out, logged)
	}
	return out + string(logged)
}

// cli runs the ferry CLI against this pod's client port as the hooks do,
// with the node's certificate.
func (p *localPod) cli(args ...string) (string, error) {
	tlsDir := p.mounts["/etc/ferry/tls"]
	addr := ""
	for _, kv := range p.env {
		if kv[0] == "FERRY_CLIENT_ADDR" {
			addr = kv[1]
		}
	}
	base := []string{"--servers", addr, "--ca", filepath.Join(tlsDir, "ca.pem"),
		"--cert", filepath.Join(tlsDir, "node.pem"), "--key", filepath.Join(tlsDir, "node-key.pem"), "--timeout", "10s"}
	cmd := exec.Command(filepath.Join(p.bin, "ferry"), append(base, args...)...)
	cmd.Env = p.baseEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitRegistered polls `ferry node ls` until the cluster's catalog lists
// every pod: a pod is ready once it knows a meta leader, which registers
// the nodes a moment later.
func (p *localPod) waitRegistered(t *testing.T, pods []*localPod, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, err := p.cli("node", "ls", "--json")
		missing := ""
		for _, q := range pods {
			if !strings.Contains(out, strconv.Quote(q.name)) {
				missing = q.name
			}
		}
		if err == nil && missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node ls does not list %s within %v: %v\n%s", missing, within, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitLifecycle polls `ferry node ls --json` until node's lifecycle
// (active, draining, drained, ...) is want.
func (p *localPod) waitLifecycle(t *testing.T, node, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, err := p.cli("node", "ls", "--json")
		var v any
		got := ""
		if err == nil && json.Unmarshal([]byte(out), &v) == nil {
			got = lifecycleOf(v, node)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s is %q, not %q, after %v: %v\n%s", node, got, want, within, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lifecycleOf finds the object with that id in a decoded `node ls --json`
// and returns its lifecycle.
func lifecycleOf(v any, id string) string {
	switch x := v.(type) {
	case map[string]any:
		if x["id"] == id {
			s, _ := x["lifecycle"].(string)
			return s
		}
		for _, e := range x {
			if s := lifecycleOf(e, id); s != "" {
				return s
			}
		}
	case []any:
		for _, e := range x {
			if s := lifecycleOf(e, id); s != "" {
				return s
			}
		}
	}
	return ""
}

// loopbackIPs picks n loopback addresses in one random /24 of 127/8.
func loopbackIPs(n int) []string {
	base := fmt.Sprintf("127.%d.%d.", 1+rand.IntN(250), 1+rand.IntN(250))
	var out []string
	for i := range n {
		out = append(out, base+strconv.Itoa(i+1))
	}
	return out
}

// freePortOnAll picks a port free for TCP and UDP on every address.
func freePortOnAll(t *testing.T, ips []string, taken []int) int {
	t.Helper()
	for range 100 {
		addr, err := freeport.Loopback(ips[0])
		if err != nil {
			t.Fatal(err)
		}
		_, ps, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(ps)
		ok := !slices.Contains(taken, port)
		for _, ip := range ips[1:] {
			ok = ok && bindable(net.JoinHostPort(ip, ps))
		}
		if ok {
			return port
		}
	}
	t.Fatal("no port free on every address")
	return 0
}

func bindable(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	return pc.Close() == nil
}

// checkNodeCertificate verifies the certificate the init container wrote
// as a client would: against the CA, for the pod IP and the DNS names of
// the pod and of the client Service.
func (p *localPod) checkNodeCertificate(t *testing.T) {
	t.Helper()
	tlsDir := p.mounts["/etc/ferry/tls"]
	caPEM, err := os.ReadFile(filepath.Join(tlsDir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	certPEM, err := os.ReadFile(filepath.Join(tlsDir, "node.pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("node.pem holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	headless := release + "-headless"
	for _, host := range []string{p.ip, p.name + "." + headless + "." + namespace + ".svc.cluster.local",
		p.name + "." + headless, release, release + "." + namespace + ".svc"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("%s: node certificate not valid for %s: %v", p.name, host, err)
		}
	}
	if _, err := os.Stat(filepath.Join(p.mounts["/var/run/ferry-pki"], "work")); !os.IsNotExist(err) {
		t.Errorf("%s: the init container left its scratch directory (with the CA key) behind: %v", p.name, err)
	}
}

// TestChart_PodsRunLocally runs the rendered pods as local processes: for
// three pods, the init container's script issues a node certificate with
// the chart's generated CA, and ferryd starts from the rendered command and
// environment (loopback addresses for pod IPs, the gossip addresses for the
// headless Service's name). The readiness, startup and liveness probes must
// answer; then one pod is stopped as the kubelet stops it (preStop hook,
// SIGTERM, within terminationGracePeriodSeconds) and started again
// (postStart hook), with drainOnStop on.
func TestChart_PodsRunLocally(t *testing.T) {
	bin := t.TempDir()
	build(t, bin, "cmd/ferryd")
	build(t, bin, "cmd/ferry")
	ips := loopbackIPs(3)
	var ports []int
	for range 4 {
		ports = append(ports, freePortOnAll(t, ips, ports))
	}
	objs := renderObjects(t, "--set", fmt.Sprintf("replicas=3,persistence.enabled=false,lifecycle.drainOnStop=true,"+
		"lifecycle.safeToStopTimeoutSeconds=60,lifecycle.drainTimeoutSeconds=60,"+
		"ports.raft=%d,ports.client=%d,ports.admin=%d,ports.gossip=%d", ports[0], ports[1], ports[2], ports[3]))
	var join []string
	for _, ip := range ips {
		join = append(join, net.JoinHostPort(ip, strconv.Itoa(ports[3])))
	}
	pods := make([]*localPod, len(ips))
	for i, ip := range ips {
		pods[i] = newLocalPod(t, objs, fmt.Sprintf("%s-%d", release, i), ip, bin)
		pods[i].runInit(t)
		pods[i].checkNodeCertificate(t)
		pods[i].start(t, strings.Join(join, ","))
	}
	for _, p := range pods {
		p.waitReady(t, 90*time.Second)
		for _, probe := range []string{"startupProbe", "livenessProbe"} {
			if code, err := p.probe(t, probe); code != http.StatusOK {
				t.Errorf("%s: %s answered %d, %v", p.name, probe, code, err)
			}
		}
	}
	pods[0].waitRegistered(t, pods, time.Minute)
	p := pods[2]
	grace := time.Duration(num(get(only(t, objs, "StatefulSet"), "spec", "template", "spec"), "terminationGracePeriodSeconds")) * time.Second
	start := time.Now()
	out := p.hook(t, "preStop", grace)
	if !strings.Contains(out, "prestop: drained") || !strings.Contains(out, "prestop: safe to stop") {
		t.Fatalf("preStop hook did not drain and find the node safe to stop:\n%s", out)
	}
	if err := p.stop(t, grace-time.Since(start)); err != nil {
		t.Errorf("ferryd exited with %v after SIGTERM\n%s", err, p.logTail())
	}
	pods[0].waitLifecycle(t, p.name, "drained", time.Minute)
	marker := filepath.Join(p.mounts["/var/lib/ferry"], "drained-on-stop")
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the preStop hook left no drain marker: %v", err)
	}
	os.Remove(filepath.Join(p.dir, "hooks.log"))
	p.runInit(t)
	p.start(t, strings.Join(join, ","))
	if out := p.hook(t, "postStart", 2*time.Minute); !strings.Contains(out, "poststart: undrained") {
		t.Fatalf("postStart hook did not undrain the node:\n%s", out)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the drain marker is still there after the undrain: %v", err)
	}
	p.waitReady(t, 90*time.Second)
	pods[0].waitLifecycle(t, p.name, "active", time.Minute)
}
