package cluster

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/syncbuf"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/node"
)

// TestCluster_DeadLettersStopAtTheirCap: under max_dead the oldest dead
// letters go, and never silently: the eviction is counted in the stats
// and the metrics and logged by the partition's leader.
func TestCluster_DeadLettersStopAtTheirCap(t *testing.T) {
	var logs syncbuf.Buffer
	c := startCluster(t, options{logs: &logs})
	cl := c.dial("bounds")
	c.createQueue(cl, "capped", client.MaxDead(3))
	q := cl.Queue("capped")
	for i := range 5 {
		mustSend(t, q, client.Message{ID: fmt.Sprintf("m%d", i), Body: []byte("poison")})
		d := receiveOne(t, q, client.ReceiveOptions{Wait: time.Second, Consumer: "w"})
		if err := d.Reject(opContext(t), "bad"); err != nil {
			t.Fatal(err)
		}
	}
	st := stats(t, cl, "capped")
	if st.Dead != 3 || st.Counters.DeadLettered != 5 || st.Counters.DeadEvicted != 2 {
		t.Fatalf("dead %d, dead-lettered %d, evicted %d; want 3, 5, 2", st.Dead, st.Counters.DeadLettered, st.Counters.DeadEvicted)
	}
	ls, err := cl.DeadLetters(opContext(t), "capped", client.DeadFilter{})
	if err != nil || len(ls) != 3 || ls[0].ID != "m2" {
		t.Fatalf("dead letters %+v (%v); want m2, m3, m4", ls, err)
	}
	testwait.UntilNil(c.t, waitLong, "the eviction log line", func() error {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "dead letters deleted") && strings.Contains(line, "queue=capped") &&
				strings.Contains(line, "partition=0") && strings.Contains(line, "count=") {
				return nil
			}
		}
		return errors.New("no eviction log line yet")
	})
	testwait.UntilNil(c.t, waitLong, "the dead_evicted metric", func() error {
		want := `ferry_partition_events_total{event="dead_evicted",partition="0",queue="capped"} 2`
		for _, i := range c.running() {
			if body, err := c.metricsText(i); err == nil && strings.Contains(body, want) {
				return nil
			}
		}
		return fmt.Errorf("no node exports %s", want)
	})
}

// metricsText returns node i's /metrics page.
func (c *testCluster) metricsText(i int) (string, error) {
	resp, err := c.http.Get(c.url(i, "/metrics"))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return string(b), err
}

// TestCluster_QueueCountIsCapped: creates past the cluster's queue limit
// fail with a stable error and create nothing; a delete makes room.
func TestCluster_QueueCountIsCapped(t *testing.T) {
	c := startCluster(t, options{tweak: func(cfg *node.Config) { cfg.MaxQueues = 2 }})
	cl := c.dial("caps")
	c.createQueue(cl, "a")
	c.createQueue(cl, "b")
	err := cl.CreateQueue(opContext(t), "c")
	if !errors.Is(err, client.ErrLimitExceeded) {
		t.Fatalf("third create: %v, want ErrLimitExceeded", err)
	}
	if qs, err := cl.ListQueues(opContext(t), ""); err != nil || len(qs) != 2 {
		t.Fatalf("list: %d queues (%v), want 2", len(qs), err)
	}
	if err := cl.DeleteQueue(opContext(t), "a"); err != nil {
		t.Fatal(err)
	}
	c.createQueue(cl, "c")
}
