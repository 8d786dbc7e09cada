package dashboard

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

// fakeLive holds the fake cluster's live messages; the fakeQueues methods
// below peek at them and delete them by filter.
var fakeLive = struct {
	mu   sync.Mutex
	msgs map[*fakeQueues][]client.PeekedMessage
}{msgs: map[*fakeQueues][]client.PeekedMessage{}}

// matches is the filter's test on one fake message.
func matches(f client.MessageFilter, m client.PeekedMessage) bool {
	states := f.States
	if len(states) == 0 {
		states = []string{client.StateReady}
	}
	return (slices.Contains(states, m.State) || slices.Contains(states, client.StateAll)) &&
		(f.Group == "" || f.Group == m.Group) && (f.HeaderKey == "" || m.Headers[f.HeaderKey] == f.HeaderValue) &&
		(f.OlderThan == 0 || time.Since(m.EnqueuedAt) >= f.OlderThan)
}

func (f *fakeQueues) PeekMessages(_ context.Context, q string, opts client.PeekOptions) ([]client.PeekedMessage, error) {
	if q != "jobs" {
		return nil, client.ErrQueueNotFound
	}
	fakeLive.mu.Lock()
	defer fakeLive.mu.Unlock()
	var out []client.PeekedMessage
	for _, m := range fakeLive.msgs[f] {
		if matches(opts.MessageFilter, m) && len(out) < opts.Max {
			out = append(out, m)
		}
	}
	return out, nil
}

func (f *fakeQueues) DeleteMatching(_ context.Context, q string, flt client.MessageFilter, dryRun bool) (client.DeleteMatchingResult, error) {
	var res client.DeleteMatchingResult
	if q != "jobs" {
		return res, client.ErrQueueNotFound
	}
	fakeLive.mu.Lock()
	defer fakeLive.mu.Unlock()
	var kept []client.PeekedMessage
	for _, m := range fakeLive.msgs[f] {
		if !matches(flt, m) {
			kept = append(kept, m)
			continue
		}
		res.Matched++
		res.Sample = append(res.Sample, client.MatchedMessage{Partition: m.Partition, Seq: m.Seq, ID: m.ID, State: m.State})
		if dryRun {
			kept = append(kept, m)
		} else {
			res.Deleted++
		}
	}
	fakeLive.msgs[f] = kept
	return res, nil
}

// The messages page lists a filtered peek (leased with their holder);
// "delete every matching message" goes through a confirm page with the
// count that changes nothing, and a CSRF-checked apply that deletes
// exactly the matching messages; a bad filter is refused with its name.
func TestDashboard_BrowseAndDeleteMatching(t *testing.T) {
	srv, q := newTestServer(t)
	old := time.Now().Add(-time.Hour)
	fakeLive.mu.Lock()
	fakeLive.msgs[q] = []client.PeekedMessage{
		{Partition: 0, Seq: 1, ID: "a-1", Group: "acct-a", State: client.StateLeased, Consumer: "worker-3", EnqueuedAt: old,
			VisibleAt: time.Now().Add(time.Minute)},
		{Partition: 0, Seq: 2, ID: "a-2", Group: "acct-a", State: client.StateReady, EnqueuedAt: old, Body: []byte("two")},
		{Partition: 0, Seq: 3, ID: "b-1", Group: "acct-b", State: client.StateReady, EnqueuedAt: time.Now()},
	}
	fakeLive.mu.Unlock()
	hc := &http.Client{Jar: newJar(t)}
	if code, body := get(t, hc, srv.URL+"/queues/jobs"); code != http.StatusOK || !strings.Contains(body, `href="/queues/jobs/browse"`) {
		t.Fatalf("queue page %d has no messages link:\n%s", code, body)
	}
	code, body := get(t, hc, srv.URL+"/queues/jobs/browse")
	if code != http.StatusOK || !strings.Contains(body, "a-2") || strings.Contains(body, "a-1") {
		t.Fatalf("default listing (ready only) %d:\n%s", code, body)
	}
	code, body = get(t, hc, srv.URL+"/queues/jobs/browse?state=all&group=acct-a")
	if code != http.StatusOK || !strings.Contains(body, "worker-3") || !strings.Contains(body, `class="state">leased`) || strings.Contains(body, "b-1") {
		t.Fatalf("group acct-a in every state %d:\n%s", code, body)
	}
	if _, body := get(t, hc, srv.URL+"/queues/jobs/browse?state=dead"); !strings.Contains(body, `state &#34;dead&#34;`) {
		t.Fatalf("a bad state is not named:\n%s", body)
	}
	tok := body[strings.Index(body, `name="csrf" value="`)+19:]
	tok = tok[:strings.IndexByte(tok, '"')]
	post := func(path string, form url.Values) (int, string) {
		resp, err := hc.PostForm(srv.URL+"/queues/jobs/browse/"+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	filter := url.Values{"csrf": {tok}, "state": {"all"}, "group": {"acct-a"}, "older_than": {"30m"}}
	code, page := post("confirm", filter)
	if code != http.StatusOK || !strings.Contains(page, "Delete <b>2</b> message(s)") || !strings.Contains(page, `id="confirm"`) {
		t.Fatalf("confirm page %d:\n%s", code, page)
	}
	if ms, _ := q.PeekMessages(context.Background(), "jobs", client.PeekOptions{Max: 10, MessageFilter: client.MessageFilter{States: []string{"all"}}}); len(ms) != 3 {
		t.Fatalf("the confirm page deleted: %d left", len(ms))
	}
	forged := url.Values{"csrf": {"forged"}, "state": {"all"}}
	if code, _ := post("apply", forged); code != http.StatusForbidden {
		t.Fatalf("an apply with a forged token answered %d", code)
	}
	code, page = post("apply", filter)
	if code != http.StatusOK || !strings.Contains(page, "deleted 2 of 2 matching messages") {
		t.Fatalf("after apply (%d):\n%s", code, page)
	}
	ms, _ := q.PeekMessages(context.Background(), "jobs", client.PeekOptions{Max: 10, MessageFilter: client.MessageFilter{States: []string{"all"}}})
	if len(ms) != 1 || ms[0].ID != "b-1" {
		t.Fatalf("left after the delete: %+v", ms)
	}
}
