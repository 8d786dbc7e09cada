// Package client is the Go client library of Ferry, a replicated
// work-queue broker. It speaks Ferry's client protocol (package wire) to
// the nodes of a cluster: it finds the leader of each queue partition and
// talks to it directly, follows leader changes, and retries what can be
// retried safely.
//
// # Usage
//
//	c, err := client.Dial(ctx, []string{"10.0.0.1:7101", "10.0.0.2:7101"})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//
//	orders := c.Queue("orders")
//	if _, err := orders.Send(ctx, client.Message{Group: "customer-42", Body: order}); err != nil {
//		return err // errors.Is(err, client.ErrUnconfirmed): resend with the same id
//	}
//
//	// Process messages until ctx is done: nil acks, an error nacks (retry
//	// with backoff), client.Reject(err) dead-letters.
//	return orders.Consume(ctx, func(ctx context.Context, d *client.Delivery) error {
//		return handle(ctx, d.Body)
//	}, client.ConsumeOptions{Concurrency: 4, AutoExtend: true})
//
// # Guarantees
//
// A send returns success only once the server confirmed that a majority of
// the partition's replicas stored the message. Every message gets an id
// before its first attempt (the caller's, or a fresh time-ordered one) and
// keeps it on every retry, so a retried send is deduplicated by the
// server. When the client gives up on a send whose outcome it cannot know
// (connection lost after the request was written, server timeout, context
// done while waiting) it returns an error wrapping ErrUnconfirmed.
//
// Received leases are never dropped by the client and never left to
// expire unseen: answers that arrive after a Receive returned go to a
// Receive waiting right now, or wait in the Queue's buffer for the next
// one while at least half their remaining lease is left, and are
// otherwise released, which does not count as a delivery attempt.
//
// Consume stops softly when ConsumeOptions.Stop is closed (a deploy): it
// stops receiving, releases prefetched deliveries no handler started, and
// lets running handlers finish within ConsumeOptions.GracePeriod, so a
// restart spends no delivery attempt. Cancelling its context is the hard
// stop. ConsumeOptions.OnSettle reports every settle and whether it failed.
// Companion packages, kept apart so that this one depends on nothing else:
// outbox (a transactional outbox on database/sql), ferrytest (a real
// in-process cluster for tests) and ferrytrace (trace context in headers).
//
// Every error a call returns matches one of the package's exported errors
// with errors.Is, and its text names its kind once.
//
// # Connections and retries
//
// The client keeps one connection per node, with requests pipelined on it
// and answered in any order; a lost connection fails its requests and is
// dialed again on next use. Requests go to the partition's leader as the
// cached metadata names it; a "not leader" answer is followed to the
// leader it names, or makes the client reload the metadata. Not leader,
// unavailable, lost connections and server timeouts are retried with
// exponential backoff until the call's context is done. Every call takes a
// context and returns promptly when it is cancelled.
//
// # What the package must never do
//
//   - import any Ferry package other than wire (and nothing outside the
//     standard library besides it);
//   - report success for a send the server has not confirmed;
//   - change a message's id between attempts, or assign a new one on retry;
//   - hand out a lease after its deadline, or repeat a release whose
//     outcome is unknown (it could release a newer delivery).
package client
