package main

import (
	"fmt"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func queueCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "Create, change, list, inspect and delete queues"}
	cmd.AddCommand(queueCreateCmd(g, false), queueCreateCmd(g, true), queueListCmd(g), queueStatsCmd(g), queueRemoveCmd(g))
	return cmd
}

// configFlags binds the queue settings. Only the flags the user gave are
// sent: a create takes the cluster's defaults for the others and an
// update leaves them as they are. A flag given as 0 sends 0, which means
// "no limit" or "off" where the help says so.
type configFlags struct {
	partitions, replicas, maxReceives, maxMessageBytes     int
	visibility, backoffBase, backoffMax, dedup, retention  time.Duration
	maxDepth, maxBytes, maxDead, maxDeadBytes, dedupMaxIDs int64
	deadRetention                                          time.Duration
}

// bind declares the flags. A create shows the cluster's defaults; an
// update shows none, since a flag left out keeps the current value.
func (f *configFlags) bind(fs *pflag.FlagSet, update bool) {
	def := func(v int64) int64 {
		if update {
			return 0
		}
		return v
	}
	if !update {
		fs.IntVar(&f.partitions, "partitions", 1, "number of partitions, 1..64; fixed at creation")
		fs.IntVar(&f.replicas, "replicas", 0,
			"replicas of each partition, 1..5; fixed at creation (default 3, or the number of nodes when fewer)")
	}
	fs.DurationVar(&f.visibility, "visibility", time.Duration(def(int64(30*time.Second))),
		"lease a receive gets when it names none, up to 12h")
	fs.IntVar(&f.maxReceives, "max-receives", int(def(10)),
		"deliveries before a message is dead-lettered, 0..1000; 0 = no limit")
	fs.DurationVar(&f.backoffBase, "backoff-base", time.Duration(def(int64(time.Second))),
		"least retry delay after the first failed attempt, doubling after each further one, plus a jitter of up to a quarter (never past --backoff-max); up to 12h")
	fs.DurationVar(&f.backoffMax, "backoff-max", time.Duration(def(int64(5*time.Minute))),
		"largest retry delay, from --backoff-base up to 12h")
	fs.DurationVar(&f.dedup, "dedup-window", time.Duration(def(int64(5*time.Minute))),
		"how long message ids are remembered to drop duplicate sends, up to 24h; 0 = off")
	fs.IntVar(&f.maxMessageBytes, "max-message-bytes", int(def(1<<20)),
		"largest body plus headers in bytes, 1..8388608")
	fs.Int64Var(&f.maxDepth, "max-depth", 0,
		"most messages per partition not yet acked or dead-lettered; 0 = no limit")
	fs.Int64Var(&f.maxBytes, "max-bytes", 0, "most stored bytes per partition of those messages; 0 = no limit")
	fs.DurationVar(&f.retention, "retention", 0,
		"delete unleased messages this long after they were sent, up to 8760h; 0 = keep until acked")
	fs.Int64Var(&f.maxDead, "max-dead", def(10_000),
		"most dead letters per partition, 0..10000000; past it the oldest are deleted (counted as dead_evicted); 0 = no limit")
	fs.Int64Var(&f.maxDeadBytes, "max-dead-bytes", def(1<<30),
		"most stored bytes of dead letters per partition; past it the oldest are deleted (counted); 0 = no limit")
	fs.DurationVar(&f.deadRetention, "dead-retention", 0,
		"delete dead letters this long after they were dead-lettered, up to 8760h; 0 = keep")
	fs.Int64Var(&f.dedupMaxIDs, "dedup-max-ids", def(1_000_000),
		"most message ids per partition in the dedup window, 0..10000000; past it the oldest leave early (counted as dedup_evicted); 0 = no limit")
}

// settings returns the settings of the flags that were given.
func (f *configFlags) settings(fs *pflag.FlagSet) []client.QueueSetting {
	var out []client.QueueSetting
	add := func(name string, s func() client.QueueSetting) {
		if fs.Changed(name) {
			out = append(out, s())
		}
	}
	add("partitions", func() client.QueueSetting { return client.Partitions(f.partitions) })
	add("replicas", func() client.QueueSetting { return client.Replicas(f.replicas) })
	add("visibility", func() client.QueueSetting { return client.VisibilityTimeout(f.visibility) })
	add("max-receives", func() client.QueueSetting { return client.MaxReceives(f.maxReceives) })
	add("backoff-base", func() client.QueueSetting { return client.BackoffBase(f.backoffBase) })
	add("backoff-max", func() client.QueueSetting { return client.BackoffMax(f.backoffMax) })
	add("dedup-window", func() client.QueueSetting { return client.DedupWindow(f.dedup) })
	add("max-message-bytes", func() client.QueueSetting { return client.MaxMessageBytes(f.maxMessageBytes) })
	add("max-depth", func() client.QueueSetting { return client.MaxDepth(f.maxDepth) })
	add("max-bytes", func() client.QueueSetting { return client.MaxBytes(f.maxBytes) })
	add("retention", func() client.QueueSetting { return client.Retention(f.retention) })
	add("max-dead", func() client.QueueSetting { return client.MaxDead(f.maxDead) })
	add("max-dead-bytes", func() client.QueueSetting { return client.MaxDeadBytes(f.maxDeadBytes) })
	add("dead-retention", func() client.QueueSetting { return client.DeadRetention(f.deadRetention) })
	add("dedup-max-ids", func() client.QueueSetting { return client.DedupMaxIDs(f.dedupMaxIDs) })
	return out
}

func queueCreateCmd(g *globals, update bool) *cobra.Command {
	var f configFlags
	use, short := "create NAME", "Create a queue"
	long := "Create a queue. Settings not given take the defaults shown.\n" +
		"Durations are Go durations (500ms, 30s, 5m, 2h); 0 means \"no limit\" or \"off\" where stated."
	if update {
		use, short = "update NAME", "Change a queue's settings (only the flags given)"
		long = "Change the settings given; the others keep their current values. Partitions and\n" +
			"replicas are fixed at creation. Durations are Go durations (500ms, 30s, 5m, 2h);\n" +
			"0 means \"no limit\" or \"off\" where stated."
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			settings := f.settings(cmd.Flags())
			if update {
				err = explain(ctx, c, args[0], c.UpdateQueue(ctx, args[0], settings...))
			} else {
				err = c.CreateQueue(ctx, args[0], settings...)
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
			for _, q := range qs {
				if q.Name == args[0] {
					return printJSON(jsonview.QueueOf(q))
				}
			}
			return fmt.Errorf("queue %s %s but not listed afterwards", args[0], map[bool]string{false: "created", true: "updated"}[update])
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
				return firstErr(err, func() error { return printJSON(jsonview.QueuesOf(qs)) })
			}
			var rows [][]string
			for _, q := range qs {
				cfg := q.Config
				rows = append(rows, []string{q.Name, fmt.Sprint(len(q.Partitions)), fmt.Sprint(cfg.Replicas),
					cfg.VisibilityTimeout.String(), orNone(int64(cfg.MaxReceives), "unlimited"),
					orNone(cfg.DedupWindow, "off")})
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
				return firstErr(printJSON(jsonview.StatsOf(st)), func() error { return st.Err() })
			}
			var rows [][]string
			row := func(name string, p client.PartitionStats) []string {
				return []string{name, fmt.Sprint(p.Ready), fmt.Sprint(p.Delayed), fmt.Sprint(p.InFlight), fmt.Sprint(p.Dead),
					fmt.Sprint(p.Counters.Sent), fmt.Sprint(p.Counters.Acked), fmt.Sprint(p.Counters.DeadLettered),
					time.Duration(p.OldestEligibleAge).Round(time.Millisecond).String()}
			}
			for _, p := range st.Partitions {
				if err := p.Err(); err != nil {
					rows = append(rows, []string{fmt.Sprint(p.Partition), "error: " + errorText(err)})
					continue
				}
				rows = append(rows, row(fmt.Sprint(p.Partition), p))
			}
			total := "total"
			if st.Err() != nil {
				total = "total (partial)"
			}
			rows = append(rows, row(total, st.Total()))
			table([]string{"PARTITION", "READY", "DELAYED", "IN-FLIGHT", "DEAD", "SENT", "ACKED", "DEAD-LETTERED", "OLDEST"}, rows)
			return st.Err()
		},
	}
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

// orNone renders a setting for a table: v, or none when v is 0 (the value
// that means "no limit" or "off"). Durations print as durations.
func orNone[T int64 | time.Duration](v T, none string) string {
	if v == 0 {
		return none
	}
	return fmt.Sprint(v)
}

// firstErr returns err, or runs next when err is nil.
func firstErr(err error, next func() error) error {
	if err != nil {
		return err
	}
	return next()
}
