package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// errNotSafe is what `node safe-to-stop` exits with when the node is not
// safe to stop (exit status 1, like any failure).
var errNotSafe = errors.New("not safe to stop")

func nodeLsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List nodes with their state, replica and leader counts, moves and under-replicated partitions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			list, err := c.ListNodes(ctx)
			if err != nil {
				return err
			}
			view := jsonview.NodesOf(list)
			if g.json {
				return printJSON(view)
			}
			printNodes(view)
			return nil
		},
	}
}

func printNodes(v jsonview.Nodes) {
	var rows [][]string
	for _, n := range v.Nodes {
		note := n.Stuck
		if n.DeadForMS > 0 {
			note = strings.TrimSpace(fmt.Sprintf("dead for %v %s", time.Duration(n.DeadForMS)*time.Millisecond, note))
		}
		rows = append(rows, []string{n.ID, n.State, n.Lifecycle, fmt.Sprint(n.Replicas), fmt.Sprint(n.Leaders),
			fmt.Sprint(n.Leading), fmt.Sprint(n.Joining), fmt.Sprint(n.Leaving), note})
	}
	table([]string{"NODE", "STATE", "LIFECYCLE", "REPLICAS", "PREFERRED", "LEADING", "JOINING", "LEAVING", "NOTE"}, rows)
	fmt.Printf("\n%d partitions moving\n", v.MovesInFlight)
	if len(v.Moving) > 0 {
		rows = nil
		for _, m := range v.Moving {
			rows = append(rows, []string{m.Queue, fmt.Sprint(m.Partition), strings.Join(m.Joining, ","), strings.Join(m.Leaving, ",")})
		}
		table([]string{"QUEUE", "PARTITION", "CATCHING UP", "LEAVING"}, rows)
	}
	if v.UnderReplicatedTotal == 0 {
		return
	}
	fmt.Printf("%d partitions under-replicated:\n", v.UnderReplicatedTotal)
	rows = nil
	for _, u := range v.UnderReplicated {
		rows = append(rows, []string{u.Queue, fmt.Sprint(u.Partition), fmt.Sprintf("%d/%d", u.CaughtUp, u.Want), u.Reason})
	}
	table([]string{"QUEUE", "PARTITION", "CAUGHT UP", "WHY"}, rows)
}

func nodeDrainCmd(g *globals) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "drain ID",
		Short: "Move a node's leaderships and replicas to other nodes; --wait follows it until the node hosts nothing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			st, err := c.DrainNode(ctx, args[0])
			if err != nil {
				return err
			}
			if wait {
				st, err = waitDrained(ctx, c, args[0], st.Replicas, g.json)
				if err != nil {
					return err
				}
			}
			if g.json {
				return printJSON(jsonview.NodeStatusOf(st))
			}
			if s := jsonview.NodeStatusOf(st); s.Lifecycle == "drained" {
				fmt.Printf("node %s drained: it hosts no replica and leads nothing\n", args[0])
			} else {
				fmt.Printf("node %s draining: %d replicas and %d leaderships to move (follow with `ferry node ls`)\n", args[0], st.Replicas+st.Leaving, st.Leading)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the node is drained, showing progress (bounded by --timeout)")
	return cmd
}

// waitDrained polls the node's status until it hosts nothing, drawing a
// progress bar on a terminal; a drain that cannot finish (nowhere to move
// a replica) is an error that says why.
func waitDrained(ctx context.Context, c *client.Client, id string, start int, quiet bool) (client.NodeStatus, error) {
	var bar *progressbar.ProgressBar
	if !quiet && isTerminal(os.Stderr) {
		bar = progressbar.NewOptions(max(start, 1), progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("draining "+id), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
		defer bar.Finish()
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		list, err := c.ListNodes(ctx)
		if err != nil {
			return client.NodeStatus{}, err
		}
		for _, st := range list.Nodes {
			if st.ID != id {
				continue
			}
			if bar != nil {
				_ = bar.Set(max(0, start-st.Replicas))
			}
			if jsonview.Lifecycle(st) == "drained" {
				return st, nil
			}
			if st.Stuck != "" && list.MovesInFlight == 0 {
				return st, fmt.Errorf("node %s cannot finish draining: %s", id, st.Stuck)
			}
		}
		select {
		case <-ctx.Done():
			return client.NodeStatus{}, fmt.Errorf("node %s still draining when --timeout ran out: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

func nodeUndrainCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "undrain ID",
		Short: "Take a drained or draining node back into placement",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			st, err := c.UndrainNode(ctx, args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(jsonview.NodeStatusOf(st))
			}
			fmt.Printf("node %s takes replicas again (balancing moves some back to it unless turned off)\n", args[0])
			return nil
		},
	}
}

func safeToStopCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "safe-to-stop ID",
		Short: "Say whether a node can be stopped now without making a partition unavailable (exit status 1 if not)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			ans, err := c.SafeToStop(ctx, args[0])
			if err != nil {
				return err
			}
			if g.json {
				if err := printJSON(struct {
					Node    string   `json:"node"`
					Safe    bool     `json:"safe"`
					Leads   int      `json:"leads"`
					Reasons []string `json:"reasons"`
				}{args[0], ans.Safe, ans.Leads, append([]string{}, ans.Reasons...)}); err != nil {
					return err
				}
			} else if ans.Safe {
				fmt.Printf("node %s is safe to stop (it leads %d groups; a SIGTERM hands them over first)\n", args[0], ans.Leads)
			} else {
				fmt.Printf("node %s is not safe to stop:\n  %s\n", args[0], strings.Join(ans.Reasons, "\n  "))
			}
			if !ans.Safe {
				return errNotSafe
			}
			return nil
		},
	}
}

func rebalanceCmd(g *globals) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Start one round of moves that even out replicas and leaders per node (--dry-run prints the plan only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			plan, err := c.Rebalance(ctx, dryRun)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(rebalanceView(plan))
			}
			var rows [][]string
			for _, m := range plan.Moves {
				rows = append(rows, []string{"move replica", m.Queue, fmt.Sprint(m.Partition), m.From, m.To})
			}
			for _, l := range plan.Leaders {
				rows = append(rows, []string{"prefer leader", l.Queue, fmt.Sprint(l.Partition), "", l.To})
			}
			if len(rows) == 0 {
				fmt.Println("balanced: replica and leader counts per node differ by at most one")
				return nil
			}
			table([]string{"ACTION", "QUEUE", "PARTITION", "FROM", "TO"}, rows)
			if plan.Started {
				fmt.Println("\nstarted; follow with `ferry node ls`")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan without starting it")
	return cmd
}

// rebalanceJSON is `cluster rebalance --json`.
type rebalanceJSON struct {
	Moves   []moveJSON   `json:"moves"`
	Leaders []leaderJSON `json:"leaders"`
	Started bool         `json:"started"`
}

type moveJSON struct {
	Queue     string `json:"queue"`
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

type leaderJSON struct {
	Queue     string `json:"queue"`
	Partition int    `json:"partition"`
	To        string `json:"to"`
}

func rebalanceView(p *client.RebalancePlan) rebalanceJSON {
	out := rebalanceJSON{Moves: []moveJSON{}, Leaders: []leaderJSON{}, Started: p.Started}
	for _, m := range p.Moves {
		out.Moves = append(out.Moves, moveJSON{m.Queue, m.Partition, m.From, m.To})
	}
	for _, l := range p.Leaders {
		out.Leaders = append(out.Leaders, leaderJSON{l.Queue, l.Partition, l.To})
	}
	return out
}
