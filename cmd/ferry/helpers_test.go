package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestClosest_SuggestsOnlyLikelyTypos(t *testing.T) {
	names := []string{"orders", "payments", "emails"}
	for in, want := range map[string]string{
		"ordrs": "orders", "Orders": "orders", "order": "orders", "paymnets": "payments",
		"zzzzzz": "", "inventory": "",
	} {
		if got := closest(in, names); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
	if got := closest("x", nil); got != "" {
		t.Errorf("closest with no names = %q", got)
	}
}

func TestAsk_AcceptsOnlyYes(t *testing.T) {
	for answer, ok := range map[string]bool{"y\n": true, "YES\n": true, "n\n": false, "\n": false, "": false, "sure\n": false} {
		var prompt bytes.Buffer
		err := ask(strings.NewReader(answer), &prompt, "delete queue x")
		if (err == nil) != ok {
			t.Errorf("answer %q: err %v, want accepted %v", answer, err, ok)
		}
		if !strings.Contains(prompt.String(), "Delete queue x? [y/N]") {
			t.Errorf("prompt %q", prompt.String())
		}
	}
}

func TestDescribe_ShowsTheLastFailureOfACallThatGaveUp(t *testing.T) {
	last := errors.New("ferry: unavailable: no leader")
	err := fmt.Errorf("%w (last failure: %w)", context.DeadlineExceeded, last)
	got := describe(err, 4*time.Second).Error()
	if got != "gave up after --timeout 4s: unavailable: no leader" {
		t.Fatalf("describe = %q", got)
	}
	plain := errors.New("queue not found: x")
	if describe(plain, time.Second) != plain {
		t.Fatal("describe changed an error that is not a timeout")
	}
}
