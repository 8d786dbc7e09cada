package raft

import (
	"errors"
	"testing"
	"time"
)

func TestErrorUnless_ReturnsTheAnswer(t *testing.T) {
	var d deferError
	d.init()
	want := errors.New("refused")
	go d.respond(want)
	if err, ok := d.ErrorUnless(make(chan struct{})); !ok || err != want {
		t.Fatalf("got %v, %v; want the answer", err, ok)
	}
	if err, ok := d.ErrorUnless(nil); !ok || err != want {
		t.Fatalf("asked again: %v, %v; want the same answer", err, ok)
	}
	if err := d.Error(); err != want {
		t.Fatalf("Error after ErrorUnless: %v", err)
	}
}

func TestErrorUnless_SuccessStaysSuccess(t *testing.T) {
	var d deferError
	d.init()
	d.respond(nil)
	if err, ok := d.ErrorUnless(make(chan struct{})); !ok || err != nil {
		t.Fatalf("got %v, %v; want nil, true", err, ok)
	}
	if err := d.Error(); err != nil {
		t.Fatalf("Error after ErrorUnless: %v", err)
	}
}

func TestErrorUnless_GivesUpWhenStopCloses(t *testing.T) {
	var d deferError
	d.init()
	stop := make(chan struct{})
	got := make(chan bool, 1)
	go func() {
		_, ok := d.ErrorUnless(stop)
		got <- ok
	}()
	close(stop)
	select {
	case ok := <-got:
		if ok {
			t.Fatal("reported an answer nobody gave")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after stop closed")
	}
	d.respond(nil) // answered later: Error still sees it
	if err := d.Error(); err != nil {
		t.Fatalf("Error after a late answer: %v", err)
	}
}

func TestErrorUnless_PrefersAnAnswerAlreadyThere(t *testing.T) {
	for range 100 { // select picks at random among ready cases
		var d deferError
		d.init()
		want := errors.New("applied with an error")
		d.respond(want)
		stop := make(chan struct{})
		close(stop)
		if err, ok := d.ErrorUnless(stop); !ok || err != want {
			t.Fatalf("got %v, %v; want the answer that was there", err, ok)
		}
	}
}

func TestErrorUnless_ShutdownChannel(t *testing.T) {
	var d deferError
	d.init()
	d.ShutdownCh = make(chan struct{})
	close(d.ShutdownCh)
	if err, ok := d.ErrorUnless(make(chan struct{})); !ok || !errors.Is(err, ErrRaftShutdown) {
		t.Fatalf("got %v, %v; want ErrRaftShutdown", err, ok)
	}
}
