package dashboard

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/ferrymq/ferry/internal/testwait"
)

// fakeQueues is an in-memory cluster with one queue and its dead letters.
type fakeQueues struct {
	mu       sync.Mutex
	dead     []client.DeadLetter
	redriven []client.LetterRef
	stats    client.Stats
}

func (f *fakeQueues) ListQueues(context.Context, string) ([]client.QueueInfo, error) {
	return []client.QueueInfo{{Name: "jobs", Partitions: []client.PartitionInfo{{Index: 0, Leader: "n1"}}}}, nil
}

func (f *fakeQueues) QueueStats(_ context.Context, name string) (client.Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "jobs" {
		return client.Stats{}, client.ErrQueueNotFound
	}
	return f.stats, nil
}

func (f *fakeQueues) DeadLetters(_ context.Context, _ string, flt client.DeadFilter) ([]client.DeadLetter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []client.DeadLetter
	for _, d := range f.dead {
		if (flt.Reason == 0 || d.Reason == flt.Reason) && (flt.Group == "" || d.Group == flt.Group) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (f *fakeQueues) PeekDeadLetters(ctx context.Context, q string, flt client.DeadFilter) ([]client.DeadLetter, error) {
	all, _ := f.DeadLetters(ctx, q, client.DeadFilter{})
	var out []client.DeadLetter
	for _, d := range all {
		for _, r := range flt.Letters {
			if r == d.Ref() {
				out = append(out, d)
			}
		}
	}
	return out, nil
}

func (f *fakeQueues) RedriveDeadLetters(_ context.Context, _ string, flt client.DeadFilter) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.redriven = append(f.redriven, flt.Letters...)
	return len(flt.Letters), nil
}

func (f *fakeQueues) DeleteDeadLetters(context.Context, string, client.DeadFilter) (int, error) {
	return 0, errors.New("not in this test")
}

func (f *fakeQueues) Pause(_ context.Context, q string) (client.QueuePause, error) {
	return f.setPaused(q, true)
}

func (f *fakeQueues) Resume(_ context.Context, q string) (client.QueuePause, error) {
	return f.setPaused(q, false)
}

func (f *fakeQueues) setPaused(q string, paused bool) (client.QueuePause, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q != "jobs" {
		return client.QueuePause{}, client.ErrQueueNotFound
	}
	if len(f.stats.Partitions) == 0 {
		f.stats.Partitions = []client.PartitionStats{{Partition: 0}}
	}
	p := &f.stats.Partitions[0]
	p.Paused, p.PausedBy, p.PausedAt = paused, "", 0
	out := client.QueuePause{Partitions: 1}
	if paused {
		p.PausedBy, p.PausedAt = "oncall", time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC).UnixNano()
		out.Paused, out.By, out.At = 1, p.PausedBy, time.Unix(0, p.PausedAt)
	}
	return out, nil
}

type fakeCluster struct{ q *fakeQueues }

func (c fakeCluster) Cluster(context.Context) jsonview.Cluster {
	return jsonview.Cluster{Node: "n1", MetaLeader: "n1", Nodes: []jsonview.Node{{ID: "n1", State: "alive", HTTPAddr: "x"}}}
}

func (c fakeCluster) Replicas(context.Context, jsonview.Node, http.Header) ([]jsonview.Replica, error) {
	return nil, nil
}

func (c fakeCluster) Queues(context.Context) (Queues, error) { return c.q, nil }

func (c fakeCluster) Shape(context.Context) jsonview.Nodes {
	return jsonview.Nodes{
		Nodes: []jsonview.NodeStatus{{ID: "n1", State: "alive", Lifecycle: "draining", Replicas: 7, Leaders: 2, Leading: 3, Leaving: 1,
			Stuck: "2 of its partitions have a replica on every other available node"}},
		MovesInFlight: 1,
		Moving:        []jsonview.Moving{{Queue: "jobs", Partition: 4, Joining: []string{"n5"}, Leaving: []string{"n1"}}},
		UnderReplicated: []jsonview.UnderReplicated{{Queue: "<b>jobs</b>", Partition: 2, CaughtUp: 2, Want: 3,
			Reason: "catching up on n5"}},
		UnderReplicatedTotal: 1,
	}
}

// The cluster page shows each node's placement lifecycle and counts, the
// partitions moving and the under-replicated ones with their reason.
func TestDashboard_ClusterPageShowsNodeStatesAndMoves(t *testing.T) {
	srv, _ := newTestServer(t)
	code, body := get(t, http.DefaultClient, srv.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("cluster page: %d\n%s", code, body)
	}
	for _, want := range []string{
		`<td class="lifecycle-draining">draining <span class="warn">(2 of its partitions`,
		"<td>7</td><td>2</td><td>3</td><td>0</td><td>1</td>",
		"1 partition moving; 1 under-replicated.",
		`<td><a href="/queues/jobs">jobs</a></td><td>4</td><td>n5 </td><td>n1 </td>`,
		`&lt;b&gt;jobs&lt;/b&gt;`, "<td>catching up on n5</td>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("cluster page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("page:\n%s", body)
	}
}

func newTestServer(t *testing.T) (*httptest.Server, *fakeQueues) {
	q := &fakeQueues{}
	for i := 1; i <= 3; i++ {
		q.dead = append(q.dead, client.DeadLetter{Partition: 0, Seq: uint64(i), ID: fmt.Sprintf("job-%d", i), Group: "g",
			Reason: client.DeadRejected, ReasonText: "<script>alert(1)</script>", Body: []byte("b"), DeadAt: time.Now()})
	}
	d := New(fakeCluster{q}, slog.New(slog.DiscardHandler))
	t.Cleanup(d.Close)
	mux := http.NewServeMux()
	d.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, q
}

func get(t *testing.T, hc *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Text from the cluster is escaped, and the page forbids inline scripts.
func TestDashboard_EscapesClusterText(t *testing.T) {
	srv, _ := newTestServer(t)
	resp, err := http.Get(srv.URL + "/queues/jobs/dead")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "<script>alert") || !strings.Contains(string(b), "&lt;script&gt;") {
		t.Fatalf("reason text not escaped:\n%s", b)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("CSP %q", csp)
	}
}

// A form posted with another browser's token, from another origin, or
// with a malformed selection changes nothing.
func TestDashboard_FormsRefuseForgedAndBadRequests(t *testing.T) {
	srv, q := newTestServer(t)
	post := func(form url.Values, cookie, origin string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/queues/jobs/dead/apply", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: csrfCookie, Value: cookie})
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	d := New(fakeCluster{q}, slog.New(slog.DiscardHandler)) // another node: another secret
	defer d.Close()
	cookie := strings.Repeat("a", 32)
	form := url.Values{"action": {"redrive"}, "letters": {"0:1"}}
	form.Set("csrf", d.csrfFor(cookie))
	if code := post(form, cookie, ""); code != http.StatusForbidden {
		t.Errorf("token of another secret: %d", code)
	}
	if code := post(form, "", ""); code != http.StatusForbidden {
		t.Errorf("no cookie: %d", code)
	}
	if len(q.redriven) != 0 {
		t.Fatalf("forged forms redrove %v", q.redriven)
	}
	// With this server's token: origin and selection are still checked.
	hc := &http.Client{Jar: newJar(t)}
	_, body := get(t, hc, srv.URL+"/queues/jobs/dead")
	tok := body[strings.Index(body, `name="csrf" value="`)+19:]
	tok = tok[:strings.IndexByte(tok, '"')]
	u, _ := url.Parse(srv.URL)
	val := hc.Jar.Cookies(u)[0].Value
	form.Set("csrf", tok)
	if code := post(form, val, "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("cross-origin: %d", code)
	}
	for _, bad := range []string{"", "0:x", "64:1", "-1:2", strings.Repeat("0:1 ", deadActionMax+1)} {
		form.Set("letters", bad)
		if code := post(form, val, ""); code != http.StatusOK {
			t.Errorf("letters %q: status %d, want the error page", bad, code)
		}
	}
	if len(q.redriven) != 0 {
		t.Fatalf("bad selections redrove %v", q.redriven)
	}
	form.Set("letters", "0:2 0:3")
	if code := post(form, val, ""); code != http.StatusSeeOther && code != http.StatusOK {
		t.Errorf("good form: %d", code)
	}
	if len(q.redriven) != 2 {
		t.Fatalf("redriven %v, want 0:2 and 0:3", q.redriven)
	}
}

func TestDashboard_RingAndRates(t *testing.T) {
	var r ring
	t0 := time.Unix(0, 0)
	for i := 0; i < samplesPerQueue+10; i++ {
		r.add(Sample{At: t0.Add(time.Duration(i) * SampleInterval), Sent: uint64(i * 4), Acked: uint64(i * 2)})
	}
	ss := r.list()
	if len(ss) != samplesPerQueue || ss[0].Sent != 40 || ss[len(ss)-1].Sent != uint64((samplesPerQueue+9)*4) {
		t.Fatalf("ring holds %d samples from %d to %d", len(ss), ss[0].Sent, ss[len(ss)-1].Sent)
	}
	got := ratesOf(ss)
	if !got.Known || got.Send != 2 || got.Ack != 1 {
		t.Fatalf("rates %+v, want send 2/s ack 1/s", got)
	}
	if ratesOf(ss[:1]).Known {
		t.Fatal("one sample gives no rate")
	}
	restarted := []Sample{{At: t0, Sent: 100}, {At: t0.Add(rateWindow), Sent: 5}}
	if r := ratesOf(restarted); r.Send != 0 {
		t.Fatalf("a restarted counter gave rate %v", r.Send)
	}
}

func TestDashboard_SamplerBoundsQueues(t *testing.T) {
	s := newSampler(nil)
	for i := 0; i < sampledQueuesMax+5; i++ {
		s.record(fmt.Sprintf("q%03d", i), Sample{At: time.Now()})
	}
	if n := len(s.sampledQueues()); n != sampledQueuesMax {
		t.Fatalf("%d queues sampled, at most %d", n, sampledQueuesMax)
	}
}

func newJar(t *testing.T) http.CookieJar {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return jar
}

// A page view starts the sampling; the ring then holds the queue's
// figures.
func TestDashboard_PageViewStartsSampling(t *testing.T) {
	srv, q := newTestServer(t)
	q.mu.Lock()
	q.stats = client.Stats{Queue: "jobs", Partitions: []client.PartitionStats{{Ready: 7, Dead: 3}}}
	q.mu.Unlock()
	resp, err := http.Get(srv.URL + "/queues")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Two samples or more: the depth chart has lines.
	testwait.UntilNil(t, 10*time.Second, "a depth chart with lines", func() error {
		if _, body := get(t, http.DefaultClient, srv.URL+"/queues/jobs"); !strings.Contains(body, "<polyline") {
			return fmt.Errorf("page without a chart:\n%s", body)
		}
		return nil
	})
}

// The confirm page's Cancel link goes back to the dead letters with the
// filter the confirmation was asked with (it was encoded twice, so the
// filter was lost), values with '&', '=' and spaces included.
func TestDashboard_ConfirmCancelKeepsTheFilter(t *testing.T) {
	srv, q := newTestServer(t)
	q.dead = append(q.dead, client.DeadLetter{Partition: 0, Seq: 9, ID: "job-9", Group: "a&b=c d", Reason: client.DeadRejected, DeadAt: time.Now()})
	hc := &http.Client{Jar: newJar(t)}
	_, body := get(t, hc, srv.URL+"/queues/jobs/dead")
	tok := body[strings.Index(body, `name="csrf" value="`)+19:]
	tok = tok[:strings.IndexByte(tok, '"')]
	filter := url.Values{"reason": {"rejected"}, "group": {"a&b=c d"}, "id": {"job-9"}}
	form := url.Values{"csrf": {tok}, "action": {"redrive"}}
	for k, v := range filter {
		form[k] = v
	}
	resp, err := hc.PostForm(srv.URL+"/queues/jobs/dead/confirm", form)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("confirm page: %s\n%s", resp.Status, page)
	}
	i := strings.Index(page, `" id="cancel"`)
	if i < 0 {
		t.Fatalf("no Cancel link:\n%s", page)
	}
	start := strings.LastIndex(page[:i], `href="`) + len(`href="`)
	href := html.UnescapeString(page[start:i])
	u, err := url.Parse(href)
	if err != nil {
		t.Fatalf("Cancel href %q: %v", href, err)
	}
	if u.Path != "/queues/jobs/dead" {
		t.Fatalf("Cancel goes to %q", u.Path)
	}
	for k := range filter {
		if got := u.Query().Get(k); got != filter.Get(k) {
			t.Errorf("Cancel link %q: %s = %q, want %q", href, k, got, filter.Get(k))
		}
	}
	// Following it shows the filtered page.
	code, back := get(t, hc, srv.URL+href)
	if code != http.StatusOK || !strings.Contains(back, `value="job-9"`) || !strings.Contains(back, `value="a&amp;b=c d"`) {
		t.Fatalf("Cancel page %d does not keep the filter:\n%s", code, back)
	}
}

// The queue page pauses and resumes deliveries with a form, and says who
// paused the queue and since when.
func TestDashboard_PauseAndResumeAQueue(t *testing.T) {
	srv, q := newTestServer(t)
	hc := &http.Client{Jar: newJar(t)}
	csrf := func() string {
		_, body := get(t, hc, srv.URL+"/queues/jobs")
		tok := body[strings.Index(body, `name="csrf" value="`)+19:]
		return tok[:strings.IndexByte(tok, '"')]
	}
	post := func(action string) string {
		resp, err := hc.PostForm(srv.URL+"/queues/jobs/pause", url.Values{"csrf": {csrf()}, "action": {action}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s\n%s", action, resp.Status, b)
		}
		return string(b)
	}
	page := post("pause")
	if !strings.Contains(page, `id="paused"`) || !strings.Contains(page, "by oncall since 2026-12-06 05:00:00Z") ||
		!strings.Contains(page, `id="resume"`) || !strings.Contains(page, "deliveries paused on 1 of 1 partitions") {
		t.Fatalf("page after pause:\n%s", page)
	}
	page = post("resume")
	if strings.Contains(page, `id="paused"`) || !strings.Contains(page, `id="pause"`) || !strings.Contains(page, "deliveries resumed") {
		t.Fatalf("page after resume:\n%s", page)
	}
	if page := post("explode"); !strings.Contains(page, "unknown action") {
		t.Fatalf("unknown action:\n%s", page)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stats.Partitions[0].Paused {
		t.Fatal("queue left paused")
	}
}
