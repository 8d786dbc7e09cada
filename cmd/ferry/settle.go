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

func peekCmd(g *globals) *cobra.Command {
	var maxCount int
	var ff filterFlags
	cmd := &cobra.Command{
		Use:   "peek QUEUE",
		Short: "Show messages without leasing them (ready ones by default; --state leased,delayed or all)",
		Long: "Shows up to --max messages, oldest first per partition, with their bodies. Nothing is\n" +
			"leased or changed: a following recv gets them as if peek had not run. --state picks the states\n" +
			"shown (ready by default; leased, delayed, or all); --group, --header key=value and --older-than\n" +
			"narrow the list. A leased message shows its holder and lease deadline, a delayed one when it\n" +
			"becomes visible. BLOCKED marks a group message waiting behind an earlier one of its group; PRIO\n" +
			"is the message's priority (a recv takes the highest first).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxCount < 1 || maxCount > client.MaxPeek {
				return fmt.Errorf("--max %d: want 1..%d", maxCount, client.MaxPeek)
			}
			f, err := ff.filter()
			if err != nil {
				return err
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			ms, err := c.Queue(args[0]).Peek(ctx, client.PeekOptions{Max: maxCount, MessageFilter: f})
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				now := time.Now()
				list := make([]jsonview.PeekedMessage, len(ms))
				for i, m := range ms {
					list[i] = jsonview.PeekedMessageOf(m, now)
				}
				return printJSON(list)
			}
			printPeeked(ms, len(f.States) > 0)
			return nil
		},
	}
	cmd.Flags().IntVarP(&maxCount, "max", "n", 10, fmt.Sprintf("most messages to show (1..%d)", client.MaxPeek))
	ff.bind(cmd.Flags(), nil)
	return cmd
}

// printPeeked prints peeked messages as a table; withState adds the
// STATE and DETAIL columns.
func printPeeked(ms []client.PeekedMessage, withState bool) {
	if len(ms) == 0 {
		fmt.Println("no matching messages")
		return
	}
	head := []string{"PARTITION", "SEQ", "ID", "GROUP", "PRIO", "ATTEMPTS", "AGE", "BLOCKED"}
	if withState {
		head = append(head, "STATE", "DETAIL")
	}
	var rows [][]string
	for _, m := range ms {
		row := []string{strconv.Itoa(m.Partition), strconv.FormatUint(m.Seq, 10), m.ID, m.Group,
			strconv.Itoa(int(m.Priority)), strconv.FormatUint(uint64(m.Attempts), 10), age(m.EnqueuedAt),
			map[bool]string{true: "yes", false: ""}[m.Blocked]}
		if withState {
			detail := ""
			switch m.State {
			case client.StateLeased:
				detail = fmt.Sprintf("held by %s until %s", m.Consumer, stamp(m.VisibleAt.UnixNano()))
			case client.StateDelayed:
				detail = "visible at " + stamp(m.VisibleAt.UnixNano())
			}
			row = append(row, m.State, detail)
		}
		rows = append(rows, append(row, string(m.Body)))
	}
	table(append(head, "BODY"), rows)
}

// age is how long ago t was, rounded for reading ("1.5s").
func age(t time.Time) string {
	return time.Since(t).Round(100 * time.Millisecond).String()
}
