package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// filterFlags are the message filter flags peek and msg rm-matching
// share.
type filterFlags struct {
	states    []string
	group     string
	header    string
	olderThan time.Duration
}

func (f *filterFlags) bind(fs *pflag.FlagSet, defaultStates []string) {
	fs.StringSliceVar(&f.states, "state", defaultStates, "states to select: ready, leased, delayed (comma-separated) or all")
	fs.StringVar(&f.group, "group", "", "only messages of this group (exact)")
	fs.StringVar(&f.header, "header", "", "only messages with this header, as key=value (exact)")
	fs.DurationVar(&f.olderThan, "older-than", 0, "only messages enqueued at least this long ago (e.g. 10m)")
}

// filter checks the flags and returns the client's filter.
func (f *filterFlags) filter() (client.MessageFilter, error) {
	out := client.MessageFilter{Group: f.group, OlderThan: f.olderThan}
	for _, s := range f.states {
		s = strings.TrimSpace(s)
		switch s {
		case client.StateReady, client.StateLeased, client.StateDelayed, client.StateAll:
			out.States = append(out.States, s)
		default:
			return out, fmt.Errorf("--state %q: want ready, leased, delayed or all", s)
		}
	}
	if len(out.States) > 3 {
		return out, fmt.Errorf("--state: at most ready, leased and delayed (or all)")
	}
	if f.olderThan < 0 {
		return out, fmt.Errorf("--older-than %v: negative", f.olderThan)
	}
	if f.header != "" {
		k, v, ok := strings.Cut(f.header, "=")
		if !ok || k == "" {
			return out, fmt.Errorf("--header %q: want key=value", f.header)
		}
		out.HeaderKey, out.HeaderValue = k, v
	}
	return out, nil
}

// msgRemoveMatchingCmd is "ferry msg rm-matching": a bulk delete by filter.
func msgRemoveMatchingCmd(g *globals) *cobra.Command {
	var ff filterFlags
	var dryRun, yes bool
	cmd := &cobra.Command{
		Use:   "rm-matching QUEUE",
		Short: "Delete the messages a filter selects (--dry-run counts them; --yes deletes)",
		Long: `Delete every live message of the queue that matches the filter: its state
(--state, ready by default), group, header and age. A consumer holding a
deleted message gets "message not found" for its ack, extend, nack or
reject; dead letters are never touched (see ferry dlq rm).

--dry-run counts the matching messages and shows the first ids, changing
nothing; without it --yes is required. Messages are listed and deleted a
page (up to 1000) at a time; each delete checks again that the message is
still in one of the states asked for, so nothing outside the filter is
ever deleted. A message that starts matching while it runs may or may
not be deleted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := ff.filter()
			if err != nil {
				return err
			}
			if !dryRun && !yes {
				return fmt.Errorf("refusing to delete without --yes: run with --dry-run first to count the matching messages")
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			res, err := c.DeleteMatching(ctx, args[0], f, dryRun)
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				return printJSON(jsonview.MessagesMatchedOf(res, dryRun))
			}
			printMatched(args[0], res, dryRun)
			return nil
		},
	}
	ff.bind(cmd.Flags(), nil)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count the matching messages and show a sample; delete nothing")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete without asking (required unless --dry-run)")
	return cmd
}

// printMatched prints a bulk delete's result as text.
func printMatched(queue string, res client.DeleteMatchingResult, dryRun bool) {
	if dryRun {
		fmt.Printf("%d message(s) of %s match; nothing deleted (dry run)\n", res.Matched, queue)
	} else {
		fmt.Printf("deleted %d of %d matching message(s) from %s\n", res.Deleted, res.Matched, queue)
	}
	if len(res.Sample) == 0 {
		return
	}
	var rows [][]string
	for _, m := range res.Sample {
		rows = append(rows, []string{fmt.Sprint(m.Partition), fmt.Sprint(m.Seq), m.ID, m.State})
	}
	table([]string{"PARTITION", "SEQ", "ID", "STATE"}, rows)
}
