package systemd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/freeport"
	"github.com/ferrymq/ferry/internal/syncbuf"
	"github.com/ferrymq/ferry/internal/testwait"
)

// TestSampleConfig_ParsedByFerryd runs ferryd on the sample config as the
// unit does, with nothing overridden, so that every key is checked to be a
// flag and every value to parse as that flag's, and the settings to go
// together (TLS, tokens, gossip key). ferryd has no check-only mode, so the
// run is made to stop at the first step after parsing: FERRY_LOG_LEVEL set
// to a level that does not exist fails it there (exit status 1), before it
// reads a file the config names or opens a port. A config error would stop
// it earlier, with exit status 2 and the key named.
func TestSampleConfig_ParsedByFerryd(t *testing.T) {
	abs, err := filepath.Abs(configPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ferrydBin, "-config", abs)
	cmd.Env = append(cleanEnv(), "FERRY_LOG_LEVEL=not-a-level")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "-log-level") {
		t.Fatalf("ferryd -config %s: %v, want exit status 1 at -log-level (the config parsed); output:\n%s", configPath, err, out)
	}
}

// cleanEnv is the test's environment without FERRY_* variables, which
// would override the config file.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FERRY_") {
			env = append(env, kv)
		}
	}
	return env
}

// TestSampleConfig_NodeServes starts ferryd with the sample config and
// the command line of a one-node cluster on loopback: the settings that
// name this host (id, ip, data-dir, join, bootstrap-expect, addresses) and
// the TLS, token and keyring files, made here with `ferryd dev-pki` and
// `ferryd token` as the README does; every other setting comes from the
// file. The node must become ready (/readyz), stay so after the unit's
// reload (SIGHUP), and stop cleanly (exit status 0) on the unit's
// KillSignal within its TimeoutStopSec.
func TestSampleConfig_NodeServes(t *testing.T) {
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	run(t, ferrydBin, "dev-pki", "-dir", pki, "-nodes", "node1")
	tokens := filepath.Join(pki, "tokens.json")
	run(t, ferrydBin, "token", "-name", "admin", "-cluster", "admin", "-file", tokens, "-secret-file", filepath.Join(pki, "admin.token"))
	keyring := filepath.Join(pki, "gossip.keys")
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(keyring, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	for _, flag := range []string{"raft-addr", "client-addr", "http-addr", "gossip-addr"} {
		a, err := freeport.Loopback("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		addrs[flag] = a
	}
	abs, err := filepath.Abs(configPath)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-config", abs, "-id", "node1", "-ip", "127.0.0.1", "-data-dir", filepath.Join(dir, "data"),
		"-bootstrap-expect", "1", "-join", "",
		"-tls-cert", filepath.Join(pki, "node1.pem"), "-tls-key", filepath.Join(pki, "node1-key.pem"), "-tls-ca", filepath.Join(pki, "ca.pem"),
		"-tokens", tokens, "-gossip-keyring", keyring}
	for flag, a := range addrs {
		args = append(args, "-"+flag, a)
	}
	p := startProcess(t, ferrydBin, args...)
	hc := httpsClient(t, filepath.Join(pki, "ca.pem"))
	base := "https://" + addrs["http-addr"]
	testwait.UntilNil(t, 60*time.Second, "ferryd ready with the sample config", func() error {
		err := p.get(hc, base+"/readyz", "", http.StatusOK)
		if errors.Is(err, errExited) {
			t.Fatal(err) // no use waiting
		}
		return err
	})

	// The unit's reload: a token added to the file works once ferryd has
	// had SIGHUP.
	opsSecret := filepath.Join(pki, "ops.token")
	run(t, ferrydBin, "token", "-name", "ops", "-cluster", "admin", "-file", tokens, "-secret-file", opsSecret)
	secret, err := os.ReadFile(opsSecret)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(secret))
	if err := p.get(hc, base+"/v1/cluster", token, http.StatusUnauthorized); err != nil {
		t.Fatalf("a token added to the file before the reload: %v", err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testwait.UntilNil(t, 10*time.Second, "the token added to the file accepted after SIGHUP", func() error {
		return p.get(hc, base+"/v1/cluster", token, http.StatusOK)
	})
	if s := p.logs.String(); strings.Contains(s, "not reloaded") {
		t.Fatalf("SIGHUP: a reload failed:\n%s", s)
	}
	p.stopWithin(t, readUnit(t).last("Service", "TimeoutStopSec"))
}

// process is a ferryd the test started.
type process struct {
	cmd  *exec.Cmd
	logs syncbuf.Buffer
	done chan struct{} // closed once the process has exited
	err  error         // what Wait returned; read after done
}

// startProcess starts name with args and the test's environment without
// FERRY_* variables; it is killed when the test ends, and its output
// logged if the test failed.
func startProcess(t *testing.T, name string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Env = cleanEnv()
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill() // fails harmlessly once it has exited
		<-p.done
		if t.Failed() {
			t.Logf("ferryd output:\n%s", p.logs.String())
		}
	})
	return p
}

// stopWithin sends SIGTERM (the unit's KillSignal) and fails unless the
// process exits with status 0 within the unit's TimeoutStopSec (seconds).
func (p *process) stopWithin(t *testing.T, timeoutStopSec string) {
	t.Helper()
	limit, err := time.ParseDuration(timeoutStopSec + "s")
	if err != nil {
		t.Fatalf("TimeoutStopSec %q: %v", timeoutStopSec, err)
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("ferryd after SIGTERM: %v, want exit status 0 (systemd would count it a failure)", p.err)
		}
		t.Logf("ferryd stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(limit):
		t.Fatalf("ferryd still running %v after SIGTERM: systemd would kill it", limit)
	}
}

// errExited is what get answers once ferryd has exited.
var errExited = errors.New("ferryd exited")

// get returns nil when GET url, with the bearer token if not empty,
// answers the status want, and an error saying what it got otherwise; the
// process having exited is an error too.
func (p *process) get(hc *http.Client, url, token string, want int) error {
	select {
	case <-p.done:
		return fmt.Errorf("%w: %v", errExited, p.err)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("GET %s: %s, want %d", url, resp.Status, want)
	}
	return nil
}

// httpsClient trusts the CA certificate at caFile.
func httpsClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s: no certificate", caFile)
	}
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// run runs a command to completion, failing the test with its output
// when it fails.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
