package main

import (
	"fmt"
	"strings"

	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/spf13/cobra"
)

func clusterCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Cluster membership and leaders"}
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Show nodes and the leader and replicas of every partition",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			info, err := c.Cluster(ctx)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(jsonview.ClusterOf(info.Nodes, info.Queues))
			}
			var rows [][]string
			for _, n := range info.Nodes {
				rows = append(rows, []string{n.ID, n.State.String(), n.ClientAddr, n.RaftAddr, n.HTTPAddr})
			}
			table([]string{"NODE", "STATE", "CLIENT", "RAFT", "HTTP"}, rows)
			rows = nil
			for _, q := range info.Queues {
				for _, p := range q.Partitions {
					rows = append(rows, []string{q.Name, fmt.Sprint(p.Index), p.Leader, strings.Join(p.Replicas, ",")})
				}
			}
			if len(rows) > 0 {
				fmt.Println()
				table([]string{"QUEUE", "PARTITION", "LEADER", "REPLICAS"}, rows)
			}
			return nil
		},
	})
	cmd.AddCommand(rebalanceCmd(g))
	return cmd
}
