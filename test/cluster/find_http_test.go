package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/jsonview"
)

// adminRequest sends method to path on an admin port and returns the
// status and body.
func adminRequest(t *testing.T, method, url string, header http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// The admin port finds a message by id in any state and deletes it, or
// cancels it when it was never delivered: GET and DELETE
// /v1/queues/{name}/messages/{id} on any node, 404 for an id not there,
// a browser request from another origin refused and nothing deleted.
func TestCluster_AdminPortFindsAndDeletesAMessage(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	q := fc.CreateQueue("work", client.Partitions(2), client.VisibilityTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, m := range []client.Message{{ID: "held"}, {ID: "later", Delay: time.Hour}} {
		if _, err := q.Send(ctx, m); err != nil {
			t.Fatalf("Send %s: %v", m.ID, err)
		}
	}
	var held *client.Delivery
	for held == nil {
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: time.Second, Consumer: "worker-2"})
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if len(ds) == 1 {
			held = ds[0]
		}
	}
	base := "http://" + fc.HTTPAddrs()[2] + "/v1/queues/work/messages/"
	code, body := adminRequest(t, http.MethodGet, base+"held", nil)
	var found []jsonview.FoundMessage
	if code != http.StatusOK || json.Unmarshal(body, &found) != nil || len(found) != 1 || found[0].State != "leased" || found[0].Consumer != "worker-2" {
		t.Fatalf("GET held: %d %s", code, body)
	}
	if code, body := adminRequest(t, http.MethodGet, base+"nosuch", nil); code != http.StatusNotFound {
		t.Fatalf("GET of a missing id: %d %s", code, body)
	}
	if code, body := adminRequest(t, http.MethodDelete, base+"held?undelivered=1", nil); code != http.StatusNotFound {
		t.Fatalf("cancel of a delivered message: %d %s, want 404", code, body)
	}
	if code, body := adminRequest(t, http.MethodDelete, base+"held?undelivered=maybe", nil); code != http.StatusBadRequest {
		t.Fatalf("undelivered=maybe: %d %s, want 400", code, body)
	}
	if code, body := adminRequest(t, http.MethodDelete, base+"held", http.Header{"Origin": {"http://evil.example"}}); code != http.StatusForbidden {
		t.Fatalf("cross-origin delete: %d %s, want 403", code, body)
	}
	code, body = adminRequest(t, http.MethodDelete, base+"held", nil)
	var del jsonview.MessagesDeleted
	if code != http.StatusOK || json.Unmarshal(body, &del) != nil || del.Deleted != 1 {
		t.Fatalf("DELETE held: %d %s", code, body)
	}
	if err := held.Ack(ctx); !errors.Is(err, client.ErrMessageNotFound) {
		t.Fatalf("ack of a message deleted over the admin port: %v, want ErrMessageNotFound", err)
	}
	if code, body := adminRequest(t, http.MethodDelete, base+"later?undelivered=true", nil); code != http.StatusOK {
		t.Fatalf("cancel of a delayed message: %d %s", code, body)
	}
	if code, body := adminRequest(t, http.MethodDelete, base+"later", nil); code != http.StatusNotFound {
		t.Fatalf("delete of a cancelled message: %d %s, want 404", code, body)
	}
	if code, body := adminRequest(t, http.MethodGet, "http://"+fc.HTTPAddrs()[0]+"/v1/queues/nosuch/messages/x", nil); code != http.StatusNotFound {
		t.Fatalf("GET in a missing queue: %d %s, want 404", code, body)
	}
}
