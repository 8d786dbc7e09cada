package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/node"
	"github.com/ferrymq/ferry/partition"
)

func TestParseFlags_MalformedEnvValueIsAnErrorNamingIt(t *testing.T) {
	for env, val := range map[string]string{
		"FERRY_BOOTSTRAP_EXPECT":      "abc",
		"FERRY_FAST_GOSSIP":           "maybe",
		"FERRY_RAFT_ELECTION_TIMEOUT": "soon",
	} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, val)
			var out bytes.Buffer
			_, err := parseFlags([]string{"-id", "n1", "-insecure"}, &out)
			if err == nil || !strings.Contains(err.Error(), env) {
				t.Fatalf("%s=%s: err %v, want an error naming %s", env, val, err, env)
			}
			if code := exitCode(err, &out); code == 0 {
				t.Fatalf("exit code 0 for %v", err)
			}
		})
	}
}

func TestParseFlags_EnvValuesApplyAndFlagsWin(t *testing.T) {
	t.Setenv("FERRY_INSECURE", "true")
	t.Setenv("FERRY_BOOTSTRAP_EXPECT", "3")
	t.Setenv("FERRY_ID", "from-env")
	o, err := parseFlags([]string{"-id", "n1", "-insecure"}, &bytes.Buffer{})
	if err != nil || o.bootstrapExpect != 3 || o.id != "n1" {
		t.Fatalf("got %+v, %v: want bootstrap-expect 3 from the environment and id n1 from the flag", o, err)
	}
}

func TestParseFlags_HelpExitsZeroAndListsEveryEnvName(t *testing.T) {
	var out bytes.Buffer
	_, err := parseFlags([]string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp", err)
	}
	if code := exitCode(err, &bytes.Buffer{}); code != 0 {
		t.Fatalf("-h exit code %d, want 0", code)
	}
	fs := flag.NewFlagSet("names", flag.ContinueOnError)
	var o options
	o.raft.register(fs)
	help := out.String()
	for _, name := range []string{"id", "data-dir", "ip", "port-offset", "raft-addr", "client-addr", "http-addr", "gossip-addr",
		"join", "bootstrap-expect", "cluster", "log-level", "fast-gossip"} {
		if !strings.Contains(help, "-"+name) || !strings.Contains(help, envName(name)) {
			t.Errorf("help lacks -%s or %s", name, envName(name))
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(help, envName(f.Name)) {
			t.Errorf("help lacks %s", envName(f.Name))
		}
	})
}

func TestParseFlags_BadFlagIsAUsageError(t *testing.T) {
	_, err := parseFlags([]string{"-id", "n1", "-insecure", "-bootstrap-expect", "x"}, &bytes.Buffer{})
	if code := exitCode(err, &bytes.Buffer{}); code != 2 {
		t.Fatalf("bad flag: %v, exit code %d, want 2", err, code)
	}
	_, err = parseFlags(nil, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "FERRY_ID") {
		t.Fatalf("missing id: %v", err)
	}
}

func TestFerryd_GCPercentFlagAndEnv(t *testing.T) {
	o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard)
	if err != nil || o.gcPercent != defaultGCPercent {
		t.Fatalf("default gc percent %d, %v", o.gcPercent, err)
	}
	t.Setenv("FERRY_GC_PERCENT", "80")
	if o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard); err != nil || o.gcPercent != 80 {
		t.Fatalf("FERRY_GC_PERCENT=80 gave %d, %v", o.gcPercent, err)
	}
	t.Setenv("FERRY_GC_PERCENT", "lots")
	if _, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard); err == nil {
		t.Fatal("a malformed FERRY_GC_PERCENT was accepted")
	}
}

func TestFerryd_LimitFlagsReachTheNodeConfig(t *testing.T) {
	o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.config(nil)
	if cfg.MaxConns != node.DefaultMaxConns || cfg.MaxConnsPerIP != node.DefaultMaxConnsPerIP ||
		cfg.IdleTimeout != node.DefaultIdleTimeout || cfg.FrameTimeout != node.DefaultFrameTimeout || cfg.Pprof ||
		cfg.MaxHTTPConns != node.DefaultMaxHTTPConns || cfg.MaxHTTPConnsPerIP != node.DefaultMaxHTTPConnsPerIP {
		t.Fatalf("default limits %+v", cfg)
	}
	t.Setenv("FERRY_MAX_CONNS_PER_IP", "7")
	o, err = parseFlags([]string{"-id", "n1", "-insecure", "-max-conns", "50", "-idle-timeout", "1m", "-frame-timeout", "5s", "-pprof",
		"-max-http-conns", "20", "-max-http-conns-per-ip", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg = o.config(nil)
	if cfg.MaxConns != 50 || cfg.MaxConnsPerIP != 7 || cfg.IdleTimeout != time.Minute || cfg.FrameTimeout != 5*time.Second || !cfg.Pprof ||
		cfg.MaxHTTPConns != 20 || cfg.MaxHTTPConnsPerIP != 4 {
		t.Fatalf("flags not applied: %+v", cfg)
	}
	o, _ = parseFlags([]string{"-id", "n1", "-insecure", "-max-conns", "5", "-max-conns-per-ip", "6"}, io.Discard)
	if err := o.config(nil).Validate(); err == nil || !strings.Contains(err.Error(), "MaxConnsPerIP") {
		t.Fatalf("per-IP limit above the node limit: %v", err)
	}
}

func TestParseFlags_TLSRequiredUnlessInsecure(t *testing.T) {
	for _, args := range [][]string{
		{"-id", "n1"},
		{"-id", "n1", "-tls-cert", "c.pem", "-tls-key", "k.pem"},
		{"-id", "n1", "-insecure", "-tls-cert", "c.pem", "-tls-key", "k.pem", "-tls-ca", "ca.pem"},
	} {
		_, err := parseFlags(args, io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "tls") {
			t.Errorf("%v: %v, want a usage error about TLS", args, err)
		}
	}
	t.Setenv("FERRY_TLS_CERT", "c.pem")
	t.Setenv("FERRY_TLS_KEY", "k.pem")
	t.Setenv("FERRY_TLS_CA", "ca.pem")
	t.Setenv("FERRY_GOSSIP_KEY", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	t.Setenv("FERRY_TOKENS", "tokens.json")
	o, err := parseFlags([]string{"-id", "n1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.config(nil)
	if cfg.TLSCertFile != "c.pem" || cfg.TLSKeyFile != "k.pem" || cfg.TLSCAFile != "ca.pem" || cfg.Insecure {
		t.Fatalf("config %+v: TLS files from the environment not applied", cfg)
	}
}

func TestDevPKI_WritesCertificatesThatANodeLoads(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := runDevPKI([]string{"-dir", dir, "-nodes", "a,b", "-hosts", "10.0.0.1"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "created") != 8 {
		t.Fatalf("output %q, want 8 files created", out.String())
	}
	o, err := parseFlags([]string{"-id", "a", "-data-dir", t.TempDir(), "-tls-cert", dir + "/a.pem", "-tls-key", dir + "/a-key.pem",
		"-tls-ca", dir + "/ca.pem", "-tokens", "tokens.json", "-gossip-key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.config(nil).Validate(); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runDevPKI([]string{"-dir", dir, "-nodes", "a,b"}, &out, io.Discard); err != nil || out.Len() != 0 {
		t.Fatalf("second run: %v, output %q: want nothing created", err, out.String())
	}
}

func TestFerryd_GossipKeyRequiredUnlessInsecure(t *testing.T) {
	// With TLS given, a node still needs a gossip key.
	withTLS := func(args ...string) []string {
		return append([]string{"-id", "n1", "-tls-cert", "c.pem", "-tls-key", "k.pem", "-tls-ca", "ca.pem", "-tokens", "t.json"}, args...)
	}
	if _, err := parseFlags(withTLS(), io.Discard); err == nil || !strings.Contains(err.Error(), "gossip key") {
		t.Fatalf("no key, no -insecure: %v", err)
	}
	if o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard); err != nil || !o.config(nil).Insecure {
		t.Fatalf("-insecure: %v", err)
	}
	key := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes
	o, err := parseFlags(withTLS("-gossip-key", key), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := o.gossipKeys(); err != nil || len(keys) != 1 || len(keys[0]) != 32 {
		t.Fatalf("-gossip-key gave %d keys, %v", len(keys), err)
	}
	o, _ = parseFlags(withTLS("-gossip-key", "c2hvcnQ="), io.Discard)
	if _, err := o.gossipKeys(); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
	ring := filepath.Join(t.TempDir(), "gossip.keys")
	if err := os.WriteFile(ring, []byte("# new key first\n"+key+"\nMDEyMzQ1Njc4OWFiY2RlZg==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err = parseFlags(withTLS("-gossip-keyring", ring), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := o.gossipKeys(); err != nil || len(keys) != 2 || len(keys[1]) != 16 {
		t.Fatalf("-gossip-keyring gave %d keys, %v", len(keys), err)
	}
	if _, err := parseFlags(withTLS("-gossip-keyring", ring, "-gossip-key", key), io.Discard); err == nil {
		t.Fatal("-gossip-key and -gossip-keyring together were accepted")
	}
}

func TestFerryd_TokensRequiredUnlessInsecure(t *testing.T) {
	key := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	args := []string{"-id", "n1", "-tls-cert", "c.pem", "-tls-key", "k.pem", "-tls-ca", "ca.pem", "-gossip-key", key}
	_, err := parseFlags(args, io.Discard)
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-tokens") {
		t.Fatalf("no -tokens: %v, want a usage error naming -tokens", err)
	}
	if o, err := parseFlags(append(args, "-tokens", "t.json"), io.Discard); err != nil || o.tokens != "t.json" {
		t.Fatalf("-tokens: %+v, %v", o, err)
	}
}

func TestFerrydToken_MakesAnEntryTheNodeLoads(t *testing.T) {
	dir := t.TempDir()
	file, secretFile := filepath.Join(dir, "tokens.json"), filepath.Join(dir, "admin.token")
	var out, errOut bytes.Buffer
	if err := runToken([]string{"-name", "admin", "-cluster", "admin", "-file", file, "-secret-file", secretFile}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Fatalf("printed %q with -secret-file", out.String())
	}
	if err := runToken([]string{"-name", "orders", "-allow", "orders.*,billing:send,receive", "-file", file}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	printed := strings.TrimSpace(out.String())
	set, err := auth.LoadFile(file)
	if err != nil || set.Len() != 2 {
		t.Fatalf("tokens file: %v, %v", set, err)
	}
	data, _ := os.ReadFile(secretFile)
	if tok, ok := set.Lookup(strings.TrimSpace(string(data))); !ok || !tok.ClusterAdmin {
		t.Fatalf("admin secret does not resolve to a cluster admin: %+v", tok)
	}
	if tok, ok := set.Lookup(printed); !ok || !tok.Can(auth.Send, "orders.eu") || tok.Can(auth.Admin, "orders.eu") {
		t.Fatalf("printed secret %q: %+v, %v", printed, tok, ok)
	}
	if raw, _ := os.ReadFile(file); strings.Contains(string(raw), printed) {
		t.Fatal("the tokens file holds a secret")
	}
	for _, bad := range [][]string{
		{"-name", "x"}, // no permission
		{"-name", "y", "-allow", "orders:delete"},              // unknown action
		{"-name", "admin", "-cluster", "admin", "-file", file}, // duplicate name
	} {
		if err := runToken(bad, &out, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestFerryd_ProposalGatherWaitFlag(t *testing.T) {
	o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard)
	if err != nil || o.config(nil).ProposalGatherWait != partition.DefaultGatherWait {
		t.Fatalf("default %v (%v), want %v", o.config(nil).ProposalGatherWait, err, partition.DefaultGatherWait)
	}
	o, err = parseFlags([]string{"-id", "n1", "-insecure", "-proposal-gather-wait=0"}, io.Discard)
	if err != nil || o.config(nil).ProposalGatherWait >= 0 {
		t.Fatalf("-proposal-gather-wait=0 gives %v (%v), want node.Config's off (negative)", o.config(nil).ProposalGatherWait, err)
	}
	o, err = parseFlags([]string{"-id", "n1", "-insecure", "-proposal-gather-wait=1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.config(nil).Validate(); err == nil || !strings.Contains(err.Error(), "ProposalGatherWait") {
		t.Fatalf("1s accepted: %v", err)
	}
}

func TestFerryd_ProposalOverlapItemsFlag(t *testing.T) {
	o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard)
	if err != nil || o.config(nil).ProposalOverlapItemsMin != partition.DefaultOverlapItemsMin {
		t.Fatalf("default %d (%v), want %d", o.config(nil).ProposalOverlapItemsMin, err, partition.DefaultOverlapItemsMin)
	}
	o, err = parseFlags([]string{"-id", "n1", "-insecure", "-proposal-overlap-items=0"}, io.Discard)
	if err != nil || o.config(nil).ProposalOverlapItemsMin >= 0 {
		t.Fatalf("-proposal-overlap-items=0 gives %d (%v), want node.Config's off (negative)", o.config(nil).ProposalOverlapItemsMin, err)
	}
	o, err = parseFlags([]string{"-id", "n1", "-insecure", "-proposal-overlap-items=5000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.config(nil).Validate(); err == nil || !strings.Contains(err.Error(), "ProposalOverlapItemsMin") {
		t.Fatalf("5000 accepted: %v", err)
	}
}

func TestFerryd_RaftLogPrewriteFlag(t *testing.T) {
	o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard)
	if err != nil || o.config(nil).NoRaftLogPrewrite {
		t.Fatalf("pre-written raft log segments should be on by default (%v)", err)
	}
	o, err = parseFlags([]string{"-id", "n1", "-insecure", "-raft-log-prewrite=false"}, io.Discard)
	if err != nil || !o.config(nil).NoRaftLogPrewrite {
		t.Fatalf("-raft-log-prewrite=false did not turn them off (%v)", err)
	}
	t.Setenv("FERRY_RAFT_LOG_PREWRITE", "false")
	o, err = parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard)
	if err != nil || !o.config(nil).NoRaftLogPrewrite {
		t.Fatalf("FERRY_RAFT_LOG_PREWRITE=false did not turn them off (%v)", err)
	}
}

// -dead-node-timeout 0 means never, as its help says (node.Config's
// negative), and -no-balance turns balancing off; by default both are on.
func TestFerryd_PlacementFlags(t *testing.T) {
	o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p := o.config(nil).Placement; p.DeadNodeTimeout != node.DefaultDeadNodeTimeout || p.NoBalance {
		t.Fatalf("defaults: %+v, want replacement after %v and balancing", p, node.DefaultDeadNodeTimeout)
	}
	o, err = parseFlags([]string{"-id", "n1", "-insecure", "-dead-node-timeout=0", "-no-balance"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.config(nil)
	if p := cfg.Placement; p.DeadNodeTimeout >= 0 || !p.NoBalance {
		t.Fatalf("-dead-node-timeout=0 -no-balance: %+v, want replacement and balancing off", p)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// With no flag given, ferryd runs a node exactly as node.DefaultConfig
// describes it: the flags' defaults are the node's.
func TestFerryd_FlagDefaultsAreTheNodes(t *testing.T) {
	o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := o.config(nil).WithDefaults()
	want := node.DefaultConfig("n1", "data/n1", "127.0.0.1", 0)
	want.Insecure = true
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ferryd without flags runs\n%+v\nnode.DefaultConfig is\n%+v", got, want)
	}
}
