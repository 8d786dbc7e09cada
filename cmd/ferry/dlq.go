package main

import (
	"fmt"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// deadFlags select dead letters.
type deadFlags struct {
	reason string
	group  string
	since  time.Duration
	seqs   []uint
	limit  int
}

func (f *deadFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.reason, "reason", "", "only this reason: rejected, exhausted or expired")
	fs.StringVar(&f.group, "group", "", "only this message group")
	fs.DurationVar(&f.since, "since", 0, "only those dead-lettered within this long")
	fs.UintSliceVar(&f.seqs, "seq", nil, "only these sequence numbers (with one partition queues; repeatable)")
	fs.IntVar(&f.limit, "limit", 0, "at most this many (0 = all)")
}

func (f *deadFlags) filter() (client.DeadFilter, error) {
	out := client.DeadFilter{Group: f.group, Limit: f.limit}
	for _, s := range f.seqs {
		out.Seqs = append(out.Seqs, uint64(s))
	}
	switch f.reason {
	case "":
	case "rejected":
		out.Reason = client.DeadRejected
	case "exhausted", "retries_exhausted": // the second is the JSON name
		out.Reason = client.DeadRetriesExhausted
	case "expired", "lease_expired":
		out.Reason = client.DeadLeaseExpired
	default:
		return out, fmt.Errorf("--reason %q: want rejected, exhausted (retries_exhausted) or expired (lease_expired)", f.reason)
	}
	if f.since > 0 {
		out.From = time.Now().Add(-f.since)
	}
	return out, nil
}

func dlqCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "dlq", Short: "Inspect, replay or discard dead letters"}
	cmd.AddCommand(dlqListCmd(g, false), dlqListCmd(g, true), dlqChangeCmd(g, true), dlqChangeCmd(g, false))
	return cmd
}

func dlqListCmd(g *globals, peek bool) *cobra.Command {
	var f deadFlags
	use, short := "ls QUEUE", "List dead letters with their failure history"
	if peek {
		use, short = "peek QUEUE", "Show dead letters with headers and bodies"
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			filter, err := f.filter()
			if err != nil {
				return err
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			list := c.DeadLetters
			if peek {
				list = c.PeekDeadLetters
			}
			letters, err := list(ctx, args[0], filter)
			err = explain(ctx, c, args[0], err)
			if err != nil || g.json {
				return firstErr(err, func() error { return printJSON(deadLettersJSON(letters)) })
			}
			var rows [][]string
			for _, d := range letters {
				row := []string{fmt.Sprint(d.Partition), fmt.Sprint(d.Seq), d.ID, d.Group, fmt.Sprint(d.Priority),
					d.Reason.String(), d.ReasonText, fmt.Sprint(d.Attempts), since(d.DeadAt)}
				if peek {
					row = append(row, string(d.Body))
				}
				rows = append(rows, row)
			}
			header := []string{"PARTITION", "SEQ", "ID", "GROUP", "PRIO", "REASON", "DETAIL", "ATTEMPTS", "DEAD"}
			if peek {
				header = append(header, "BODY")
			}
			table(header, rows)
			return nil
		},
	}
	f.bind(cmd.Flags())
	return cmd
}

// empty says whether no flag narrows the selection.
func (f *deadFlags) empty() bool {
	return f.reason == "" && f.group == "" && f.since == 0 && len(f.seqs) == 0 && f.limit == 0
}

func dlqChangeCmd(g *globals, redrive bool) *cobra.Command {
	var f deadFlags
	var confirm confirmer
	use, short := "redrive QUEUE", "Move dead letters back to the queue (attempts reset, id and group kept)"
	if !redrive {
		use, short = "rm QUEUE", "Delete dead letters for good"
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			filter, err := f.filter()
			if err != nil {
				return err
			}
			if !redrive && f.empty() {
				if err := confirm.confirm(fmt.Sprintf("delete every dead letter of queue %s for good", args[0])); err != nil {
					return err
				}
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			change, verb := c.RedriveDeadLetters, "redriven"
			if !redrive {
				change, verb = c.DeleteDeadLetters, "deleted"
			}
			n, err := change(ctx, args[0], filter)
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				return printJSON(map[string]int{verb: n})
			}
			fmt.Printf("%d dead letters %s\n", n, verb)
			return nil
		},
	}
	f.bind(cmd.Flags())
	if !redrive {
		confirm.bind(cmd.Flags())
	}
	return cmd
}

// deadLettersJSON renders dead letters in the JSON conventions of
// jsonview.
func deadLettersJSON(letters []client.DeadLetter) []jsonview.DeadLetter {
	out := make([]jsonview.DeadLetter, 0, len(letters))
	for _, d := range letters {
		v := jsonview.DeadLetter{
			Partition: d.Partition, Seq: d.Seq, ID: d.ID, Group: d.Group, Headers: d.Headers,
			Bytes: d.Bytes, Attempts: d.Attempts,
			FirstEnqueuedAt: jsonview.Time(d.FirstEnqueuedAt), EnqueuedAt: jsonview.Time(d.EnqueuedAt),
			FirstDeliveredAt: jsonview.Time(d.FirstDeliveredAt), LastDeliveredAt: jsonview.Time(d.LastDeliveredAt),
			DeadAt: jsonview.Time(d.DeadAt), Reason: jsonview.Enum(d.Reason.String()),
			ReasonText: d.ReasonText, LastConsumer: d.LastConsumer, History: []jsonview.Event{},
			Priority: int(d.Priority),
		}
		v.SetBody(d.Body)
		for _, e := range d.History {
			v.History = append(v.History, jsonview.Event{Kind: jsonview.Enum(e.Kind.String()), At: jsonview.Time(e.At),
				Attempt: e.Attempt, Consumer: e.Consumer, Reason: e.Reason})
		}
		out = append(out, v)
	}
	return out
}
