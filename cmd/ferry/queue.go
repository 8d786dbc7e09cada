package main

import (
	"fmt"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func queueCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "Create, change, list, inspect and delete queues"}
	cmd.AddCommand(queueCreateCmd(g, false), queueCreateCmd(g, true), queueListCmd(g), queueStatsCmd(g), queueRemoveCmd(g))
	return cmd
}

// configFlags binds the queue settings; only flags the user set are sent,
// so that a create takes the cluster's defaults and an update changes
// nothing else.
type configFlags struct {
	partitions, replicas, maxReceives, maxMessageBytes    int
	visibility, backoffBase, backoffMax, dedup, retention time.Duration
	maxDepth, maxBytes                                    int64
}

func (f *configFlags) bind(fs *pflag.FlagSet, update bool) {
	if !update {
		fs.IntVar(&f.partitions, "partitions", 1, "partitions, 1..64 (fixed at creation)")
		fs.IntVar(&f.replicas, "replicas", 3, "replicas of each partition (default min(3, nodes))")
	}
	fs.DurationVar(&f.visibility, "visibility", 30*time.Second, "default lease of a receive")
	fs.IntVar(&f.maxReceives, "max-receives", 10, "deliveries before dead-lettering (0 = unlimited)")
	fs.DurationVar(&f.backoffBase, "backoff-base", time.Second, "first retry delay")
	fs.DurationVar(&f.backoffMax, "backoff-max", 5*time.Minute, "largest retry delay")
	fs.DurationVar(&f.dedup, "dedup-window", 5*time.Minute, "how long message ids are remembered (0 = off)")
	fs.IntVar(&f.maxMessageBytes, "max-message-bytes", 1<<20, "largest body plus headers")
	fs.Int64Var(&f.maxDepth, "max-depth", 0, "most messages held (0 = unlimited)")
	fs.Int64Var(&f.maxBytes, "max-bytes", 0, "most bytes held (0 = unlimited)")
	fs.DurationVar(&f.retention, "retention", 0, "delete unreceived messages older than this (0 = keep)")
}

// config returns the settings of the flags that were given. An explicit
// zero is sent as client.Disabled/Unlimited, which the client maps to 0.
func (f *configFlags) config(fs *pflag.FlagSet) client.QueueConfig {
	var c client.QueueConfig
	set := func(name string, assign func()) {
		if fs.Changed(name) {
			assign()
		}
	}
	zero := func(v int64) int64 {
		if v == 0 {
			return -1
		}
		return v
	}
	set("partitions", func() { c.Partitions = f.partitions })
	set("replicas", func() { c.Replicas = f.replicas })
	set("visibility", func() { c.VisibilityTimeout = time.Duration(zero(int64(f.visibility))) })
	set("max-receives", func() { c.MaxReceives = int(zero(int64(f.maxReceives))) })
	set("backoff-base", func() { c.BackoffBase = time.Duration(zero(int64(f.backoffBase))) })
	set("backoff-max", func() { c.BackoffMax = time.Duration(zero(int64(f.backoffMax))) })
	set("dedup-window", func() { c.DedupWindow = time.Duration(zero(int64(f.dedup))) })
	set("max-message-bytes", func() { c.MaxMessageBytes = f.maxMessageBytes })
	set("max-depth", func() { c.MaxDepth = zero(f.maxDepth) })
	set("max-bytes", func() { c.MaxBytes = zero(f.maxBytes) })
	set("retention", func() { c.Retention = time.Duration(zero(int64(f.retention))) })
	return c
}

func queueCreateCmd(g *globals, update bool) *cobra.Command {
	var f configFlags
	use, short := "create NAME", "Create a queue"
	if update {
		use, short = "update NAME", "Change a queue's settings (only the flags given)"
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			cfg := f.config(cmd.Flags())
			if update {
				err = explain(ctx, c, args[0], c.UpdateQueue(ctx, args[0], cfg))
			} else {
				err = c.CreateQueue(ctx, args[0], cfg)
			}
			if err != nil {
				return err
			}
			if !g.json {
				fmt.Printf("queue %s %s\n", args[0], map[bool]string{false: "created", true: "updated"}[update])
				return nil
			}
			qs, err := c.ListQueues(ctx, args[0])
			if err != nil {
				return err
			}
			return printJSON(qs)
		},
	}
	f.bind(cmd.Flags(), update)
	return cmd
}

func queueListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "ls [PREFIX]", Short: "List queues", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			qs, err := c.ListQueues(ctx, prefix)
			if err != nil || g.json {
				return firstErr(err, func() error { return printJSON(qs) })
			}
			var rows [][]string
			for _, q := range qs {
				cfg := q.Config
				rows = append(rows, []string{q.Name, fmt.Sprint(len(q.Partitions)), fmt.Sprint(cfg.Replicas),
					cfg.VisibilityTimeout.String(), fmt.Sprint(cfg.MaxReceives), cfg.DedupWindow.String()})
			}
			table([]string{"QUEUE", "PARTITIONS", "REPLICAS", "VISIBILITY", "MAX-RECEIVES", "DEDUP"}, rows)
			return nil
		},
	}
}

func queueStatsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "stats NAME", Short: "Show a queue's message counts per partition", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			st, err := c.QueueStats(ctx, args[0])
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				return firstErr(printJSON(st), func() error { return statsFailures(st) })
			}
			var rows [][]string
			row := func(name string, p client.PartitionStats) []string {
				return []string{name, fmt.Sprint(p.Ready), fmt.Sprint(p.Delayed), fmt.Sprint(p.InFlight), fmt.Sprint(p.Dead),
					fmt.Sprint(p.Counters.Sent), fmt.Sprint(p.Counters.Acked), fmt.Sprint(p.Counters.DeadLettered),
					time.Duration(p.OldestEligibleAge).Round(time.Millisecond).String()}
			}
			for _, p := range st.Partitions {
				if err := p.Err(); err != nil {
					rows = append(rows, []string{fmt.Sprint(p.Partition), "error: " + err.Error()})
					continue
				}
				rows = append(rows, row(fmt.Sprint(p.Partition), p))
			}
			total := "total"
			if statsFailures(st) != nil {
				total = "total (partial)"
			}
			rows = append(rows, row(total, st.Total()))
			table([]string{"PARTITION", "READY", "DELAYED", "IN-FLIGHT", "DEAD", "SENT", "ACKED", "DEAD-LETTERED", "OLDEST"}, rows)
			return statsFailures(st)
		},
	}
}

// statsFailures says how many partitions' figures are missing, with the
// first reason; nil when every partition answered.
func statsFailures(st client.Stats) error {
	var first error
	n := 0
	for _, p := range st.Partitions {
		if err := p.Err(); err != nil {
			if first == nil {
				first = fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("figures of %d of %d partitions missing; %w", n, len(st.Partitions), first)
}

func queueRemoveCmd(g *globals) *cobra.Command {
	var confirm confirmer
	cmd := &cobra.Command{
		Use: "rm NAME", Short: "Delete a queue and all its messages (asks first; --yes skips that)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := confirm.confirm(fmt.Sprintf("delete queue %s with all its messages and dead letters", args[0])); err != nil {
				return err
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			if err := c.DeleteQueue(ctx, args[0]); err != nil {
				return explain(ctx, c, args[0], err)
			}
			fmt.Printf("queue %s deleted\n", args[0])
			return nil
		},
	}
	confirm.bind(cmd.Flags())
	return cmd
}

func purgeCmd(g *globals) *cobra.Command {
	var confirm confirmer
	cmd := &cobra.Command{
		Use: "purge QUEUE", Short: "Delete every ready and delayed message (leased ones stay; asks first)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := confirm.confirm(fmt.Sprintf("delete every ready and delayed message of queue %s", args[0])); err != nil {
				return err
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			n, err := c.Purge(ctx, args[0])
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				return printJSON(map[string]int{"purged": n})
			}
			fmt.Printf("purged %d messages\n", n)
			return nil
		},
	}
	confirm.bind(cmd.Flags())
	return cmd
}

// firstErr returns err, or runs next when err is nil.
func firstErr(err error, next func() error) error {
	if err != nil {
		return err
	}
	return next()
}
