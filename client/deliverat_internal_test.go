package client

import (
	"errors"
	"testing"
	"time"
)

func TestMessage_DelayOf(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		m    Message
		want time.Duration
		ok   bool
	}{
		{Message{}, 0, true},
		{Message{Delay: 72 * time.Hour}, 72 * time.Hour, true},
		{Message{Delay: MaxDelay}, MaxDelay, true},
		{Message{Delay: MaxDelay + time.Second}, 0, false},
		{Message{Delay: -time.Second}, 0, false},
		{Message{DeliverAt: now.Add(90 * 24 * time.Hour)}, 90 * 24 * time.Hour, true},
		{Message{DeliverAt: now.Add(-time.Hour)}, 0, true}, // past: at once
		{Message{DeliverAt: now.Add(MaxDelay + time.Minute)}, 0, false},
		{Message{DeliverAt: now.Add(time.Hour), Delay: time.Hour}, 0, false},
	}
	for i, c := range cases {
		got, err := c.m.delayOf(i, now)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("case %d: %v, %v; want %v, ok %v", i, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("case %d: %v does not match ErrInvalidArgument", i, err)
		}
	}
}
