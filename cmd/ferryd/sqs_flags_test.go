package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/sqs"
)

// The SQS API's limits come from flags (and so the environment and the
// config file), take their documented defaults, keep the port's
// connections to a quarter of the descriptor limit by default, and a
// value out of range stops ferryd with a usage error naming the flag.
func TestFerryd_SQSLimitFlags(t *testing.T) {
	o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := sqs.DefaultMaxConns
	if fds := fileLimit(); fds > 0 {
		want = min(want, fds/4)
	}
	if o.sqs.maxConns != want || o.sqs.maxConnsPerIP != min(sqs.DefaultMaxConnsPerIP, want) ||
		o.sqs.limits != (sqs.Limits{MaxCallers: sqs.DefaultMaxCallers, MaxCallerRequests: sqs.DefaultMaxCallerRequests,
			MaxCallerLongPolls: sqs.DefaultMaxCallerLongPolls, CallerIdleTimeout: sqs.DefaultCallerIdleTimeout}) {
		t.Fatalf("defaults: %+v (descriptor limit %d)", o.sqs, fileLimit())
	}
	t.Setenv("FERRY_SQS_CALLER_LONG_POLLS", "5")
	o, err = parseFlags([]string{"-id", "n1", "-insecure", "-sqs-max-conns", "300", "-sqs-max-conns-per-ip", "30",
		"-sqs-max-callers", "10", "-sqs-caller-requests", "20", "-sqs-caller-idle-timeout", "1m"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.sqs.maxConns != 300 || o.sqs.maxConnsPerIP != 30 || o.sqs.limits != (sqs.Limits{MaxCallers: 10, MaxCallerRequests: 20,
		MaxCallerLongPolls: 5, CallerIdleTimeout: time.Minute}) {
		t.Fatalf("flags not applied: %+v", o.sqs)
	}
	for flag, args := range map[string][]string{
		"-sqs-max-conns-per-ip":       {"-sqs-max-conns", "5", "-sqs-max-conns-per-ip", "6"},
		"-sqs-max-conns":              {"-sqs-max-conns", "-1"},
		"MaxCallerLongPolls":          {"-sqs-caller-requests", "4", "-sqs-caller-long-polls", "5"},
		"MaxCallerRequests":           {"-sqs-caller-requests", "1000"},
		"MaxCallers":                  {"-sqs-max-callers", "-1"},
		"CallerIdleTimeout":           {"-sqs-caller-idle-timeout", "10ms"},
		"flag -sqs-caller-long-polls": {"-sqs-caller-long-polls", "x"},
	} {
		_, err := parseFlags(append([]string{"-id", "n1", "-insecure"}, args...), io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), flag) {
			t.Errorf("%v: %v, want a usage error naming %s", args, err, flag)
		}
	}
}
