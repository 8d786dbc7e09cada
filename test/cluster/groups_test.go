package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
)

// Shape of the group workload.
const (
	groupCount    = 100
	perGroup      = 12
	groupSenders  = 4
	groupClients  = 2
	nackOneInEach = 10 // about one first delivery in this many is nacked
)

// TestCluster_GroupOrder runs producers that send numbered messages per
// group into a four-partition queue while two Consume loops with several
// handlers each settle them (nacking some first deliveries). Per group, at
// most one message is handled at a time, deliveries never go backwards,
// each first delivery is the next number, a retry is of the latest number,
// and every message is handled and acked.
func TestCluster_GroupOrder(t *testing.T) {
	c := startCluster(t, options{})
	admin := c.dial("groups-admin")
	// A receive whose outcome the client cannot know (a leader change
	// under load) loses its leases until they expire: keep that short.
	c.createQueue(admin, "orders", client.Partitions(4), client.VisibilityTimeout(2*time.Second),
		client.BackoffBase(20*time.Millisecond), client.BackoffMax(200*time.Millisecond))

	ck := newOrderChecker()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var consumers sync.WaitGroup
	for i := range groupClients {
		q := c.dial(fmt.Sprintf("consumer-%d", i)).Queue("orders")
		consumers.Go(func() {
			err := q.Consume(ctx, ck.handle, client.ConsumeOptions{Concurrency: 6, Prefetch: 12, Wait: 500 * time.Millisecond, AutoExtend: true})
			if err != nil {
				t.Errorf("consume: %v", err)
			}
		})
	}

	start := time.Now()
	produceGroups(t, c.dial("producer").Queue("orders"))
	t.Logf("sent %d messages in %v", groupCount*perGroup, time.Since(start))
	testwait.UntilNil(c.t, 60*time.Second, "every message acked", func() error {
		if n := ck.doneCount(); n < groupCount*perGroup {
			return fmt.Errorf("%d of %d handled", n, groupCount*perGroup)
		}
		if st := stats(t, admin, "orders"); st.Ready+st.Delayed+st.InFlight != 0 || st.Counters.Acked != groupCount*perGroup {
			return fmt.Errorf("%d ready, %d delayed, %d in flight, %d acked", st.Ready, st.Delayed, st.InFlight, st.Counters.Acked)
		}
		return nil
	})
	cancel()
	consumers.Wait()
	t.Logf("all handled in %v; %d nacks, %d leases lost before a handler got them, %d messages handled twice",
		time.Since(start), ck.nacks, ck.lost, ck.twice())
	ck.check(t)
}

// produceGroups sends perGroup numbered messages to every group. Each
// sender owns a share of the groups and sends one batch per number, so a
// group's messages go out in order, one request after the other.
func produceGroups(t *testing.T, q *client.Queue) {
	var wg sync.WaitGroup
	for w := range groupSenders {
		wg.Go(func() {
			for k := range perGroup {
				var batch []client.Message
				for g := w; g < groupCount; g += groupSenders {
					id := fmt.Sprintf("g%03d-%03d", g, k)
					batch = append(batch, client.Message{ID: id, Group: fmt.Sprintf("g%03d", g),
						Headers: map[string]string{"k": strconv.Itoa(k)}, Body: []byte(id)})
				}
				if _, err := q.SendBatch(opContext(t), batch); err != nil {
					t.Errorf("send round %d of sender %d: %v", k, w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// orderChecker records what the handlers see, per group.
type orderChecker struct {
	mu         sync.Mutex
	inFlight   map[string]int
	last       map[string]int // number of the latest delivery per group
	done       map[string]int // successful handlings per id
	nacks      int
	lost       int // redeliveries of a number no handler had seen
	violations []string
}

func newOrderChecker() *orderChecker {
	return &orderChecker{inFlight: map[string]int{}, last: map[string]int{}, done: map[string]int{}}
}

// handle is the Consume handler: it checks the delivery against its
// group's history and nacks about one first delivery in nackOneInEach.
func (ck *orderChecker) handle(_ context.Context, d *client.Delivery) error {
	k, err := strconv.Atoi(d.Headers["k"])
	if err != nil {
		return client.Reject(err)
	}
	ck.mu.Lock()
	ck.inFlight[d.Group]++
	if ck.inFlight[d.Group] > 1 {
		ck.violate("%s: two messages of the group handled at once (%s)", d.Group, d.ID)
	}
	last, seen := ck.last[d.Group]
	if !seen {
		last = -1
	}
	switch {
	case k < last:
		ck.violate("%s: delivered #%d after #%d", d.Group, k, last)
	case d.Attempt == 1 && k != last+1:
		ck.violate("%s: first delivery of #%d after #%d", d.Group, k, last)
	case d.Attempt > 1 && k == last+1:
		ck.lost++ // the earlier lease went to no handler and expired
	case d.Attempt > 1 && k != last:
		ck.violate("%s: retry of #%d (attempt %d) after #%d", d.Group, k, d.Attempt, last)
	}
	ck.last[d.Group] = k
	ck.mu.Unlock()

	runtime.Gosched() // the "work": let other handlers run meanwhile
	nack := d.Attempt == 1 && hashOf(d.ID)%nackOneInEach == 0

	ck.mu.Lock()
	defer ck.mu.Unlock()
	ck.inFlight[d.Group]--
	if nack {
		ck.nacks++
		return errors.New("transient failure")
	}
	ck.done[d.ID]++
	return nil
}

func (ck *orderChecker) violate(format string, args ...any) {
	if len(ck.violations) < 20 {
		ck.violations = append(ck.violations, fmt.Sprintf(format, args...))
	}
}

// twice returns how many messages were handled successfully more than
// once: allowed (delivery is at least once) but only after a lost lease.
func (ck *orderChecker) twice() int {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	n := 0
	for _, k := range ck.done {
		if k > 1 {
			n++
		}
	}
	return n
}

// doneCount returns how many distinct messages were handled successfully.
func (ck *orderChecker) doneCount() int {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	return len(ck.done)
}

// check reports order violations, messages handled more than once or
// never, and groups that did not reach their last number.
func (ck *orderChecker) check(t *testing.T) {
	t.Helper()
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for _, v := range ck.violations {
		t.Error(v)
	}
	if ck.nacks == 0 {
		t.Error("no delivery was nacked: the retry path went untested")
	}
	for g := range groupCount {
		group := fmt.Sprintf("g%03d", g)
		if ck.last[group] != perGroup-1 {
			t.Errorf("%s ended at #%d, want #%d", group, ck.last[group], perGroup-1)
		}
		for k := range perGroup {
			if id := fmt.Sprintf("%s-%03d", group, k); ck.done[id] == 0 {
				t.Errorf("%s never handled successfully", id)
			}
		}
	}
}

func hashOf(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}
