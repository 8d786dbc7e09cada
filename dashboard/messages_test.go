package dashboard

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

// fakeMessages holds the fake cluster's messages by id; the fakeQueues
// methods below find, delete and cancel them.
var fakeMessages = struct {
	mu   sync.Mutex
	byID map[*fakeQueues][]client.MessageInfo
}{byID: map[*fakeQueues][]client.MessageInfo{}}

func (f *fakeQueues) FindMessage(_ context.Context, q, id string) ([]client.MessageInfo, error) {
	if q != "jobs" {
		return nil, client.ErrQueueNotFound
	}
	fakeMessages.mu.Lock()
	defer fakeMessages.mu.Unlock()
	var out []client.MessageInfo
	for _, m := range fakeMessages.byID[f] {
		if m.ID == id {
			out = append(out, m)
		}
	}
	return out, nil
}

func (f *fakeQueues) DeleteMessage(_ context.Context, q, id string) (int, error) {
	return f.deleteMessages(q, id, false)
}

func (f *fakeQueues) ListSchedules(_ context.Context, q string) ([]client.ScheduleStatus, error) {
	if q != "jobs" {
		return nil, client.ErrQueueNotFound
	}
	return nil, nil
}

func (f *fakeQueues) CancelMessage(_ context.Context, q, id string) (int, error) {
	return f.deleteMessages(q, id, true)
}

// deleteMessages deletes the messages with id (only those never
// delivered when undelivered is set), as the client's calls do.
func (f *fakeQueues) deleteMessages(q, id string, undelivered bool) (int, error) {
	if q != "jobs" {
		return 0, client.ErrQueueNotFound
	}
	fakeMessages.mu.Lock()
	defer fakeMessages.mu.Unlock()
	var kept []client.MessageInfo
	n := 0
	for _, m := range fakeMessages.byID[f] {
		never := (m.State == "ready" || m.State == "delayed") && m.Attempts == 0
		if m.ID == id && (!undelivered || never) {
			n++
			continue
		}
		kept = append(kept, m)
	}
	fakeMessages.byID[f] = kept
	if n == 0 {
		return 0, client.ErrMessageNotFound
	}
	return n, nil
}

// The find page shows a message in every state it is found in, and its
// buttons cancel (only what was never delivered) and delete (any state)
// through CSRF-checked forms; an unknown id says none was found.
func TestDashboard_FindCancelAndDeleteAMessage(t *testing.T) {
	srv, q := newTestServer(t)
	at := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC).UnixNano()
	fakeMessages.mu.Lock()
	fakeMessages.byID[q] = []client.MessageInfo{
		{Partition: 0, Seq: 7, ID: "order-42", Group: "cust-1", State: "leased", Attempts: 2, EnqueuedAt: at, VisibleAt: at, Consumer: "worker-3"},
		{Partition: 1, Seq: 9, ID: "order-42", State: "delayed", EnqueuedAt: at, VisibleAt: at},
		{Partition: 1, Seq: 10, ID: "order-43", State: "ready", EnqueuedAt: at},
	}
	fakeMessages.mu.Unlock()
	hc := &http.Client{Jar: newJar(t)}
	if code, body := get(t, hc, srv.URL+"/queues/jobs"); code != http.StatusOK || !strings.Contains(body, `href="/queues/jobs/messages"`) {
		t.Fatalf("queue page %d has no find link:\n%s", code, body)
	}
	code, body := get(t, hc, srv.URL+"/queues/jobs/messages?id=order-42")
	if code != http.StatusOK || strings.Count(body, "<td>order-42</td>") != 2 || !strings.Contains(body, "worker-3") ||
		!strings.Contains(body, `class="state">leased`) || !strings.Contains(body, `class="state">delayed`) {
		t.Fatalf("find page %d:\n%s", code, body)
	}
	tok := body[strings.Index(body, `name="csrf" value="`)+19:]
	tok = tok[:strings.IndexByte(tok, '"')]
	post := func(action, id, csrf string) (int, string) {
		resp, err := hc.PostForm(srv.URL+"/queues/jobs/messages/delete", url.Values{"csrf": {csrf}, "action": {action}, "id": {id}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post("delete", "order-42", "forged"); code != http.StatusForbidden {
		t.Fatalf("a delete with a forged form token answered %d", code)
	}
	if code, page := post("cancel", "order-42", tok); code != http.StatusOK || !strings.Contains(page, "1 undelivered message(s) with id order-42 cancelled") ||
		strings.Contains(page, `class="state">delayed`) || !strings.Contains(page, `class="state">leased`) {
		t.Fatalf("after cancel (%d):\n%s", code, page)
	}
	if code, page := post("delete", "order-42", tok); code != http.StatusOK || !strings.Contains(page, "1 message(s) with id order-42 deleted") ||
		!strings.Contains(page, `id="none"`) {
		t.Fatalf("after delete (%d):\n%s", code, page)
	}
	if _, page := post("delete", "order-42", tok); !strings.Contains(page, "message not found") {
		t.Fatalf("deleting a deleted message:\n%s", page)
	}
	if _, page := post("explode", "order-43", tok); !strings.Contains(page, "unknown action") {
		t.Fatalf("unknown action:\n%s", page)
	}
	if found, _ := q.FindMessage(context.Background(), "jobs", "order-43"); len(found) != 1 {
		t.Fatalf("another message was touched: %v", found)
	}
}
