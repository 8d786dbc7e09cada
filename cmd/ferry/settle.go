package main

import (
	"errors"
	"fmt"
	"github.com/ferrymq/ferry/internal/jsonview"
	"os"
	"strconv"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/spf13/cobra"
)

// settleCmd builds ack, nack or extend: each settles leases by the
// receipts that recv printed.
func settleCmd(g *globals, verb string) *cobra.Command {
	var delay, by time.Duration
	var reason string
	short := map[string]string{
		"ack":    "Delete received messages: they have been handled",
		"nack":   "Give received messages back for a retry (after --delay, or the queue's backoff)",
		"extend": "Move the lease deadlines of received messages to now plus --by",
	}[verb]
	cmd := &cobra.Command{
		Use:   verb + " RECEIPT...",
		Short: short,
		Long: short + ".\nA RECEIPT is what recv prints (QUEUE:PARTITION:SEQ:ATTEMPT); it names one delivery,\n" +
			"so a receipt whose lease went to someone else since fails with \"lease lost\".",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rs := make([]client.Receipt, len(args))
			for i, a := range args {
				r, err := client.ParseReceipt(a)
				if err != nil {
					return err
				}
				rs[i] = r
			}
			if verb == "extend" && by <= 0 {
				return errors.New("extend needs --by, a positive duration such as 30s")
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			var errs []error
			switch verb {
			case "ack":
				errs = c.AckReceipts(ctx, rs)
			case "nack":
				opts := client.NackOptions{Reason: reason, Delay: delay}
				if cmd.Flags().Changed("delay") && delay == 0 {
					opts.Immediate = true
				}
				errs = c.NackReceipts(ctx, rs, opts)
			default:
				errs = c.ExtendReceipts(ctx, rs, by)
			}
			return printSettled(g, verb, rs, errs)
		},
	}
	switch verb {
	case "nack":
		cmd.Flags().DurationVar(&delay, "delay", 0, "retry after exactly this long (0 = at once); without it the queue's backoff decides")
		cmd.Flags().StringVar(&reason, "reason", "", "why, kept in the message's failure history")
	case "extend":
		cmd.Flags().DurationVar(&by, "by", 0, "new lease length from now (required)")
	}
	return cmd
}

// settledJSON is the --json form of one settled receipt.
type settledJSON struct {
	Receipt string `json:"receipt"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// printSettled reports each receipt's outcome; any failure makes the exit
// status non-zero.
func printSettled(g *globals, verb string, rs []client.Receipt, errs []error) error {
	failed := 0
	list := make([]settledJSON, len(rs))
	for i, r := range rs {
		list[i] = settledJSON{Receipt: r.String(), OK: errs[i] == nil}
		if errs[i] != nil {
			failed++
			list[i].Error = errorText(describe(errs[i], g.timeout))
		}
	}
	var err error
	if failed > 0 {
		err = fmt.Errorf("%d of %d receipts not settled", failed, len(rs))
	}
	if g.json {
		return firstErr(printJSON(list), func() error { return err })
	}
	past := map[string]string{"ack": "acked", "nack": "nacked", "extend": "extended"}[verb]
	for _, s := range list {
		if s.OK {
			fmt.Printf("%s %s\n", past, s.Receipt)
		} else {
			fmt.Fprintf(os.Stderr, "not %s: %s: %s\n", past, s.Receipt, s.Error)
		}
	}
	return err
}

// peekedJSON is the --json form of a peeked message.
type peekedJSON struct {
	Partition  int               `json:"partition"`
	Seq        uint64            `json:"seq"`
	ID         string            `json:"id"`
	Group      string            `json:"group,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       string            `json:"body"`
	EnqueuedAt string            `json:"enqueued_at"`
	Age        string            `json:"age"`
	Attempts   uint32            `json:"attempts"`
	Blocked    bool              `json:"blocked"`
	Priority   int               `json:"priority"`
}

func peekCmd(g *globals) *cobra.Command {
	var maxCount int
	cmd := &cobra.Command{
		Use:   "peek QUEUE",
		Short: "Show ready messages without leasing them",
		Long: "Shows up to --max ready messages, oldest first per partition, with their bodies. Nothing is\n" +
			"leased or changed: a following recv gets them as if peek had not run. BLOCKED marks a group\n" +
			"message waiting behind an earlier one of its group; PRIO is the message's priority (a recv\n" +
			"takes the highest first).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxCount < 1 || maxCount > client.MaxPeek {
				return fmt.Errorf("--max %d: want 1..%d", maxCount, client.MaxPeek)
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			ms, err := c.Queue(args[0]).Peek(ctx, client.PeekOptions{Max: maxCount})
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				list := make([]peekedJSON, len(ms))
				for i, m := range ms {
					list[i] = peekedJSON{m.Partition, m.Seq, m.ID, m.Group, m.Headers, string(m.Body), jsonview.Time(m.EnqueuedAt),
						age(m.EnqueuedAt), m.Attempts, m.Blocked, int(m.Priority)}
				}
				return printJSON(list)
			}
			if len(ms) == 0 {
				fmt.Println("no ready messages")
				return nil
			}
			var rows [][]string
			for _, m := range ms {
				rows = append(rows, []string{strconv.Itoa(m.Partition), strconv.FormatUint(m.Seq, 10), m.ID, m.Group,
					strconv.Itoa(int(m.Priority)), strconv.FormatUint(uint64(m.Attempts), 10), age(m.EnqueuedAt),
					map[bool]string{true: "yes", false: ""}[m.Blocked], string(m.Body)})
			}
			table([]string{"PARTITION", "SEQ", "ID", "GROUP", "PRIO", "ATTEMPTS", "AGE", "BLOCKED", "BODY"}, rows)
			return nil
		},
	}
	cmd.Flags().IntVarP(&maxCount, "max", "n", 10, fmt.Sprintf("most messages to show (1..%d)", client.MaxPeek))
	return cmd
}

// age is how long ago t was, rounded for reading ("1.5s").
func age(t time.Time) string {
	return time.Since(t).Round(100 * time.Millisecond).String()
}
