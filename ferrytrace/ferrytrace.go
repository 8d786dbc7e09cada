// Package ferrytrace carries OpenTelemetry trace context through Ferry
// message headers, as W3C Trace Context (the traceparent and tracestate
// headers), so that a consumer's spans join the producer's trace.
//
//	// producer
//	m := client.Message{Body: body}
//	ferrytrace.Inject(ctx, &m)
//	_, err := q.Send(ctx, m)
//
//	// consumer
//	err := q.Consume(ctx, ferrytrace.Handler(func(ctx context.Context, d *client.Delivery) error {
//		ctx, span := tracer.Start(ctx, "handle order") // a child of the producer's span
//		defer span.End()
//		...
//	}), opts)
//
// It lives apart from package client so that the client keeps no
// dependency beyond the standard library; services that trace import it.
package ferrytrace

import (
	"context"

	"go.opentelemetry.io/otel/propagation"

	"github.com/ferrymq/ferry/client"
)

// Propagator is what Inject and Extract use: W3C Trace Context
// (traceparent, tracestate). Replace it (before use, not concurrently)
// with otel.GetTextMapPropagator() or a composite to carry baggage too.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Inject writes the trace context of ctx into m's headers, creating the
// map if needed. Without a valid span in ctx it writes nothing.
func Inject(ctx context.Context, m *client.Message) {
	if m.Headers == nil {
		m.Headers = map[string]string{}
	}
	Propagator.Inject(ctx, propagation.MapCarrier(m.Headers))
	if len(m.Headers) == 0 {
		m.Headers = nil
	}
}

// Extract returns ctx with the remote span context carried in d's
// headers, or ctx unchanged when they carry none (or a malformed one).
func Extract(ctx context.Context, d *client.Delivery) context.Context {
	if len(d.Headers) == 0 {
		return ctx
	}
	return Propagator.Extract(ctx, propagation.MapCarrier(d.Headers))
}

// Handler wraps a Consume handler so that its context carries the
// delivery's trace context.
func Handler(h func(context.Context, *client.Delivery) error) func(context.Context, *client.Delivery) error {
	return func(ctx context.Context, d *client.Delivery) error {
		return h(Extract(ctx, d), d)
	}
}
