package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Options configure a run.
type Options struct {
	Seed  int64
	Nodes int
	// Next returns the next fault to inject, or false when the schedule
	// is over.
	Next func() (FaultSpec, bool)
	// FaultPhase, when positive, ends the fault phase after this long
	// (the fault in progress completes).
	FaultPhase time.Duration
	Producers  int
	Consumers  int
	Pace       time.Duration
	// Root holds the nodes' data directories, logs and the history.
	Root string
	// ServerArgs are extra ferryd flags.
	ServerArgs []string
	// TLS runs the cluster with TLS on every port but gossip (a throwaway
	// CA); otherwise the nodes run with -insecure.
	TLS bool
	// Tmpfs is the size of each node's tmpfs data directory (disk-full
	// faults); "" keeps them on the root's file system.
	Tmpfs string
	// SampleEvery, when positive, samples every node's RSS, goroutines and
	// open files this often into the report's Resources.
	SampleEvery time.Duration
	Logf        func(string, ...any)
}

// Timeouts of a run's phases.
const (
	warmup         = 3 * time.Second
	recoverTimeout = 60 * time.Second
	healTimeout    = 90 * time.Second
	drainTimeout   = 120 * time.Second
	convergeWait   = 60 * time.Second
)

// run is the state of one Run.
type run struct {
	o         Options
	fw        *Firewall
	links     *Shaper
	c         *Cluster
	admin     *client.Client
	w         *Workload
	placement map[PartRef][]string
	faults    []FaultRecord
	notes     []string
	resources []ResourceSample // guarded by mu
	// idleBefore and idleAfter sample every node with no workload: once
	// the queues exist, and once the workload's clients have closed.
	idleBefore, idleAfter []ResourceSample
	mu                    sync.Mutex // guards c and admin for cleanup on a signal, and resources
	cleanOnce             sync.Once
}

// DefaultServerArgs make partitions snapshot often, so that restarted and
// wiped replicas are rebuilt from snapshots rather than log replay, and
// replace a node lost for good after DeadNodeTimeout.
var DefaultServerArgs = []string{
	"-raft-snapshot-threshold", "256", "-raft-trailing-logs", "128", "-raft-snapshot-interval", "2s",
	"-dead-node-timeout", DeadNodeTimeout.String(), "-pprof",
}

// Run starts a cluster, runs the workload under the fault schedule, heals,
// drains, and checks the history. The report is returned even when the
// checks fail; an error means the run itself could not be carried out.
// Processes are stopped and the iptables chain removed before Run returns,
// and also when the process gets SIGINT or SIGTERM.
func Run(ctx context.Context, o Options) (*Report, error) {
	unlock, err := lockRuns(o.Logf)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r := &run{o: o}
	r.fw = NewFirewall()
	if !r.fw.Available() {
		r.note("PARTITION FAULTS WILL BE SKIPPED: %s (run as root with iptables installed to include them)", r.fw.Reason())
	}
	r.links = NewShaper()
	if !r.links.Available() {
		r.note("SLOW-LINK FAULTS WILL BE SKIPPED: %s (run as root with tc installed to include them)", r.links.Reason())
	}
	defer r.cleanup(true)
	untrap := r.trapSignals()
	defer untrap()
	started := now()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		if o.SampleEvery > 0 {
			r.sampleLoop(sampleCtx, o.SampleEvery)
		}
	}()
	var bounds boundsSampler
	boundsDone := make(chan struct{})
	go func() {
		defer close(boundsDone)
		bounds.run(sampleCtx, r.admin)
	}()
	r.faultPhase(ctx, started)
	r.heal(ctx)
	final := r.finish(ctx)
	stopSampling()
	<-sampled
	<-boundsDone
	final.ClockSkews = skewWindows(r.faults)
	hist := r.w.Rec.Snapshot()
	rep := Check(hist, final)
	rep.Seed, rep.Nodes, rep.Started, rep.Duration = o.Seed, o.Nodes, started, time.Since(started)
	rep.DataDir, rep.Faults, rep.Resources = o.Root, r.faults, r.resources
	rep.IdleBefore, rep.IdleAfter = r.idleBefore, r.idleAfter
	annotateGaps(rep.Gaps, r.faults)
	noteSendStalls(hist, rep.Faults)
	for _, f := range rep.Faults {
		for _, d := range f.MajorityDips {
			rep.addViolation(Violation{Kind: VUnderMajority, Detail: fmt.Sprintf("during %s %v: %s", f.Kind, f.Targets, d)})
		}
		for _, d := range f.PauseLeases {
			rep.addViolation(Violation{Kind: VLeasedWhilePaused, Detail: fmt.Sprintf("during %s %v: %s", f.Kind, f.Targets, d)})
		}
	}
	boundSamples, over := bounds.result()
	for _, d := range over {
		rep.addViolation(Violation{Kind: VOverMaxInFlight, Detail: d})
	}
	r.o.Logf("max_in_flight %d of %s sampled %d times, %d partitions seen over their share", boundedMaxInFlight,
		boundedQueue, boundSamples, len(over))
	rateWindows, overRate := bounds.rateResult()
	for _, d := range overRate {
		rep.addViolation(Violation{Kind: VOverMaxDeliveryRate, Detail: d})
	}
	r.o.Logf("max_delivery_rate %d/s of %s checked over %d windows of %v or more, %d over their share", boundedMaxDeliveryRate,
		rateQueue, rateWindows, rateWindowMin, len(overRate))
	for _, cr := range r.c.Crashes() {
		r.note("NODE CRASH: %s", cr)
	}
	rep.Notes = r.notes
	if err := writeHistory(filepath.Join(o.Root, "history.json"), hist, final); err != nil {
		r.note("history not written: %v", err)
	}
	return rep, nil
}

func (r *run) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.notes = append(r.notes, msg)
	r.o.Logf("!!! %s", msg)
}

// setup builds ferryd, starts the cluster, creates the queues and starts
// the workload.
func (r *run) setup(ctx context.Context) error {
	bin, err := BuildFerryd(r.o.Root)
	if err != nil {
		return err
	}
	c, err := NewCluster(ClusterOptions{Nodes: r.o.Nodes, Root: r.o.Root, Bin: bin,
		Args: append(append([]string(nil), DefaultServerArgs...), r.o.ServerArgs...), Logf: r.o.Logf, TLS: r.o.TLS, Tmpfs: r.o.Tmpfs,
		Spares: SpareSlots})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.c = c
	r.mu.Unlock()
	if err := r.c.StartAll(); err != nil {
		return err
	}
	r.o.Logf("cluster of %d nodes started: %v; logs in %s", r.o.Nodes, r.c.ClientAddrs(), filepath.Join(r.o.Root, "logs"))
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for !r.c.Ready(sctx) {
		if sctx.Err() != nil {
			return errors.New("cluster did not become ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
	admin, err := client.Dial(sctx, r.c.ClientAddrs(), client.WithClientName("chaos-admin"), client.WithDialTimeout(time.Second),
		client.WithTLS(r.c.ClientTLS), client.WithToken(r.c.AdminToken))
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.admin = admin
	r.mu.Unlock()
	if r.placement, err = CreateQueues(sctx, r.admin, r.o.Nodes); err != nil {
		return err
	}
	if err := r.c.WaitHealthy(sctx, r.placement); err != nil {
		return err
	}
	if r.o.SampleEvery > 0 {
		r.idleBefore = r.c.SampleResources(sctx)
	}
	r.w = &Workload{Seed: r.o.Seed, Addrs: r.c.ClientAddrs(), TLS: r.c.ClientTLS, Token: r.c.AdminToken, Producers: r.o.Producers, Consumers: r.o.Consumers,
		Pace: r.o.Pace, Rec: &Recorder{}, Logf: r.o.Logf}
	return r.w.Start(sctx)
}

// faultPhase injects the schedule's faults one after the other, waiting
// for the cluster to recover after each.
func (r *run) faultPhase(ctx context.Context, started time.Time) {
	var parts []PartRef
	for p := range r.placement {
		parts = append(parts, p)
	}
	sortParts(parts)
	inj := &Injector{c: r.c, fw: r.fw, links: r.links, parts: parts, logf: r.o.Logf}
	sleep(ctx, warmup)
	end := time.Now().Add(r.o.FaultPhase)
	for ctx.Err() == nil && (r.o.FaultPhase <= 0 || time.Now().Before(end)) {
		spec, ok := r.o.Next()
		if !ok {
			break
		}
		rec := inj.Inject(ctx, spec)
		if rec.Skipped == "" {
			rctx, cancel := context.WithTimeout(ctx, recoverTimeout)
			r.refreshPlacement(rctx)
			if err := r.c.WaitHealthy(rctx, r.placement); err != nil {
				rec.Problem = err.Error()
				r.diagnoseFault(ctx, len(r.faults), spec.Kind)
			} else {
				rec.Recovered = now()
			}
			cancel()
		}
		r.faults = append(r.faults, rec)
		r.o.Logf("%s", rec.Line(started))
	}
}

// refreshPlacement reads the partitions' placement again: moves (drains,
// balancing, rebuilt replicas) change it under the workload. A placement
// that cannot be read keeps the last one.
func (r *run) refreshPlacement(ctx context.Context) {
	for ctx.Err() == nil {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		p, err := Placement(qctx, r.admin)
		cancel()
		if err == nil && len(p) == len(r.placement) {
			r.placement = p
			return
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

func sortParts(ps []PartRef) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].String() < ps[j].String() })
}

// heal removes every fault and waits for the cluster to be whole.
func (r *run) heal(ctx context.Context) {
	if err := r.links.Heal(r.fw); err != nil {
		r.note("heal links: %v", err)
	}
	if err := r.fw.Heal(); err != nil {
		r.note("heal: %v", err)
	}
	r.c.ResumeAll()
	if err := r.c.StartAll(); err != nil {
		r.note("restart: %v", err)
	}
	hctx, cancel := context.WithTimeout(ctx, healTimeout)
	defer cancel()
	r.refreshPlacement(hctx)
	if err := r.c.WaitHealthy(hctx, r.placement); err != nil {
		r.note("after healing: %v", err)
	}
	r.o.Logf("healed; stopping producers and draining")
}

// finish stops the producers, drains the queues, lists the dead letters
// and compares the replicas.
func (r *run) finish(ctx context.Context) Final {
	r.w.StopProducers()
	dctx, cancel := context.WithTimeout(ctx, drainTimeout)
	drained, left := r.w.Drain(dctx, r.admin)
	cancel()
	r.w.StopConsumers()
	if r.o.SampleEvery > 0 {
		r.idleAfter = r.settleIdle(ctx)
	}
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	dead, listed := ListDeadLetters(lctx, r.admin)
	cancel()
	cctx, cancel := context.WithTimeout(ctx, convergeWait)
	r.refreshPlacement(cctx)
	conv := r.c.Converge(cctx, r.placement)
	cancel()
	if !drained || !allAgreed(conv) {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := r.c.Diagnose(dctx, "final"); err != nil {
			r.note("saving the nodes' raft state and goroutines: %v", err)
		}
		cancel()
		r.o.Logf("raft state and goroutines of every node saved beside its log (nX.final.*)")
	}
	r.o.Logf("drained=%v, %d dead letters, replicas compared", drained, len(dead))
	return Final{Drained: drained, Remaining: left, DeadLetters: dead, DeadListed: listed,
		MaxReceives: maxReceivesOf(), Convergence: conv}
}

// diagnoseFault saves the nodes' raft state and goroutines when the
// cluster did not recover from fault number i.
func (r *run) diagnoseFault(ctx context.Context, i int, kind FaultKind) {
	label := fmt.Sprintf("fault-%02d-%s", i+1, kind)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.c.Diagnose(dctx, label); err != nil {
		r.o.Logf("saving the nodes' raft state and goroutines: %v", err)
		return
	}
	r.o.Logf("raft state and goroutines of every node saved beside its log (nX.%s.*)", label)
}

// allAgreed reports whether every partition's replicas agreed.
func allAgreed(conv []Convergence) bool {
	for _, cv := range conv {
		if !cv.Agreed {
			return false
		}
	}
	return true
}

// cleanup stops the nodes and removes the iptables chain, once.
func (r *run) cleanup(clean bool) {
	r.cleanOnce.Do(func() {
		r.links.Close()
		r.fw.Close()
		r.mu.Lock()
		admin, c := r.admin, r.c
		r.mu.Unlock()
		if admin != nil {
			admin.Close()
		}
		if c != nil {
			c.Close(clean)
		}
	})
}

// trapSignals cleans up and exits on SIGINT or SIGTERM, keeping the data
// and logs; the returned function stops trapping.
func (r *run) trapSignals() func() {
	sig := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(os.Stderr, "\nferry chaos: %v: removing iptables chain %s, killing nodes; data and logs kept in %s\n", s, Chain, r.o.Root)
			r.cleanup(false)
			os.Exit(2)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}

// lockRuns makes runs on one machine take turns: they share the iptables
// chain (which a starting run resets) and the node addresses. The lock is
// a flock, so a killed run releases it.
func lockRuns(logf func(string, ...any)) (func(), error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "ferry-chaos.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		logf("another chaos run holds %s; waiting for it", f.Name())
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
