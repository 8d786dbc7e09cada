// Command ferryd runs one Ferry node.
//
// Every flag can also be set with an environment variable: -data-dir is
// FERRY_DATA_DIR, -bootstrap-expect is FERRY_BOOTSTRAP_EXPECT, and so on;
// and in the TOML file -config names, by the flag's name (data-dir =
// "..."; see config.go and docs/ferryd.example.toml). The command line
// wins over the environment, which wins over the file. -log-format json
// writes one JSON object per log line.
//
//	ferryd -id node1 -data-dir ./data/node1 -ip 127.0.0.1 -bootstrap-expect 3 \
//	       -join 127.0.0.1:7302,127.0.0.1:7303 -gossip-keyring ./data/pki/gossip.key
//
// Without -gossip-key or -gossip-keyring it refuses to start unless given
// -insecure. SIGHUP re-reads -gossip-keyring (key rotation) and -tokens.
//
// Clients authenticate with tokens listed in the -tokens file (see
// internal/auth for its format; `ferryd token` makes one). Without -tokens
// ferryd refuses to start unless given -insecure, which then lets every
// client do everything.
//
// Every port but gossip speaks TLS with the node certificate given by
// -tls-cert, -tls-key and -tls-ca (raft in mutual TLS: only nodes with a
// certificate of that CA can speak it); ferryd refuses to start without
// them unless -insecure asks for plaintext. `ferryd dev-pki` writes a
// throwaway CA and node certificates for a local cluster (see pki.go).
//
// The -raft-* flags tune raft's timings and partition snapshots for tests;
// left at 0 they keep the defaults. LeaderLeaseTimeout must stay at most
// HeartbeatTimeout, which must stay at most ElectionTimeout.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/memtrim"
	"github.com/ferrymq/ferry/internal/timerslack"
	"github.com/ferrymq/ferry/node"
	"github.com/ferrymq/ferry/partition"
)

func main() {
	os.Exit(exitCode(run(os.Args[1:]), os.Stderr))
}

// exitCode reports err on w and returns the process's exit status: 0 for
// success and for -h (help was asked for and printed), 2 for a usage
// error, 1 otherwise.
func exitCode(err error, w io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(w, "ferryd:", err)
		return 2
	}
	fmt.Fprintln(w, "ferryd:", err)
	return 1
}

// usageError is a bad flag or environment value.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// envName is the environment twin of a flag: -data-dir is FERRY_DATA_DIR.
func envName(flagName string) string {
	return "FERRY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// defaultGCPercent is ferryd's garbage collector target (-gc-percent),
// the runtime's own default. A broker's heap is mostly the long-lived index
// of queued messages, so a lower target saves memory on a deep backlog and
// costs CPU on every message: at 50 the heap stays within 1.5x of the
// live data (scripts/storage-check.sh, 1,000,000 x 1 KiB queued: 295-330 MB
// of RSS per node against 374-422 MB at 100), but a publishing leader spent
// 15-20% more CPU per message (scripts/cpu-per-message.sh, pipelined and 16
// synchronous senders; 200 measured the same as 100) and 1,000 idle queues
// 2.5% of a core against 1.8%. A node that must stay under a memory bound
// sets -memory-limit, which makes the collector work harder only near it.
// (An earlier setting of 200 aimed at the collector's cost while a node
// elects the groups of a dead one never took effect; at 100 a kill -9 of a
// leader among 9,999 idle queues left sends unconfirmed for 0.55-1.51 s,
// scripts/failover-check.sh.)
const defaultGCPercent = 100

// options are the command line settings.
type options struct {
	id, dataDir, ip                        string
	raftAddr, clientAddr, httpAddr, gossip string
	join, cluster, logLevel                string
	configFile, logFormat                  string
	memoryLimit                            string
	memoryTrimInterval                     time.Duration
	portOffset, bootstrapExpect, gcPercent int
	fastGossip, pprof                      bool
	maxClockOffset                         time.Duration
	timerSlack                             time.Duration
	tls                                    tlsOptions
	gossipKey, gossipKeyring               string
	tokens                                 string
	raft                                   raftOptions
	limits                                 limitOptions
	conns                                  connOptions
	placement                              placementOptions
	sqs                                    sqsOptions
}

// limitOptions bound queue creation; zero keeps the node's defaults.
type limitOptions struct {
	maxQueues, maxPartitions, createBurst int
	createRate                            float64
}

func (l *limitOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&l.maxQueues, "max-queues", 0, "most queues the cluster holds, as the meta leader enforces it (0 = default 10000)")
	fs.IntVar(&l.maxPartitions, "max-partitions", 0, "most partitions of all queues together (0 = default 10000)")
	fs.Float64Var(&l.createRate, "queue-create-rate", 0, "queue creates per second this node accepts (0 = default 200)")
	fs.IntVar(&l.createBurst, "queue-create-burst", 0, "burst of queue creates above the rate (0 = default 400)")
}

func (l limitOptions) apply(cfg *node.Config) {
	cfg.MaxQueues, cfg.MaxPartitions = l.maxQueues, l.maxPartitions
	cfg.QueueCreateRate, cfg.QueueCreateBurst = l.createRate, l.createBurst
}

// connOptions bound the client connections a node serves.
type connOptions struct {
	maxConns, maxConnsPerIP         int
	maxHTTPConns, maxHTTPConnsPerIP int
	idleTimeout, frameTimeout       time.Duration
}

func (l *connOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&l.maxConns, "max-conns", node.DefaultMaxConns, "most client connections served at once; more are refused")
	fs.IntVar(&l.maxConnsPerIP, "max-conns-per-ip", node.DefaultMaxConnsPerIP, "most client connections from one IP address")
	fs.IntVar(&l.maxHTTPConns, "max-http-conns", node.DefaultMaxHTTPConns, "most HTTP admin connections open at once; more are closed at once")
	fs.IntVar(&l.maxHTTPConnsPerIP, "max-http-conns-per-ip", node.DefaultMaxHTTPConnsPerIP, "most HTTP admin connections from one IP address")
	fs.DurationVar(&l.idleTimeout, "idle-timeout", node.DefaultIdleTimeout,
		"close a client connection with no request in flight after this long without one")
	fs.DurationVar(&l.frameTimeout, "frame-timeout", node.DefaultFrameTimeout,
		"close a client connection that takes longer than this to send one request frame or to read one answer")
}

func (l connOptions) apply(cfg *node.Config) {
	cfg.MaxConns, cfg.MaxConnsPerIP, cfg.IdleTimeout, cfg.FrameTimeout = l.maxConns, l.maxConnsPerIP, l.idleTimeout, l.frameTimeout
	cfg.MaxHTTPConns, cfg.MaxHTTPConnsPerIP = l.maxHTTPConns, l.maxHTTPConnsPerIP
}

// tlsOptions name the node's TLS material, or ask for plaintext.
type tlsOptions struct {
	cert, key, ca string
	insecure      bool
}

func (l *tlsOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&l.cert, "tls-cert", "", "PEM certificate of this node, valid for server and client authentication")
	fs.StringVar(&l.key, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&l.ca, "tls-ca", "", "PEM bundle of the cluster CA: raft peers must hold a node certificate it signed")
	fs.BoolVar(&l.insecure, "insecure", false,
		"run every port in plaintext, without -tls-*, and gossip without a key (loopback experiments only)")
}

// check reports a missing, partial or contradictory TLS setting.
func (l tlsOptions) check() error {
	set := l.cert != "" || l.key != "" || l.ca != ""
	switch {
	case l.insecure && set:
		return fmt.Errorf("-insecure and -tls-* exclude each other")
	case set && (l.cert == "" || l.key == "" || l.ca == ""):
		return fmt.Errorf("-tls-cert, -tls-key and -tls-ca go together")
	case !set && !l.insecure:
		return fmt.Errorf("TLS is required: give -tls-cert, -tls-key and -tls-ca (or %s, %s, %s), "+
			"or -insecure to run in plaintext (`ferryd dev-pki` makes certificates for a local cluster)",
			envName("tls-cert"), envName("tls-key"), envName("tls-ca"))
	}
	return nil
}

func (l tlsOptions) apply(cfg *node.Config) {
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile, cfg.Insecure = l.cert, l.key, l.ca, l.insecure
}

// raftOptions tune raft for tests (chaos runs use small snapshot
// thresholds so that restarted and wiped replicas are rebuilt from
// snapshots). Zero keeps the node's defaults, except for the two proposal
// flags, whose 0 turns their feature off (see apply).
type raftOptions struct {
	heartbeat, election, leaderLease, snapshotInterval, gatherWait, quiesceAfter time.Duration
	snapshotThreshold, trailingLogs                                              uint64
	overlapItems                                                                 int
	logPrewrite                                                                  bool
}

func (r *raftOptions) register(fs *flag.FlagSet) {
	fs.DurationVar(&r.heartbeat, "raft-heartbeat-timeout", 0, "raft heartbeat timeout (0 = default 500ms)")
	fs.DurationVar(&r.election, "raft-election-timeout", 0, "raft election timeout (0 = default 500ms)")
	fs.DurationVar(&r.leaderLease, "raft-leader-lease-timeout", 0, "raft leader lease timeout (0 = default 500ms, at most the heartbeat timeout)")
	fs.Uint64Var(&r.snapshotThreshold, "raft-snapshot-threshold", 0, "partition log entries that trigger a snapshot (0 = default 8192)")
	fs.Uint64Var(&r.trailingLogs, "raft-trailing-logs", 0, "partition log entries kept after a snapshot (0 = default 10240)")
	fs.DurationVar(&r.snapshotInterval, "raft-snapshot-interval", 0, "how often partitions check whether to snapshot (0 = default 2m)")
	fs.DurationVar(&r.quiesceAfter, "raft-quiesce-after", 0, "how long an idle partition keeps heartbeating before it quiesces (0 = default 2s, negative = never)")
	fs.DurationVar(&r.gatherWait, "proposal-gather-wait", partition.DefaultGatherWait,
		"longest wait of a merged send or ack proposal for the next of the clients its previous proposal answered, four times that in all (0 or negative = off, at most 10ms)")
	fs.IntVar(&r.overlapItems, "proposal-overlap-items", partition.DefaultOverlapItemsMin,
		"sends (or acks) waiting behind a merged proposal in flight that start a second one before the first is answered (0 or negative = one at a time, at most 1000)")
	fs.BoolVar(&r.logPrewrite, "raft-log-prewrite", true,
		"append the raft log into segment files written with zeros ahead of time, for a faster fdatasync (not for segments written faster than 32 MiB/s)")
}

// apply sets the raft fields of cfg. -proposal-gather-wait and
// -proposal-overlap-items default to the node's values and take 0 for
// "off", as their help says; node.Config spells "off" with a negative
// value (its zero is the default), so apply passes 0 on as -1.
func (r raftOptions) apply(cfg *node.Config) {
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = r.heartbeat, r.election, r.leaderLease
	cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = r.snapshotThreshold, r.trailingLogs, r.snapshotInterval
	cfg.QuiesceAfter = r.quiesceAfter
	cfg.NoRaftLogPrewrite = !r.logPrewrite
	cfg.ProposalGatherWait = offWhenZero(r.gatherWait)
	cfg.ProposalOverlapItemsMin = offWhenZero(r.overlapItems)
}

// offWhenZero maps the value of a flag whose 0 means "off" to node.Config's
// "off" (a negative value); any other value is passed on as it is.
func offWhenZero[T time.Duration | int](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// parseFlags reads the environment twins of the flags, then args (which
// win). A malformed value in either is an error naming it; -h prints the
// help, every flag with its environment variable, on out and returns
// flag.ErrHelp.
func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("ferryd", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.id, "id", "", "node id, stable across restarts (required)")
	fs.StringVar(&o.dataDir, "data-dir", "", "data directory (default ./data/<id>)")
	fs.StringVar(&o.ip, "ip", "127.0.0.1", "the node's own IP: listened on and advertised")
	fs.IntVar(&o.portOffset, "port-offset", 0, "added to the default ports 7001 raft, 7101 client, 7201 http, 7301 gossip")
	fs.StringVar(&o.raftAddr, "raft-addr", "", "raft address ip:port (overrides -ip/-port-offset)")
	fs.StringVar(&o.clientAddr, "client-addr", "", "client protocol address ip:port")
	fs.StringVar(&o.httpAddr, "http-addr", "", "HTTP admin address ip:port")
	fs.StringVar(&o.gossip, "gossip-addr", "", "gossip address ip:port")
	fs.StringVar(&o.join, "join", "", "comma-separated gossip addresses of members to join")
	fs.IntVar(&o.bootstrapExpect, "bootstrap-expect", 0, "form a new cluster once this many nodes see each other")
	fs.StringVar(&o.cluster, "cluster", "ferry", "cluster name (separates clusters on one network)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log line format: text (key=value) or json")
	fs.StringVar(&o.configFile, "config", "", "TOML file setting any flag by name (see docs/ferryd.example.toml); flags and environment win over it")
	fs.BoolVar(&o.fastGossip, "fast-gossip", false, "fast failure detection for loopback or LAN test clusters")
	fs.DurationVar(&o.maxClockOffset, "max-clock-offset", 0,
		"how far this node's clock may be from the majority's before it gives up leadership and refuses commands (0 = default 500ms)")
	fs.IntVar(&o.gcPercent, "gc-percent", defaultGCPercent,
		"garbage collector target: heap growth over live data before a collection, in percent (GOGC, if set, wins)")
	fs.StringVar(&o.memoryLimit, "memory-limit", "",
		"soft limit on the Go heap and runtime, e.g. 256MiB or 2GiB: the collector works harder near it (GOMEMLIMIT, if set, wins; empty or 0: none)")
	fs.DurationVar(&o.memoryTrimInterval, "memory-trim-interval", memtrim.DefaultConfig().Interval,
		"how often to check for memory held beyond the live heap (over 32 MiB after a burst) and give it back to the system (0: never)")
	fs.DurationVar(&o.timerSlack, "timer-slack", defaultTimerSlack,
		"how late the kernel may wake this process's threads from a timed sleep (Linux; fewer wake-ups of the Go runtime's monitor, less CPU per message): ferryd re-executes itself once to apply it unless started with it; 0 leaves it as started")
	fs.BoolVar(&o.pprof, "pprof", false, "serve the Go profiler under /debug/pprof/ and raft state under /v1/debug/raft on the HTTP port")
	o.tls.register(fs)
	fs.StringVar(&o.gossipKey, "gossip-key", "", "gossip encryption key: base64 of 16, 24 or 32 random bytes, the same on every node")
	fs.StringVar(&o.gossipKeyring, "gossip-keyring", "",
		"file of gossip keys, one base64 key per line, the first used to send; re-read on SIGHUP (for key rotation)")
	fs.StringVar(&o.tokens, "tokens", "",
		"tokens file: the clients' tokens (hashed) and their permissions; re-read on SIGHUP (`ferryd token` adds one)")
	o.raft.register(fs)
	o.limits.register(fs)
	o.conns.register(fs)
	o.placement.register(fs)
	o.sqs.register(fs)
	if onFlagSet != nil {
		onFlagSet(fs)
	}
	var envErrs []error
	given := map[string]bool{} // set by the environment or on the command line: the file does not apply
	fs.VisitAll(func(f *flag.Flag) {
		env := envName(f.Name)
		f.Usage += " [" + env + "]"
		if v, ok := os.LookupEnv(env); ok {
			given[f.Name] = true
			if err := f.Value.Set(v); err != nil {
				envErrs = append(envErrs, fmt.Errorf("%s=%q: not a valid value for -%s: %w", env, v, f.Name, err))
			}
		}
	})
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: ferryd -id ID [flags]\n\nRuns one Ferry node. Every flag can also be set by the environment variable\n"+
			"shown in brackets beside it, or by its name as a key of the -config file;\n"+
			"a flag given on the command line wins over the environment, which wins over the file.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, &usageError{err}
	}
	if len(envErrs) > 0 {
		return o, &usageError{errors.Join(envErrs...)}
	}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if o.configFile != "" {
		if err := applyConfigFile(fs, o.configFile, given); err != nil {
			return o, &usageError{err}
		}
	}
	if fs.NArg() > 0 {
		return o, &usageError{fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))}
	}
	if o.id == "" {
		return o, &usageError{fmt.Errorf("-id (or %s) is required", envName("id"))}
	}
	if err := o.tls.check(); err != nil {
		return o, &usageError{err}
	}
	if o.dataDir == "" {
		o.dataDir = "data/" + o.id
	}
	if o.gossipKey != "" && o.gossipKeyring != "" {
		return o, &usageError{errors.New("-gossip-key and -gossip-keyring exclude each other")}
	}
	if o.tokens == "" && !o.tls.insecure {
		return o, &usageError{fmt.Errorf("no tokens file: give -tokens (or %s; `ferryd token` makes one), "+
			"or -insecure to let every client do everything", envName("tokens"))}
	}
	if o.gossipKey == "" && o.gossipKeyring == "" && !o.tls.insecure {
		return o, &usageError{errors.New("no gossip key: give -gossip-key or -gossip-keyring (or -insecure to run without encryption)")}
	}
	if err := o.sqs.check(); err != nil {
		return o, &usageError{err}
	}
	return o, nil
}

// gossipKeys reads the keys -gossip-key or -gossip-keyring name; none
// without either.
func (o options) gossipKeys() ([][]byte, error) {
	switch {
	case o.gossipKey != "":
		key, err := node.ParseGossipKey(o.gossipKey)
		if err != nil {
			return nil, &usageError{fmt.Errorf("-gossip-key: %w", err)}
		}
		return [][]byte{key}, nil
	case o.gossipKeyring != "":
		text, err := os.ReadFile(o.gossipKeyring)
		if err != nil {
			return nil, fmt.Errorf("-gossip-keyring: %w", err)
		}
		keys, err := node.ParseGossipKeyring(string(text))
		if err != nil {
			return nil, fmt.Errorf("-gossip-keyring %s: %w", o.gossipKeyring, err)
		}
		return keys, nil
	}
	return nil, nil
}

func (o options) config(logger *slog.Logger) node.Config {
	cfg := node.DefaultConfig(o.id, o.dataDir, o.ip, o.portOffset)
	for _, set := range []struct {
		dst *string
		v   string
	}{
		{&cfg.RaftAddr, o.raftAddr}, {&cfg.ClientAddr, o.clientAddr}, {&cfg.HTTPAddr, o.httpAddr}, {&cfg.GossipAddr, o.gossip},
	} {
		if set.v != "" {
			*set.dst = set.v
		}
	}
	if o.join != "" {
		cfg.Join = strings.Split(o.join, ",")
	}
	cfg.BootstrapExpect = o.bootstrapExpect
	cfg.ClusterName = o.cluster
	cfg.GossipFast = o.fastGossip
	cfg.MaxClockOffset = o.maxClockOffset
	o.tls.apply(&cfg)
	o.raft.apply(&cfg)
	o.limits.apply(&cfg)
	o.conns.apply(&cfg)
	o.placement.apply(&cfg)
	cfg.Pprof = o.pprof
	cfg.Logger = logger
	return cfg
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "dev-pki" {
		return runDevPKI(args[1:], os.Stdout, os.Stderr)
	}
	if len(args) > 0 && args[0] == "token" {
		return runToken(args[1:], os.Stdout, os.Stderr)
	}
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	// First, before anything is opened or started: it may re-execute.
	slackErr := applyTimerSlack(o.timerSlack)
	var ue *usageError
	if errors.As(slackErr, &ue) {
		return slackErr
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		if o.gcPercent < 10 {
			return &usageError{fmt.Errorf("-gc-percent %d: want 10 or more", o.gcPercent)}
		}
		debug.SetGCPercent(o.gcPercent)
	}
	if err := applyMemoryLimit(o.memoryLimit); err != nil {
		return err
	}
	keys, err := o.gossipKeys()
	if err != nil {
		return err
	}
	handler, err := newLogHandler(o.logFormat, os.Stderr, level)
	if err != nil {
		return err
	}
	logger := slog.New(handler)
	if slackErr != nil {
		logger.Warn("timer slack left as started", "timer_slack", o.timerSlack, "err", slackErr)
	} else if o.timerSlack > 0 {
		logger.Info("timer slack set", "timer_slack", o.timerSlack, "reexecuted", timerslack.Reexecuted())
	}
	cfg := o.config(logger)
	cfg.GossipKeys = keys
	if o.tokens != "" {
		if cfg.Tokens, err = auth.LoadFile(o.tokens); err != nil {
			return fmt.Errorf("-tokens: %w", err)
		}
	} else {
		logger.Warn("running without tokens (-insecure): every client may do everything")
	}
	if len(keys) == 0 {
		logger.Warn("running without a gossip key (-insecure): gossip is plaintext and any process that reaches the gossip port can join")
	}
	n, err := node.Start(cfg)
	if err != nil {
		return err
	}
	sqsAPI, err := startSQS(o, n, logger)
	if err != nil {
		return errors.Join(err, n.Close())
	}
	stopTrim, err := startMemoryTrim(o.memoryTrimInterval, logger)
	if err != nil {
		sqsAPI.close()
		return errors.Join(err, n.Close())
	}
	defer stopTrim()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	for {
		s := <-sig
		if s == syscall.SIGHUP {
			reloadKeyring(o, n, logger)
			reloadTokens(o, n, logger)
			continue
		}
		logger.Info("shutting down", "signal", s.String())
		sqsAPI.close()
		return n.Close()
	}
}

// reloadTokens re-reads -tokens on SIGHUP and installs it; a file that
// does not parse leaves the current tokens in place.
func reloadTokens(o options, n *node.Node, logger *slog.Logger) {
	if o.tokens == "" {
		return
	}
	set, err := auth.LoadFile(o.tokens)
	if err == nil {
		err = n.SetTokens(set)
	}
	if err != nil {
		logger.Error("tokens not reloaded; the previous tokens stay in force", "err", err)
	}
}

// reloadKeyring re-reads -gossip-keyring on SIGHUP and installs it.
func reloadKeyring(o options, n *node.Node, logger *slog.Logger) {
	if o.gossipKeyring == "" {
		if o.tokens == "" {
			logger.Warn("SIGHUP ignored: no -gossip-keyring or -tokens to re-read")
		}
		return
	}
	keys, err := o.gossipKeys()
	if err == nil {
		err = n.SetGossipKeys(keys)
	}
	if err != nil {
		logger.Error("gossip keyring not reloaded", "err", err)
	}
}
