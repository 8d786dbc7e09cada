package main

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// asFerrydEnv makes the test binary run as ferryd (see TestMain), so that
// a test can start a real ferryd process without building one.
const asFerrydEnv = "FERRYD_TEST_RUN_AS_FERRYD"

func TestMain(m *testing.M) {
	if os.Getenv(asFerrydEnv) == "1" {
		os.Exit(exitCode(run(os.Args[1:]), os.Stderr))
	}
	os.Exit(m.Run())
}

func TestFerryd_TimerSlackFlag(t *testing.T) {
	o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard)
	if err != nil || o.timerSlack != defaultTimerSlack {
		t.Fatalf("default -timer-slack %v, %v; want %v", o.timerSlack, err, defaultTimerSlack)
	}
	t.Setenv("FERRY_TIMER_SLACK", "0")
	if o, err = parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard); err != nil || o.timerSlack != 0 {
		t.Fatalf("FERRY_TIMER_SLACK=0 gave %v, %v", o.timerSlack, err)
	}
	if err := applyTimerSlack(0); err != nil {
		t.Fatalf("-timer-slack 0: %v", err)
	}
	var ue *usageError
	for _, bad := range []time.Duration{-time.Microsecond, 11 * time.Millisecond} {
		if err := applyTimerSlack(bad); !errors.As(err, &ue) {
			t.Fatalf("-timer-slack %v: %v, want a usage error", bad, err)
		}
	}
}
