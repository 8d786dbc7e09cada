package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/jsonview"
)

// GET /v1/replicas/{group}/digest?at=N on each node gives its replica's
// digest right after it applied entry N, waiting for it: asked for the
// next entry before it exists, every node answers once a send makes it,
// with one digest. An index passed answers 409, an unknown group 404, a
// bad index 400.
func TestCluster_ReplicaDigestAtOneIndex(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	q := fc.CreateQueue("dg", client.Partitions(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := q.Send(ctx, client.Message{ID: "a", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	var group string
	var top uint64
	for _, a := range fc.HTTPAddrs() {
		code, body := adminRequest(t, http.MethodGet, "http://"+a+"/v1/replicas", nil)
		var rs []jsonview.Replica
		if code != http.StatusOK || json.Unmarshal(body, &rs) != nil || len(rs) != 1 {
			t.Fatalf("/v1/replicas: %d %s", code, body)
		}
		group, top = rs[0].Group, max(top, rs[0].AppliedIndex)
	}
	at := top + 1
	digests := make(chan string, 3)
	for _, a := range fc.HTTPAddrs() {
		go func() {
			code, body := adminRequest(t, http.MethodGet, fmt.Sprintf("http://%s/v1/replicas/%s/digest?at=%d&wait=20s", a, group, at), nil)
			var d jsonview.ReplicaDigest
			if code != http.StatusOK || json.Unmarshal(body, &d) != nil || d.AppliedIndex != at || len(d.Digest) != 64 {
				digests <- fmt.Sprintf("%d %s", code, body)
				return
			}
			digests <- d.Digest
		}()
	}
	if _, err := q.Send(ctx, client.Message{ID: "b", Body: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	first := <-digests
	for range 2 {
		if d := <-digests; d != first {
			t.Fatalf("digests at %d differ: %q and %q", at, first, d)
		}
	}
	base := "http://" + fc.HTTPAddrs()[0] + "/v1/replicas/"
	for _, tc := range []struct {
		path string
		want int
	}{
		{group + "/digest?at=1", http.StatusConflict},
		{"nosuch/digest?at=5", http.StatusNotFound},
		{group + "/digest?at=zero", http.StatusBadRequest},
		{group + "/digest?at=5&wait=1h", http.StatusBadRequest},
		{fmt.Sprintf("%s/digest?at=%d&wait=100ms", group, at+1000), http.StatusGatewayTimeout},
	} {
		if code, body := adminRequest(t, http.MethodGet, base+tc.path, nil); code != tc.want {
			t.Fatalf("GET %s: %d %s, want %d", tc.path, code, body, tc.want)
		}
	}
}
