package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/spf13/cobra"
)

// scheduleCmd is "ferry schedule": recurring schedules of a queue.
func scheduleCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "schedule", Short: "Recurring messages: add, list and remove a queue's schedules"}
	cmd.AddCommand(scheduleAddCmd(g), scheduleListCmd(g), scheduleRemoveCmd(g))
	return cmd
}

func scheduleAddCmd(g *globals) *cobra.Command {
	var every time.Duration
	var cron, body, group string
	var headers []string
	var priority int
	cmd := &cobra.Command{
		Use:   "add QUEUE NAME (--every 30s | --cron \"*/5 * * * *\")",
		Short: "Create or replace a schedule that sends one message per tick",
		Long: `Create the schedule NAME on QUEUE, or replace the one of that name. It
ticks on a fixed interval (--every, whole seconds from 1s to 8784h; ticks
fall on its multiples since the Unix epoch) or on a five-field cron
expression read in UTC (--cron "minute hour day-of-month month
day-of-week"). Each tick sends one message, with the id NAME@<tick in Unix
seconds>, exactly once whatever leader changes happen. Replacing a
schedule with the same timing keeps its next tick.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (every == 0) == (cron == "") {
				return errors.New("give one of --every and --cron")
			}
			if priority < 0 || priority > client.MaxPriority {
				return fmt.Errorf("--priority %d: want 0..%d", priority, client.MaxPriority)
			}
			hdrs, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			s, err := c.CreateSchedule(ctx, args[0], client.Schedule{Name: args[1], Every: every, Cron: cron,
				Group: group, Headers: hdrs, Body: []byte(body), Priority: client.Priority(priority)})
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				return printJSON(jsonview.ScheduleOf(s))
			}
			fmt.Printf("schedule %s on %s (partition %d): next tick %s\n", s.Name, args[0], s.Partition, stamp(s.Next))
			return nil
		},
	}
	cmd.Flags().DurationVar(&every, "every", 0, "fixed interval, whole seconds (1s..8784h)")
	cmd.Flags().StringVar(&cron, "cron", "", "five-field cron expression, UTC")
	cmd.Flags().StringVar(&body, "body", "", "body of each tick's message")
	cmd.Flags().StringVar(&group, "group", "", "message group of each tick's message")
	cmd.Flags().StringArrayVarP(&headers, "header", "H", nil, "header key=value (repeatable)")
	cmd.Flags().IntVarP(&priority, "priority", "p", 0, fmt.Sprintf("priority 0..%d of each tick's message", client.MaxPriority))
	return cmd
}

func scheduleListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "ls QUEUE", Short: "List a queue's schedules with their next tick and counts",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			list, err := c.ListSchedules(ctx, args[0])
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				return printJSON(jsonview.SchedulesOf(list))
			}
			var rows [][]string
			for _, s := range list {
				when := s.Cron
				if s.Every != 0 {
					when = "every " + s.Every.String()
				}
				rows = append(rows, []string{s.Name, fmt.Sprint(s.Partition), when, s.Group, fmt.Sprint(s.Priority),
					stamp(s.Next), stamp(s.LastTick), fmt.Sprint(s.Fired), fmt.Sprint(s.Refused), fmt.Sprint(s.Skipped)})
			}
			table([]string{"NAME", "PARTITION", "WHEN", "GROUP", "PRIO", "NEXT", "LAST", "FIRED", "REFUSED", "SKIPPED"}, rows)
			return nil
		},
	}
}

func scheduleRemoveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "rm QUEUE NAME", Short: "Delete a schedule (messages it sent stay)",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			ok, err := c.DeleteSchedule(ctx, args[0], args[1])
			if err != nil {
				return explain(ctx, c, args[0], err)
			}
			if g.json {
				return printJSON(map[string]bool{"deleted": ok})
			}
			if !ok {
				return fmt.Errorf("no schedule %s on %s", args[1], args[0])
			}
			fmt.Printf("schedule %s deleted from %s\n", args[1], args[0])
			return nil
		},
	}
}
