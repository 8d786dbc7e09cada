package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/testwait"
)

// dashAdminSecret is the cluster-admin token of the dashboard tests'
// clusters, which run with tokens on as ferryd does; dashReaderSecret
// may only receive from "orders".
const (
	dashAdminSecret  = "dash-admin-secret"
	dashReaderSecret = "dash-reader-secret"
)

// dashTokens is the token set of the dashboard tests' clusters.
func dashTokens(t *testing.T) *auth.Set {
	t.Helper()
	f := auth.File{Tokens: []auth.FileToken{
		{Name: "ops", SHA256: auth.HashSecret(dashAdminSecret), Cluster: []string{"admin"}},
		{Name: "reader", SHA256: auth.HashSecret(dashReaderSecret),
			Permissions: []auth.FilePermission{{Queues: []string{"orders"}, Actions: []string{"receive"}}}},
	}}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	set, err := auth.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// dashCluster is a 3-node cluster holding queue "orders" (2 partitions)
// with dead letters: ids o-1 and o-2 rejected, o-3 acked, o-4 and o-5
// ready.
type dashCluster struct {
	nodes []*Node
	c     *client.Client
}

func startDashCluster(t *testing.T) *dashCluster {
	t.Helper()
	set := dashTokens(t)
	nodes := testNodesIn(t, t.TempDir(), 3, func(c *Config) { c.Tokens = set })
	leader := metaLeader(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, []string{leader.ClientAddr()}, client.WithToken(dashAdminSecret))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testwait.Until(t, 20*time.Second, "queue orders created", func() bool {
		err := c.CreateQueue(ctx, "orders", client.Partitions(2))
		return err == nil || errors.Is(err, client.ErrQueueExists)
	})
	q := c.Queue("orders")
	for i := 1; i <= 5; i++ {
		if _, err := q.Send(ctx, client.Message{ID: fmt.Sprintf("o-%d", i), Group: fmt.Sprintf("g%d", i%2),
			Body: []byte(fmt.Sprintf(`{"order":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	settled := 0
	for settled < 3 {
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 10, Wait: time.Second, Consumer: "worker-a"})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			switch d.ID {
			case "o-1", "o-2":
				err = d.Reject(ctx, "bad payload")
				settled++
			case "o-3":
				err = d.Ack(ctx)
				settled++
			default:
				err = d.Nack(ctx, client.NackOptions{Delay: time.Millisecond})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return &dashCluster{nodes: nodes, c: c}
}

// follower returns a node that is not the meta leader, so pages are
// served by a node that must ask others.
func (dc *dashCluster) follower() *Node {
	for _, nd := range dc.nodes {
		if !nd.meta.isLeader() {
			return nd
		}
	}
	return dc.nodes[0]
}

func (dc *dashCluster) total(t *testing.T) client.PartitionStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st client.Stats
	var err error
	testwait.Until(t, 10*time.Second, "the stats of every partition", func() bool {
		st, err = dc.c.QueueStats(ctx, "orders")
		return err != nil || st.Err() == nil // a partition between leaders: ask again
	})
	if err == nil {
		err = st.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Total()
}

type pageClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

// newPageClient signs in to nd's admin port through the /login form with
// secret, as a browser does, and keeps the session cookie.
func newPageClient(t *testing.T, nd *Node, secret string) *pageClient {
	jar, _ := cookiejar.New(nil)
	p := &pageClient{t: t, base: "http://" + nd.HTTPAddr(), hc: &http.Client{Jar: jar, Timeout: 15 * time.Second}}
	if code, body := p.do(http.MethodPost, "/login", url.Values{"token": {secret}}); code != http.StatusOK {
		t.Fatalf("login: %d %s", code, body)
	}
	return p
}

func (p *pageClient) do(method, path string, form url.Values) (int, string) {
	p.t.Helper()
	var resp *http.Response
	var err error
	if method == http.MethodPost {
		resp, err = p.hc.PostForm(p.base+path, form)
	} else {
		resp, err = p.hc.Get(p.base + path)
	}
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var (
	csrfRe    = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	lettersRe = regexp.MustCompile(`name="letters" value="([0-9: ]+)"`)
)

// The pages hold the cluster's data without any script; a redrive goes
// through a confirmation and needs the form token.
func TestDashboard_PagesAndRedriveWithoutScript(t *testing.T) {
	dc := startDashCluster(t)
	p := newPageClient(t, dc.follower(), dashAdminSecret)

	code, body := p.do(http.MethodGet, "/", nil)
	if code != 200 || !strings.Contains(body, ">orders<") || strings.Count(body, `class="state-alive"`) != 3 {
		t.Fatalf("cluster page %d:\n%s", code, body)
	}
	testwait.Until(t, 10*time.Second, "queues page shows 2 dead", func() bool {
		_, body = p.do(http.MethodGet, "/queues", nil)
		return strings.Contains(body, `<a href="/queues/orders/dead">2</a>`)
	})
	code, body = p.do(http.MethodGet, "/queues/orders", nil)
	if code != 200 || !strings.Contains(body, "<svg") || !strings.Contains(body, "visibility timeout") {
		t.Fatalf("queue page %d:\n%s", code, body)
	}
	code, body = p.do(http.MethodGet, "/queues/orders/dead?reason=rejected", nil)
	if code != 200 || !strings.Contains(body, ">o-1<") || !strings.Contains(body, ">o-2<") || strings.Contains(body, ">o-4<") {
		t.Fatalf("dead page %d:\n%s", code, body)
	}
	if _, body := p.do(http.MethodGet, "/queues/orders/dead?id=o-2", nil); strings.Contains(body, ">o-1<") || !strings.Contains(body, ">o-2<") {
		t.Fatalf("id filter:\n%s", body)
	}
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no form token on the dead-letter page")
	}
	if code, _ := p.do(http.MethodPost, "/queues/orders/dead/confirm", url.Values{"action": {"redrive"}}); code != http.StatusForbidden {
		t.Fatalf("form without token: %d, want 403", code)
	}
	code, body = p.do(http.MethodPost, "/queues/orders/dead/confirm", url.Values{"csrf": {m[1]}, "action": {"redrive"}, "id": {"o-2"}})
	lm := lettersRe.FindStringSubmatch(body)
	if code != 200 || lm == nil || strings.Count(lm[1], ":") != 1 {
		t.Fatalf("confirm page %d:\n%s", code, body)
	}
	if got := dc.total(t).Dead; got != 2 {
		t.Fatalf("dead before the confirmation = %d, want 2 (confirm must not act)", got)
	}
	code, body = p.do(http.MethodPost, "/queues/orders/dead/apply", url.Values{"csrf": {m[1]}, "action": {"redrive"}, "letters": {lm[1]}})
	if code != 200 || !strings.Contains(body, "redrove 1 dead letters") || strings.Contains(body, ">o-2<") || !strings.Contains(body, ">o-1<") {
		t.Fatalf("after apply %d:\n%s", code, body)
	}
	if got := dc.total(t).Dead; got != 1 {
		t.Fatalf("dead after redrive = %d, want 1", got)
	}
	if code, body := p.do(http.MethodGet, "/queues/orders/dead/0/999999", nil); code != 404 || !strings.Contains(body, "not found") {
		t.Fatalf("peek of a missing letter %d:\n%s", code, body)
	}
}
