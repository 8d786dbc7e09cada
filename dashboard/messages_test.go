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
	fakeMessages.mu.Lock()
	defer fakeMessages.mu.Unlock()
	return fakeSchedules[f], nil
}

// fakeSchedules holds the fake cluster's schedules.
var fakeSchedules = map[*fakeQueues][]client.ScheduleStatus{}

// The queue page lists the queue's recurring schedules with their next
// and last ticks and counts, and says so when there are none.
func TestDashboard_QueuePageListsSchedules(t *testing.T) {
	srv, q := newTestServer(t)
	hc := &http.Client{Jar: newJar(t)}
	if _, body := get(t, hc, srv.URL+"/queues/jobs"); !strings.Contains(body, `id="no-schedules"`) {
		t.Fatalf("queue page without schedules:\n%s", body)
	}
	next := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC).UnixNano()
	fakeMessages.mu.Lock()
	fakeSchedules[q] = []client.ScheduleStatus{
		{Schedule: client.Schedule{Name: "nightly", Cron: "0 3 * * *", Priority: 4}, Next: next, Fired: 12, Skipped: 1},
		{Schedule: client.Schedule{Name: "beat", Every: 30 * time.Second, Group: "g"}, Partition: 1, Next: next, LastTick: next - int64(30*time.Second), Fired: 99},
	}
	fakeMessages.mu.Unlock()
	_, body := get(t, hc, srv.URL+"/queues/jobs")
	for _, want := range []string{`id="schedules"`, "<td>nightly</td><td>0 3 * * *</td>", "<td>beat</td><td>30s</td>",
		"2026-12-07 03:00:00Z", `<td class="num">99</td>`} {
		if !strings.Contains(body, want) {
			t.Fatalf("queue page lacks %q:\n%s", want, body)
		}
	}
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
