package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ferrymq/ferry/client"
)

// A deploy stops a consumer softly: closing Stop ends receiving, lets the
// running handler finish and be acked, and gives unstarted deliveries back
// without spending an attempt. OnSettle sees every settle and its error.
func ExampleQueue_Consume_softStop() {
	cluster := startExampleCluster()
	defer cluster.Close()
	ctx := context.Background()
	c, err := client.Dial(ctx, cluster.Addrs())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateQueue(ctx, "emails"); err != nil {
		log.Fatal(err)
	}
	q := c.Queue("emails")
	for _, id := range []string{"welcome", "receipt"} {
		if _, err := q.Send(ctx, client.Message{ID: id}); err != nil {
			log.Fatal(err)
		}
	}

	stop := make(chan struct{}) // closed by the service on SIGTERM
	err = q.Consume(ctx, func(ctx context.Context, d *client.Delivery) error {
		fmt.Println("sending", d.ID)
		if d.ID == "receipt" {
			close(stop) // the deploy begins while this handler runs
		}
		return nil
	}, client.ConsumeOptions{
		Prefetch: 1, // one lease at a time, so that each ack is printed before the next message
		Wait:     time.Second, Stop: stop, GracePeriod: 30 * time.Second,
		OnSettle: func(o client.SettleOutcome) {
			fmt.Println(o.Action, o.Delivery.ID, "error:", o.Err)
		},
	})
	fmt.Println("consumer stopped:", err)
	// Output:
	// sending welcome
	// ack welcome error: <nil>
	// sending receipt
	// ack receipt error: <nil>
	// consumer stopped: <nil>
}
