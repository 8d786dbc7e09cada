package sqs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
)

// signedAs signs a request of the JSON protocol (action set) or, with
// action "", of the query protocol (body is the form) with key's secret.
func signedAs(t *testing.T, key, secret, action string, body []byte) *http.Request {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9324/", bytes.NewReader(body))
	if action != "" {
		req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	} else {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

// Each caller has its own bounds of requests and of long polls in flight;
// one over a bound is throttled (and counted) while other callers are
// not, and an ended request gives its place back.
func TestCallers_BoundsEachCallerApart(t *testing.T) {
	cs := newCallers(Limits{MaxCallerRequests: 3, MaxCallerLongPolls: 2}, nil, nil)
	defer cs.close()
	admit := func(key string, poll bool) (*callerState, error) {
		t.Helper()
		return cs.admit(key, poll)
	}
	p1, err1 := admit("a", true)
	_, err2 := admit("a", true)
	if err1 != nil || err2 != nil {
		t.Fatalf("two long polls within the bound: %v, %v", err1, err2)
	}
	if _, err := admit("a", true); !errors.Is(err, ErrRequestThrottled) {
		t.Fatalf("a third long poll: %v, want %v", err, ErrRequestThrottled)
	}
	if _, err := admit("a", false); err != nil {
		t.Fatalf("a send beside two long polls: %v", err)
	}
	if _, err := admit("a", false); !errors.Is(err, ErrRequestThrottled) {
		t.Fatalf("a fourth request: %v, want %v", err, ErrRequestThrottled)
	}
	for range 3 {
		if _, err := admit("b", false); err != nil {
			t.Fatalf("another caller throttled by a's requests: %v", err)
		}
	}
	cs.release(p1, true)
	if _, err := admit("a", true); err != nil {
		t.Fatalf("a long poll after one ended: %v", err)
	}
	if got := cs.throttled.Load(); got != 2 {
		t.Fatalf("%d throttled requests counted, want 2", got)
	}
}

// The table holds at most MaxCallers callers: a new one takes the place
// of the caller idle longest, and is throttled while every caller has a
// request in flight.
func TestCallers_TableBoundedDropsTheIdlest(t *testing.T) {
	cs := newCallers(Limits{MaxCallers: 2}, nil, nil)
	defer cs.close()
	a, _ := cs.admit("a", false)
	b, _ := cs.admit("b", false)
	if _, err := cs.admit("c", false); !errors.Is(err, ErrRequestThrottled) {
		t.Fatalf("a third caller while two are busy: %v, want %v", err, ErrRequestThrottled)
	}
	cs.release(b, false)
	cs.release(a, false) // a ended last: b is the idlest
	if _, err := cs.admit("c", false); err != nil {
		t.Fatalf("a third caller once two are idle: %v", err)
	}
	cs.mu.Lock()
	_, hasA := cs.table["a"]
	_, hasB := cs.table["b"]
	n := len(cs.table)
	cs.mu.Unlock()
	if n != 2 || !hasA || hasB {
		t.Fatalf("table after the third caller: %d callers, a %v, b %v; want 2 with a, without b", n, hasA, hasB)
	}
}

// A caller with nothing in flight for CallerIdleTimeout is dropped; a
// caller with a request in flight is kept however long it runs.
func TestCallers_IdleCallersAreDropped(t *testing.T) {
	cs := newCallers(Limits{CallerIdleTimeout: 50 * time.Millisecond}, nil, nil)
	defer cs.close()
	busy, _ := cs.admit("busy", true)
	idle, _ := cs.admit("idle", false)
	cs.release(idle, false)
	callersLeft := func(want int) func() error {
		return func() error {
			if n := cs.count(); n != want {
				return fmt.Errorf("%d callers", n)
			}
			return nil
		}
	}
	testwait.UntilNil(t, 5*time.Second, "the idle caller dropped and the busy one kept", callersLeft(1))
	cs.release(busy, true)
	testwait.UntilNil(t, 5*time.Second, "the last caller dropped once its request ended", callersLeft(0))
	// The sweep stopped with the table empty and starts again with it.
	again, _ := cs.admit("again", false)
	cs.release(again, false)
	testwait.UntilNil(t, 5*time.Second, "a caller added after the table emptied dropped", callersLeft(0))
}

// A caller's connection is dialled on its first request; a failed dial
// answers ServiceUnavailable and the next request dials again; a closed
// table refuses requests.
func TestCallers_DialRetriesAFailure(t *testing.T) {
	var dials atomic.Int32
	dial := func(context.Context) (*client.Client, error) {
		if dials.Add(1) == 1 {
			return nil, errors.New("refused")
		}
		return nil, nil // a real dial returns a client; nil stands for it here
	}
	cs := newCallers(Limits{}, nil, dial)
	c, _ := cs.admit("a", false)
	if _, err := cs.client(context.Background(), c); !errors.Is(err, ErrServiceUnavailable) {
		t.Fatalf("failed dial: %v, want %v", err, ErrServiceUnavailable)
	}
	if _, err := cs.client(context.Background(), c); err != nil || dials.Load() != 2 {
		t.Fatalf("second request: %v after %d dials, want a new dial", err, dials.Load())
	}
	cs.close()
	if _, err := cs.admit("a", false); !errors.Is(err, ErrServiceUnavailable) {
		t.Fatalf("request after close: %v, want %v", err, ErrServiceUnavailable)
	}
}

// A throttled request gets SQS's RequestThrottled in the shape of its
// protocol (HTTP 400, JSON __type, query-protocol XML code), keeps its
// connection open for the retry, and another access key is not
// throttled; a request that fails its signature closes its connection.
func TestServer_ThrottledInSQSShape(t *testing.T) {
	s := New(Config{Credentials: StaticCredentials{"AKIDBUSY": "busy", "AKIDOTHER": "other"},
		Limits: Limits{MaxCallerRequests: 1}})
	defer s.Close()
	if _, err := s.callers.admit("AKIDBUSY", false); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, signedAs(t, "AKIDBUSY", "busy", "ListQueues", []byte(`{}`)))
	if rec.Code != http.StatusBadRequest || errorType(t, rec) != "com.amazonaws.sqs#RequestThrottled" ||
		rec.Header().Get("x-amzn-query-error") != "RequestThrottled;Sender" {
		t.Fatalf("JSON protocol: %d %v %s, want 400 RequestThrottled", rec.Code, rec.Header(), rec.Body)
	}
	if c := rec.Header().Get("Connection"); c != "" {
		t.Fatalf("a throttled request closes its connection (Connection: %s)", c)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, signedAs(t, "AKIDBUSY", "busy", "", []byte("Action=ListQueues&Version=2012-11-05")))
	if body := rec.Body.String(); rec.Code != http.StatusBadRequest || !strings.Contains(body, "<Code>RequestThrottled</Code>") ||
		!strings.Contains(body, "<Type>Sender</Type>") {
		t.Fatalf("query protocol: %d %s, want 400 with code RequestThrottled", rec.Code, body)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, signedAs(t, "AKIDOTHER", "other", "AddPermission", []byte(`{"QueueUrl":"https://localhost/000000000000/q"}`)))
	if got := errorType(t, rec); got != "com.amazonaws.sqs#UnsupportedOperation" {
		t.Fatalf("another key's request: %s, want it to reach the action", got)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, signedAs(t, "AKIDOTHER", "wrong", "ListQueues", []byte(`{}`)))
	if errorType(t, rec) != "com.amazonaws.sqs#SignatureDoesNotMatch" || rec.Header().Get("Connection") != "close" {
		t.Fatalf("bad signature: %v %s, want SignatureDoesNotMatch with Connection: close", rec.Header(), rec.Body)
	}
	if st := s.Stats(); st.Throttled != 2 || st.Callers != 2 {
		t.Fatalf("stats %+v, want 2 throttled and 2 callers", st)
	}
}

// Limits out of range are refused, naming the field.
func TestLimits_Validate(t *testing.T) {
	if err := (Limits{}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for field, l := range map[string]Limits{
		"MaxCallers":         {MaxCallers: MaxCallersMax + 1},
		"MaxCallerRequests":  {MaxCallerRequests: MaxCallerRequestsMax + 1},
		"MaxCallerLongPolls": {MaxCallerRequests: 8, MaxCallerLongPolls: 9},
		"CallerIdleTimeout":  {CallerIdleTimeout: time.Millisecond},
	} {
		if err := l.Validate(); !errors.Is(err, ErrInvalidLimits) || !strings.Contains(err.Error(), field) {
			t.Errorf("%+v: %v, want %v naming %s", l, err, ErrInvalidLimits, field)
		}
	}
	if err := (Limits{MaxCallers: -1}).Validate(); err == nil {
		t.Error("negative MaxCallers accepted")
	}
}
