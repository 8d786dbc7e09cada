package main

import (
	"fmt"
	"time"

	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/spf13/cobra"
)

// msgCmd is "ferry msg": one message, found or deleted by its id, or the
// messages a filter selects, deleted.
func msgCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "msg", Short: "Find or delete one message by its id, in any state, or delete by filter"}
	cmd.AddCommand(msgFindCmd(g), msgRemoveCmd(g), msgRemoveMatchingCmd(g))
	return cmd
}

func msgFindCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "find QUEUE ID", Short: "Show where a message stands: ready, delayed, leased (by whom, until when) or dead, with its attempts and history",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			found, err := c.FindMessage(ctx, args[0], args[1])
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				out := make([]jsonview.FoundMessage, 0, len(found))
				for _, m := range found {
					out = append(out, jsonview.FoundMessageOf(m))
				}
				return printJSON(out)
			}
			if len(found) == 0 {
				return fmt.Errorf("no message %s in queue %s", args[1], args[0])
			}
			var rows [][]string
			for _, m := range found {
				detail := ""
				switch {
				case m.State == "leased":
					detail = fmt.Sprintf("held by %s until %s", m.Consumer, stamp(m.VisibleAt))
				case m.State == "delayed":
					detail = "visible at " + stamp(m.VisibleAt)
				case m.Dead != nil:
					detail = fmt.Sprintf("%s: %s", m.Dead.Reason, m.Dead.ReasonText)
				}
				rows = append(rows, []string{fmt.Sprint(m.Partition), fmt.Sprint(m.Seq), m.ID, m.Group, m.State,
					fmt.Sprint(m.Priority), fmt.Sprint(m.Attempts), stamp(m.EnqueuedAt), detail})
			}
			table([]string{"PARTITION", "SEQ", "ID", "GROUP", "STATE", "PRIO", "ATTEMPTS", "ENQUEUED", "DETAIL"}, rows)
			return nil
		},
	}
}

func msgRemoveCmd(g *globals) *cobra.Command {
	var undelivered bool
	cmd := &cobra.Command{
		Use:   "rm QUEUE ID",
		Short: "Delete a message by its id in any state (--undelivered: only if never delivered, a cancel)",
		Long: `Delete the message with this id, whatever its state. A consumer holding
it gets "message not found" for its ack, extend, nack or reject; nothing
else changes. With --undelivered only a message never delivered (ready or
delayed at its first attempt) is deleted: a cancel.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			del := c.DeleteMessage
			if undelivered {
				del = c.CancelMessage
			}
			n, err := del(ctx, args[0], args[1])
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				return printJSON(map[string]int{"deleted": n})
			}
			fmt.Printf("deleted %d message(s) %s from %s\n", n, args[1], args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&undelivered, "undelivered", false, "delete only a message never delivered (cancel)")
	return cmd
}

// stamp renders Unix nanoseconds for a table.
func stamp(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000Z")
}
