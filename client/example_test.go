package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
)

// startExampleCluster starts an in-process stand-in for a three-node Ferry
// cluster, so that the examples run anywhere.
func startExampleCluster() *fakeCluster { return newFake(nil, 3) }

func Example() {
	cluster := startExampleCluster()
	defer cluster.Close()
	ctx := context.Background()

	c, err := client.Dial(ctx, cluster.Addrs(), client.WithClientName("example"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateQueue(ctx, "orders", client.Partitions(4)); err != nil {
		log.Fatal(err)
	}

	orders := c.Queue("orders")
	if _, err := orders.Send(ctx, client.Message{Group: "customer-42", Body: []byte("2 coffees")}); err != nil {
		log.Fatal(err)
	}
	ds, err := orders.Receive(ctx, client.ReceiveOptions{Max: 10, Wait: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range ds {
		fmt.Printf("%s (attempt %d)\n", d.Body, d.Attempt)
		if err := d.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// 2 coffees (attempt 1)
}

func ExampleQueue_Send() {
	cluster := startExampleCluster()
	defer cluster.Close()
	ctx := context.Background()
	c, err := client.Dial(ctx, cluster.Addrs())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateQueue(ctx, "payments"); err != nil {
		log.Fatal(err)
	}

	// The id makes the send idempotent: a repeat within the dedup window
	// is answered with the original sequence number.
	msg := client.Message{ID: "payment-1001", Body: []byte(`{"amount": 12}`)}
	for range 2 {
		res, err := c.Queue("payments").Send(ctx, msg)
		if errors.Is(err, client.ErrUnconfirmed) {
			continue // unknown outcome: sending again with the same id is safe
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("seq %d duplicate %v\n", res.Seq, res.Duplicate)
	}
	// Output:
	// seq 1 duplicate false
	// seq 1 duplicate true
}

func ExampleQueue_Consume() {
	cluster := startExampleCluster()
	defer cluster.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.Dial(ctx, cluster.Addrs())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateQueue(ctx, "emails"); err != nil {
		log.Fatal(err)
	}
	emails := c.Queue("emails")
	for _, to := range []string{"ann@example.com", "not-an-address", "bob@example.com"} {
		if _, err := emails.Send(ctx, client.Message{Body: []byte(to)}); err != nil {
			log.Fatal(err)
		}
	}

	handled := 0
	err = emails.Consume(ctx, func(ctx context.Context, d *client.Delivery) error {
		if handled++; handled == 3 {
			defer cancel() // stop after three messages
		}
		to := string(d.Body)
		if !strings.Contains(to, "@") {
			return client.Reject(fmt.Errorf("bad address %q", to)) // dead-letter it
		}
		fmt.Println("sent to", to)
		return nil // ack
	}, client.ConsumeOptions{})
	if err != nil {
		log.Fatal(err)
	}

	dead, err := c.DeadLetters(context.Background(), "emails", client.DeadFilter{})
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range dead {
		fmt.Println("dead:", l.ReasonText)
	}
	// Output:
	// sent to ann@example.com
	// sent to bob@example.com
	// dead: bad address "not-an-address"
}

func ExampleClient_CreateQueue() {
	cluster := startExampleCluster()
	defer cluster.Close()
	ctx := context.Background()
	c, err := client.Dial(ctx, cluster.Addrs())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	err = c.CreateQueue(ctx, "jobs",
		client.Partitions(8),
		client.VisibilityTimeout(time.Minute),
		client.MaxReceives(0), // 0: no limit; settings not named take their defaults
	)
	if err != nil {
		log.Fatal(err)
	}
	qs, err := c.ListQueues(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range qs {
		fmt.Printf("%s: %d partitions, visibility %v, max receives %d, dedup window %v\n",
			q.Name, q.Config.Partitions, q.Config.VisibilityTimeout, q.Config.MaxReceives, q.Config.DedupWindow)
	}
	// Output:
	// jobs: 8 partitions, visibility 1m0s, max receives 0, dedup window 5m0s
}
