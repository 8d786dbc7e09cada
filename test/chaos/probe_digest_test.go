package chaos

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// tickingReplica serves /v1/replicas/{group}/digest?at=N as a replica of
// a group that applies one entry every step: 409 with its applied index
// once past N, the digest of N once it applies N, 504 after the wait.
type tickingReplica struct {
	mu      sync.Mutex
	applied uint64
	reached *sync.Cond
}

func newTickingReplica(t *testing.T, start uint64, step time.Duration) (*tickingReplica, *httptest.Server) {
	r := &tickingReplica{applied: start}
	r.reached = sync.NewCond(&r.mu)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(step)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				r.mu.Lock()
				r.applied++
				r.reached.Broadcast()
				r.mu.Unlock()
			}
		}
	}()
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() { close(done); srv.Close() })
	return r, srv
}

func (r *tickingReplica) serve(w http.ResponseWriter, req *http.Request) {
	at, _ := strconv.ParseUint(req.URL.Query().Get("at"), 10, 64)
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.applied < at {
		r.reached.Wait()
	}
	if r.applied > at {
		http.Error(w, fmt.Sprintf("digest passed: asked for %d, applied %d", at, r.applied), http.StatusConflict)
		return
	}
	fmt.Fprintf(w, `{"digest": "d%d"}`, at)
}

// The digests are compared at one index even when the view the
// comparison starts from is stale and the group keeps applying entries:
// after a 409 the next try asks a little past the index the replica gave.
// Asking a fixed two entries past the stale view, the leader (ten entries
// ahead of the view by then) answered 409 on every try.
func TestAgreeAtIndex_StaleViewOfATickingGroup(t *testing.T) {
	c := &Cluster{httpc: &http.Client{}, scheme: "http"}
	var reps []nodeReplica
	for i, start := range []uint64{110, 109, 109} { // the leader first, a little ahead
		_, srv := newTickingReplica(t, start, 40*time.Millisecond)
		id := fmt.Sprintf("n%d", i+1)
		c.Nodes = append(c.Nodes, &Node{ID: id, HTTPAddr: strings.TrimPrefix(srv.URL, "http://")})
		// The view was read when the group stood ten entries earlier.
		reps = append(reps, nodeReplica{id, ReplicaStatus{Group: "q1-0", AppliedIndex: start - 10}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cv Convergence
	c.agreeAtIndex(ctx, reps, &cv)
	if !cv.Agreed {
		t.Fatalf("replicas of one history did not agree: %v", cv.Replicas)
	}
}
