package ferrytrace_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/ferrytrace"
)

// TestTraceContextSurvivesSendReceive sends a message from inside a span
// on a real cluster and checks that the consumer's span is a child of it
// in the same trace.
func TestTraceContextSurvivesSendReceive(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	q := fc.CreateQueue("traced")
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("ferrytrace-test")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pctx, send := tracer.Start(ctx, "send")
	m := client.Message{ID: "t1", Body: []byte("hello"), Headers: map[string]string{"kind": "greeting"}}
	ferrytrace.Inject(pctx, &m)
	if _, err := q.Send(pctx, m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	send.End()
	if m.Headers["traceparent"] == "" {
		t.Fatalf("headers %v: no traceparent", m.Headers)
	}

	handled := make(chan trace.SpanContext, 1)
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- fc.Dial().Queue("traced").Consume(cctx, ferrytrace.Handler(func(hctx context.Context, d *client.Delivery) error {
			if d.Headers["kind"] != "greeting" {
				return errors.New("own header lost")
			}
			_, span := tracer.Start(hctx, "handle")
			defer span.End()
			handled <- span.SpanContext()
			return nil
		}), client.ConsumeOptions{Wait: time.Second})
	}()
	var got trace.SpanContext
	select {
	case got = <-handled:
	case <-ctx.Done():
		t.Fatal("message not handled")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	want := send.SpanContext()
	if got.TraceID() != want.TraceID() {
		t.Fatalf("consumer trace %s, producer trace %s", got.TraceID(), want.TraceID())
	}
	var parent trace.SpanContext
	for _, s := range spans.Ended() {
		if s.Name() == "handle" {
			parent = s.Parent()
		}
	}
	if parent.SpanID() != want.SpanID() || !parent.IsRemote() {
		t.Fatalf("handle span's parent %v, want the remote send span %s", parent, want.SpanID())
	}
}

func TestExtractWithoutHeadersKeepsContext(t *testing.T) {
	ctx := context.Background()
	if got := ferrytrace.Extract(ctx, &client.Delivery{}); got != ctx {
		t.Fatal("Extract changed a context for a delivery without headers")
	}
	m := client.Message{}
	ferrytrace.Inject(ctx, &m)
	if m.Headers != nil {
		t.Fatalf("Inject without a span wrote %v", m.Headers)
	}
	bad := &client.Delivery{Headers: map[string]string{"traceparent": "00-zz-yy-01"}}
	if sc := trace.SpanContextFromContext(ferrytrace.Extract(ctx, bad)); sc.IsValid() {
		t.Fatalf("malformed traceparent gave span context %v", sc)
	}
}
