// Package orders is a small example service built on Ferry: an HTTP-less
// order intake that queues each order once (its id is the message id, so
// a retried request is not queued twice) and a worker that fulfils them,
// stopping softly on deploys. Its tests run against an in-process cluster
// from package ferrytest, as a service's own tests would.
package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Order is what the intake queues.
type Order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// Intake queues orders.
type Intake struct{ q *client.Queue }

// NewIntake returns an intake that queues to q.
func NewIntake(q *client.Queue) *Intake { return &Intake{q: q} }

// Place queues o. Placing the same order id again within the queue's
// dedup window queues nothing and reports duplicate.
func (in *Intake) Place(ctx context.Context, o Order) (duplicate bool, err error) {
	body, err := json.Marshal(o)
	if err != nil {
		return false, err
	}
	r, err := in.q.Send(ctx, client.Message{ID: "order-" + o.ID, Body: body})
	if err != nil {
		return false, fmt.Errorf("place order %s: %w", o.ID, err)
	}
	return r.Duplicate, nil
}

// Worker fulfils queued orders with Fulfil until stopped.
type Worker struct {
	Queue *client.Queue
	// Fulfil does the work of one order; an error retries it later.
	Fulfil func(ctx context.Context, o Order) error
	// Concurrency is the number of orders fulfilled at once.
	Concurrency int
	// Grace is how long a soft stop waits for orders in progress.
	Grace time.Duration
	// OnSettle, when set, sees each ack or nack and whether it failed.
	OnSettle func(client.SettleOutcome)
}

// Run consumes until ctx is done (a hard stop) or stop is closed (a soft
// stop: orders in progress finish, orders not started go back to the
// queue for the next worker without spending an attempt).
func (w *Worker) Run(ctx context.Context, stop <-chan struct{}) error {
	return w.Queue.Consume(ctx, func(ctx context.Context, d *client.Delivery) error {
		var o Order
		if err := json.Unmarshal(d.Body, &o); err != nil {
			return client.Reject(errors.New("not an order"))
		}
		return w.Fulfil(ctx, o)
	}, client.ConsumeOptions{
		Concurrency: w.Concurrency, Prefetch: 2 * max(w.Concurrency, 1), Wait: time.Second,
		Stop: stop, GracePeriod: w.Grace, OnSettle: w.OnSettle, AutoExtend: true,
	})
}
