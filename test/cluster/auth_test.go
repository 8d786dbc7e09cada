package cluster

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/node"
)

// grant is a tokens file entry for secret with queue permissions.
func grant(name, secret string, queues []string, actions ...string) auth.FileToken {
	return auth.FileToken{Name: name, SHA256: auth.HashSecret(secret),
		Permissions: []auth.FilePermission{{Queues: queues, Actions: actions}}}
}

// readyCount returns the ready messages of a queue, as the admin sees them.
func readyCount(t *testing.T, admin *client.Client, queue string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	return completeStats(t, ctx, admin, queue).Total().Ready
}

// A client without a token, or with an unknown one, is refused at the
// handshake with ErrUnauthorized; a token that lacks the permission
// changes nothing.
func TestCluster_ClientWithoutTokenRefused(t *testing.T) {
	c := startCluster(t, options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	for _, token := range []string{"", "not-a-token"} {
		start := time.Now()
		_, err := c.dialAs("anonymous", token, c.running()...)
		if !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("token %q: dial: %v, want ErrUnauthorized", token, err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("token %q: refusal took %v", token, time.Since(start))
		}
	}
	c.setTokens(grant("reader", "reader-secret", []string{"orders"}, "receive"))
	reader, err := c.dialAs("reader", "reader-secret", c.running()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.CreateQueue(ctx, "orders"); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("create without admin: %v, want ErrUnauthorized", err)
	}
	admin := c.dial("admin")
	if qs, err := admin.ListQueues(ctx, ""); err != nil || len(qs) != 0 {
		t.Fatalf("queues after refused create: %v, %v; want none", qs, err)
	}
	if _, err := reader.RemoveNode(ctx, "n3"); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("remove node without cluster admin: %v", err)
	}
	c.waitRegistered() // all three still in the catalog
}

// A token for orders.* can use orders.eu and cannot send to, receive
// from, peek, purge, delete, list or read the stats of billing; a
// send-only token cannot receive.
func TestCluster_TokenForQueueCannotTouchAnother(t *testing.T) {
	c := startCluster(t, options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	admin := c.dial("admin")
	for _, q := range []string{"orders.eu", "billing"} {
		if err := admin.CreateQueue(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Queue("billing").Send(ctx, client.Message{Body: []byte("invoice")}); err != nil {
		t.Fatal(err)
	}
	c.setTokens(grant("orders", "orders-secret", []string{"orders.*"}, "send", "receive"),
		grant("sender", "sender-secret", []string{"orders.eu", "billing"}, "send"))
	orders, err := c.dialAs("orders", "orders-secret", c.running()...)
	if err != nil {
		t.Fatal(err)
	}

	// Its own queues work end to end.
	if _, err := orders.Queue("orders.eu").Send(ctx, client.Message{Body: []byte("o1")}); err != nil {
		t.Fatalf("send to orders.eu: %v", err)
	}
	ds, err := orders.Queue("orders.eu").Receive(ctx, client.ReceiveOptions{Wait: 5 * time.Second})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive orders.eu: %d, %v", len(ds), err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("ack orders.eu: %v", err)
	}

	// billing is out of reach, whatever the op.
	billing := orders.Queue("billing")
	refused := map[string]error{}
	_, refused["send"] = billing.Send(ctx, client.Message{Body: []byte("x")})
	_, refused["receive"] = billing.Receive(ctx, client.ReceiveOptions{})
	_, refused["peek"] = billing.Peek(ctx, client.PeekOptions{})
	_, refused["purge"] = orders.Purge(ctx, "billing")
	_, refused["stats"] = orders.QueueStats(ctx, "billing")
	_, refused["dead letters"] = orders.DeadLetters(ctx, "billing", client.DeadFilter{})
	refused["delete"] = orders.DeleteQueue(ctx, "billing")
	refused["create"] = orders.CreateQueue(ctx, "billing2")
	_, refused["purge own"] = orders.Purge(ctx, "orders.eu") // admin needed
	for op, err := range refused {
		if !errors.Is(err, client.ErrUnauthorized) {
			t.Errorf("%s: %v, want ErrUnauthorized", op, err)
		}
	}
	qs, err := orders.ListQueues(ctx, "")
	if err != nil || len(qs) != 1 || qs[0].Name != "orders.eu" {
		t.Fatalf("list with the orders token: %+v, %v; want orders.eu only", qs, err)
	}
	if n := readyCount(t, admin, "billing"); n != 1 {
		t.Fatalf("billing has %d ready messages after the refusals, want 1", n)
	}
	if _, err := admin.QueueStats(ctx, "billing2"); !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("billing2 after a refused create: %v", err)
	}

	// A send-only token sends and cannot receive: the message stays ready.
	sender, err := c.dialAs("sender", "sender-secret", c.running()...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sender.Queue("billing").Send(ctx, client.Message{Body: []byte("invoice 2")}); err != nil {
		t.Fatalf("send-only token send: %v", err)
	}
	if _, err := sender.Queue("billing").Receive(ctx, client.ReceiveOptions{}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("send-only token receive: %v, want ErrUnauthorized", err)
	}
	if n := readyCount(t, admin, "billing"); n != 2 {
		t.Fatalf("billing has %d ready messages, want 2 (none leased)", n)
	}
}

// Reloading the tokens (what SIGHUP does) revokes a token: new connections
// are refused and requests on open connections fail.
func TestCluster_TokenReloadRevokes(t *testing.T) {
	c := startCluster(t, options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	admin := c.dial("admin")
	if err := admin.CreateQueue(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	c.setTokens(grant("worker", "worker-secret", []string{"jobs"}, "send", "receive"))
	worker, err := c.dialAs("worker", "worker-secret", c.running()...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Queue("jobs").Send(ctx, client.Message{Body: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	c.setTokens() // the worker's entry removed from the file
	if _, err := c.dialAs("worker-2", "worker-secret", c.running()...); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("dial with a revoked token: %v", err)
	}
	if _, err := worker.Queue("jobs").Send(ctx, client.Message{Body: []byte("2")}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("send on an open connection after revocation: %v", err)
	}
	if n := readyCount(t, admin, "jobs"); n != 1 {
		t.Fatalf("jobs has %d ready messages, want 1", n)
	}
}

// httpStatus GETs path on node i with the given Authorization header
// value (none when "") and returns the status code and body.
func (c *testCluster) httpStatus(i int, path, authz string, cookies ...*http.Cookie) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.url(i, path), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for _, ck := range cookies {
		req.AddCookie(ck)
	}
	resp, err := c.bareHTTP().Do(req)
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body)
}

// bareHTTP is an admin API client with the cluster's TLS and no token,
// that does not follow redirects.
func (c *testCluster) bareHTTP() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c.tls},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// The admin port wants a token: 401 without one, /metrics for a
// metrics-only token and nothing else, everything for cluster admin, a
// cookie from /login for browsers; the profiler only where -pprof is on,
// and then for cluster admin only.
func TestCluster_HTTPAdminNeedsToken(t *testing.T) {
	c := startCluster(t, options{tweak: func(cfg *node.Config) { cfg.Pprof = cfg.ID == "n1" }})
	c.setTokens(auth.FileToken{Name: "scraper", SHA256: auth.HashSecret("scraper-secret"), Cluster: []string{"metrics"}},
		grant("orders", "orders-secret", []string{"*"}, "send", "receive", "admin"))
	admin, scraper, queues := "Bearer "+c.admin, "Bearer scraper-secret", "Bearer orders-secret"
	cases := []struct {
		node       int
		path, auth string
		want       int
	}{
		{0, "/healthz", "", 200}, {0, "/readyz", "", 200},
		{0, "/v1/cluster", "", 401}, {0, "/v1/queues", "", 401}, {0, "/v1/replicas", "", 401},
		{0, "/v1/replicas/summary", "", 401}, {0, "/v1/replicas/summary", scraper, 403},
		{0, "/metrics", "", 401}, {0, "/no-such-path", "", 401}, {0, "/v1/cluster", "Bearer wrong", 401},
		{0, "/v1/cluster", "Basic " + c.admin, 401},
		{0, "/metrics", scraper, 200}, {0, "/v1/cluster", scraper, 403}, {0, "/v1/replicas", scraper, 403},
		{0, "/debug/pprof/", scraper, 403},
		{0, "/v1/cluster", queues, 403}, {0, "/metrics", queues, 403}, // queue rights are not admin-port rights
		{0, "/v1/cluster", admin, 200}, {0, "/metrics", admin, 200}, {0, "/no-such-path", admin, 404},
		{0, "/debug/pprof/", "", 401}, {0, "/debug/pprof/", admin, 200},
		{1, "/debug/pprof/", admin, 404}, {1, "/debug/pprof/", "", 401}, // -pprof off on n2
	}
	for _, tc := range cases {
		if got, body := c.httpStatus(tc.node, tc.path, tc.auth); got != tc.want {
			t.Errorf("node %d GET %s with %q: %d, want %d (%s)", tc.node, tc.path, tc.auth, got, tc.want, strings.TrimSpace(body))
		}
	}

	// A browser: GET / goes to /login, the form sets an HttpOnly,
	// SameSite=Strict cookie that then opens the admin API.
	hc := c.bareHTTP()
	resp, err := hc.Get(c.url(0, "/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("GET / without a token: %s to %q, want 303 to /login", resp.Status, resp.Header.Get("Location"))
	}
	resp, err = hc.PostForm(c.url(0, "/login"), url.Values{"token": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("login with a wrong token: %s, cookies %v", resp.Status, resp.Cookies())
	}
	resp, err = hc.PostForm(c.url(0, "/login"), url.Values{"token": {c.admin}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		session = ck
	}
	if resp.StatusCode != http.StatusSeeOther || session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || !session.Secure {
		t.Fatalf("login: %s, cookie %+v; want 303 and an HttpOnly, Secure, SameSite=Strict cookie", resp.Status, session)
	}
	if got, body := c.httpStatus(0, "/v1/cluster", "", session); got != 200 {
		t.Fatalf("GET /v1/cluster with the session cookie: %d (%s)", got, body)
	}
	if got, _ := c.httpStatus(0, "/v1/cluster", "", &http.Cookie{Name: session.Name, Value: "forged"}); got != 401 {
		t.Fatalf("GET /v1/cluster with a forged cookie: %d, want 401", got)
	}
}
