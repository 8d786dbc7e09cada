package main

import (
	"fmt"
	"time"

	"github.com/ferrymq/ferry/client"

	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/spf13/cobra"
)

func queueCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "Create, change, list, inspect and delete queues"}
	cmd.AddCommand(queueCreateCmd(g, false), queueCreateCmd(g, true), queueListCmd(g), queueStatsCmd(g), queueRemoveCmd(g),
		queueSettingsCmd(g), queuePauseCmd(g, true), queuePauseCmd(g, false), purgeCmd(g))
	return cmd
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
			settings, err := f.settings(cmd.Flags())
			if err != nil {
				return err
			}
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
			if t := st.Total(); t.Paused {
				fmt.Printf("\ndeliveries PAUSED on %d of %d partitions%s (ferry queue resume %s)\n",
					st.PausedCount(), len(st.Partitions), pausedBy(t.PausedBy, time.Unix(0, t.PausedAt)), args[0])
			}
			return st.Err()
		},
	}
}

// queuePauseCmd is "queue pause" (pause) or "queue resume".
func queuePauseCmd(g *globals, pause bool) *cobra.Command {
	use, short := "resume NAME", "Let a paused queue deliver again"
	if pause {
		use, short = "pause NAME", "Stop deliveries of a queue: sends are still accepted, leases out run their course"
	}
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		Long: short + `.

While a queue is paused, receives lease nothing (long polls wait, as on an
empty queue); acks, extends, nacks and rejects of the leases already out
work as ever. The pause is replicated: it holds across restarts and leader
changes until "ferry queue resume". "ferry queue stats" shows it, with who
paused the queue and when.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			set := c.Resume
			if pause {
				set = c.Pause
			}
			p, err := set(ctx, args[0])
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				return printJSON(jsonview.PauseOf(args[0], p.Partitions, p.Paused, p.By, p.At))
			}
			if p.Paused > 0 {
				fmt.Printf("queue %s paused on %d of %d partitions%s\n", args[0], p.Paused, p.Partitions, pausedBy(p.By, p.At))
			} else {
				fmt.Printf("queue %s delivers on all %d partitions\n", args[0], p.Partitions)
			}
			return nil
		},
	}
}

// pausedBy renders who paused a queue and when, for a sentence.
func pausedBy(by string, at time.Time) string {
	s := " since " + at.UTC().Format(time.RFC3339)
	if by != "" {
		s = " by " + by + s
	}
	return s
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
	var leased bool
	cmd := &cobra.Command{
		Use:   "purge QUEUE",
		Short: "Delete every ready and delayed message (leased ones stay unless --include-leased; asks first)",
		Long: `Delete every ready and delayed message of the queue; dead letters stay.
Leased messages stay too (their consumers may still ack them), unless
--include-leased: then they are deleted as well, and a consumer holding one
gets "message not found" for its ack, extend, nack or reject (as SQS's
PurgeQueue does to messages in flight).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			what := "every ready and delayed message"
			var opts []client.PurgeOption
			if leased {
				what, opts = "every message, leased ones included,", append(opts, client.IncludeLeased())
			}
			if err := confirm.confirm(fmt.Sprintf("delete %s of queue %s", what, args[0])); err != nil {
				return err
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			n, err := c.Purge(ctx, args[0], opts...)
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
	cmd.Flags().BoolVar(&leased, "include-leased", false, "delete leased messages too (their acks then fail with message not found)")
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
