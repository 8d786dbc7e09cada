package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func nodeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "Cluster members"}
	var confirm confirmer
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a node for good and move its replicas to other nodes (asks first; --yes skips that)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := confirm.confirm(fmt.Sprintf("remove node %s from the cluster for good (its id cannot join again)", args[0])); err != nil {
				return err
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			moved, err := c.RemoveNode(ctx, args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(struct {
					Node  string `json:"node"`
					Moved int    `json:"moved"`
				}{args[0], moved})
			}
			fmt.Printf("node %s removed; %d replicas moved to other nodes\n", args[0], moved)
			return nil
		},
	}
	confirm.bind(remove.Flags())
	cmd.AddCommand(remove, nodeLsCmd(g), nodeDrainCmd(g), nodeUndrainCmd(g), safeToStopCmd(g))
	return cmd
}
