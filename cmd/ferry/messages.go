package main

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/ferrymq/ferry/internal/jsonview"
	"os"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/spf13/cobra"
)

func sendCmd(g *globals) *cobra.Command {
	var group, id, at string
	var delay time.Duration
	var headers []string
	var priority int
	cmd := &cobra.Command{
		Use:   "send QUEUE [BODY...]",
		Short: "Send one message per BODY argument, or per line of standard input",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hdrs, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			if priority < 0 || priority > client.MaxPriority {
				return fmt.Errorf("--priority %d: want 0..%d (%d the most urgent)", priority, client.MaxPriority, client.MaxPriority)
			}
			deliverAt, err := parseDeliverAt(at, delay)
			if err != nil {
				return err
			}
			bodies := args[1:]
			if len(bodies) == 0 {
				if bodies, err = readLines(); err != nil {
					return err
				}
			}
			if id != "" && len(bodies) > 1 {
				return errors.New("--id names one message; give a single body")
			}
			msgs := make([]client.Message, len(bodies))
			for i, b := range bodies {
				msgs[i] = client.Message{ID: id, Group: group, Headers: hdrs, Body: []byte(b), Delay: delay,
					DeliverAt: deliverAt, Priority: client.Priority(priority)}
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			res, err := c.Queue(args[0]).SendBatch(ctx, msgs)
			return printSent(g, res, explain(ctx, c, args[0], err))
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "message group (per-group order)")
	cmd.Flags().StringVar(&id, "id", "", "message id (idempotency key); generated when empty")
	cmd.Flags().DurationVar(&delay, "delay", 0, "keep the message invisible this long (up to 8784h, 366 days)")
	cmd.Flags().StringVar(&at, "at", "", "deliver at this time (RFC 3339, e.g. 2027-03-01T09:00:00Z; up to 366 days ahead)")
	cmd.Flags().StringArrayVarP(&headers, "header", "H", nil, "header key=value (repeatable)")
	cmd.Flags().IntVarP(&priority, "priority", "p", 0,
		fmt.Sprintf("priority 0..%d: receives take the highest ready first (0, the default, the lowest)", client.MaxPriority))
	return cmd
}

// parseDeliverAt reads --at: empty, or an RFC 3339 time at most
// client.MaxDelay ahead; --delay and --at exclude each other.
func parseDeliverAt(at string, delay time.Duration) (time.Time, error) {
	if delay < 0 || delay > client.MaxDelay {
		return time.Time{}, fmt.Errorf("--delay %v: want 0..%v", delay, client.MaxDelay)
	}
	if at == "" {
		return time.Time{}, nil
	}
	if delay != 0 {
		return time.Time{}, errors.New("give --delay or --at, not both")
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return time.Time{}, fmt.Errorf("--at %q: want an RFC 3339 time such as 2027-03-01T09:00:00Z", at)
	}
	if time.Until(t) > client.MaxDelay {
		return time.Time{}, fmt.Errorf("--at %s is more than %v ahead", at, client.MaxDelay)
	}
	return t, nil
}

// printSent shows the messages that were sent (only those: a failed
// message gets no row that could pass for a success) and reports each
// failed one on standard error; the error, returned, makes the exit
// status non-zero.
func printSent(g *globals, res []client.SendResult, err error) error {
	var be *client.BatchError
	failed := make(map[int]bool)
	if errors.As(err, &be) {
		for i, e := range be.Errors {
			if e != nil && i < len(res) {
				failed[i] = true
				fmt.Fprintf(os.Stderr, "not sent: message %s: %s\n", res[i].ID, errorText(describe(e, g.timeout)))
			}
		}
		err = fmt.Errorf("%d of %d messages not sent", len(failed), len(be.Errors))
	}
	sent := make([]client.SendResult, 0, len(res))
	for i, r := range res {
		if !failed[i] {
			sent = append(sent, r)
		}
	}
	if g.json {
		list := make([]sentJSON, len(sent))
		for i, r := range sent {
			list[i] = sentJSON{ID: r.ID, Partition: r.Partition, Seq: r.Seq, Duplicate: r.Duplicate}
		}
		return firstErr(printJSON(list), func() error { return err })
	}
	var rows [][]string
	for _, r := range sent {
		rows = append(rows, []string{r.ID, fmt.Sprint(r.Partition), fmt.Sprint(r.Seq), fmt.Sprint(r.Duplicate)})
	}
	if len(rows) > 0 {
		table([]string{"ID", "PARTITION", "SEQ", "DUPLICATE"}, rows)
	}
	return err
}

func parseHeaders(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("header %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

func readLines() ([]string, error) {
	var lines []string
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	if len(lines) == 0 {
		return nil, errors.New("no message bodies: give them as arguments or on standard input")
	}
	return lines, nil
}

func recvCmd(g *globals) *cobra.Command {
	var maxCount int
	var wait, visibility time.Duration
	var ack bool
	cmd := &cobra.Command{
		Use:   "recv QUEUE",
		Short: "Receive (lease) messages; --ack deletes them after printing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait > client.MaxWait {
				return fmt.Errorf("--wait %v is above the server's maximum long-poll of %v", wait, client.MaxWait)
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			q := c.Queue(args[0])
			ds, err := q.Receive(ctx, client.ReceiveOptions{Max: maxCount, Wait: wait, Visibility: visibility})
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if ack && len(ds) > 0 {
				if err := errors.Join(q.AckBatch(ctx, ds)...); err != nil {
					return fmt.Errorf("ack: %w", err)
				}
			}
			return printDeliveries(g, ds, ack)
		},
	}
	cmd.Flags().IntVarP(&maxCount, "max", "n", 1, "most messages to receive")
	cmd.Flags().DurationVarP(&wait, "wait", "w", 0, fmt.Sprintf("long-poll up to this long (at most %v) when none is ready", client.MaxWait))
	cmd.Flags().DurationVar(&visibility, "visibility", 0, "lease length (default: the queue's)")
	cmd.Flags().BoolVar(&ack, "ack", false, "ack the messages after printing them")
	return cmd
}

// sentJSON is one confirmed send in --json output.
type sentJSON struct {
	ID        string `json:"id"`
	Partition int    `json:"partition"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
}

// deliveryJSON is one received message in --json output.
type deliveryJSON struct {
	ID         string            `json:"id"`
	Group      string            `json:"group,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       string            `json:"body"`
	Partition  int               `json:"partition"`
	Seq        uint64            `json:"seq"`
	Attempt    uint32            `json:"attempt"`
	EnqueuedAt string            `json:"enqueued_at"`
	Deadline   string            `json:"deadline"`
	Acked      bool              `json:"acked"`
	Receipt    string            `json:"receipt,omitempty"`
	Priority   int               `json:"priority"`
}

func printDeliveries(g *globals, ds []*client.Delivery, acked bool) error {
	if g.json {
		list := make([]deliveryJSON, len(ds))
		for i, d := range ds {
			list[i] = deliveryJSON{d.ID, d.Group, d.Headers, string(d.Body), d.Partition, d.Seq, d.Attempt,
				jsonview.Time(d.EnqueuedAt), jsonview.Time(d.Deadline), acked, "", int(d.Priority)}
			if !acked {
				list[i].Receipt = d.Receipt().String()
			}
		}
		return printJSON(list)
	}
	if len(ds) == 0 {
		fmt.Println("no messages")
		return nil
	}
	var rows [][]string
	for _, d := range ds {
		receipt := "-" // settled already
		if !acked {
			receipt = d.Receipt().String()
		}
		rows = append(rows, []string{receipt, d.ID, d.Group, fmt.Sprint(d.Priority), fmt.Sprint(d.Attempt),
			leaseLeft(d.Deadline, acked), string(d.Body)})
	}
	table([]string{"RECEIPT", "ID", "GROUP", "PRIO", "ATTEMPT", "LEASE", "BODY"}, rows)
	if !acked {
		fmt.Fprintf(os.Stderr, "(leased, not acked: settle with ferry ack|nack|extend RECEIPT before the lease ends, or they come back)\n")
	}
	return nil
}

// leaseLeft shows how long a lease has left ("29.9s"), "expired", or "-"
// for a settled delivery.
func leaseLeft(deadline time.Time, settled bool) string {
	if settled {
		return "-"
	}
	left := time.Until(deadline).Round(100 * time.Millisecond)
	if left <= 0 {
		return "expired"
	}
	return left.String()
}
