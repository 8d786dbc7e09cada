package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Errors of the CLI itself (the cluster's come from package client).
var (
	// errUnknownCommand: a group command (queue, dlq, node, ...) was
	// given a subcommand it does not have.
	errUnknownCommand = errors.New("unknown command")
)

// clusterDownError says that none of the addresses answered, and how to
// point the CLI elsewhere. It is one line.
func clusterDownError(servers string, err error) error {
	addrs := strings.Split(servers, ",")
	return fmt.Errorf("cannot reach the cluster at %s (%s); point ferry at it with -s HOST:PORT[,HOST:PORT...] or FERRY_SERVERS",
		strings.Join(addrs, ", "), shortCause(err))
}

// shortCause is the innermost reason of err's first line ("connection
// refused", "i/o timeout").
func shortCause(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return strings.TrimSuffix(s, ")")
}

// describe rewrites an error for the terminal: a call that gave up when
// --timeout ran out says so and shows the last failure, which is the
// useful part ("unavailable: no leader ...").
func describe(err error, timeout time.Duration) error {
	const gaveUp = "context deadline exceeded (last failure: "
	s := err.Error()
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if i := strings.Index(s, gaveUp); i >= 0 {
		last := strings.TrimSuffix(s[i+len(gaveUp):], ")")
		last = strings.TrimPrefix(last, "ferry: ")
		return fmt.Errorf("%sgave up after --timeout %v: %s", s[:i], timeout, last)
	}
	return fmt.Errorf("%s (gave up after --timeout %v)", s, timeout)
}

// errorText is err's text without the "ferry: " prefixes of the errors it
// wraps: the CLI names itself once, at the start of the line.
func errorText(err error) string {
	return strings.ReplaceAll(err.Error(), "ferry: ", "")
}

// explain turns a "queue not found" for queue into one line that suggests
// the closest existing name, when there is one close enough.
func explain(ctx context.Context, c *client.Client, queue string, err error) error {
	if err == nil || queue == "" || !errors.Is(err, client.ErrQueueNotFound) {
		return err
	}
	msg := "queue not found: " + queue
	qs, lerr := c.ListQueues(ctx, "")
	if lerr == nil {
		names := make([]string, len(qs))
		for i, q := range qs {
			names[i] = q.Name
		}
		if best := closest(queue, names); best != "" {
			msg += " (did you mean " + best + "?)"
		}
	}
	return errors.New(msg)
}

// closest returns the name nearest to s by edit distance, if it is near
// enough to be a likely typo (at most a third of the longer name's
// letters, and at least 1 for short names); "" otherwise.
func closest(s string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		d := editDistance(strings.ToLower(s), strings.ToLower(n))
		if bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	limit := max(1, max(len(s), len(best))/3)
	if best == "" || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
