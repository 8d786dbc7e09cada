package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/dashboard"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/wire"
)

// replicasAnswerBytesMax bounds another node's /v1/replicas answer read
// for the dashboard.
const replicasAnswerBytesMax = 8 << 20

// dashboardSource gives the dashboard this node's view of the cluster and
// a client of it. The client dials this node's own client port and is
// opened on first use, then kept until the node closes.
type dashboardSource struct {
	self       string            // this node's id
	clientAddr string            // this node's client port, which the clients dial
	tls        *tlsconf.Material // nil when the node runs in plaintext
	node       dashboardNode
	http       *http.Client

	mu sync.Mutex
	// clients holds one client per viewer token (the dashboard acts with
	// the token of whoever looks at it, so it can do no more than they
	// can), at most dashboardClientsMax, oldest first in order.
	clients map[string]*client.Client
	order   []string
	// last is the token of the latest viewer: background sampling, which
	// has no viewer of its own, uses it.
	last   string
	closed bool
}

// dashboardClientsMax bounds the clients the dashboard keeps open.
const dashboardClientsMax = 4

// viewerTokenKey carries the viewer's token in a request's context.
type viewerTokenKey struct{}

// withViewerToken returns ctx carrying the token the HTTP request
// authenticated with.
func withViewerToken(ctx context.Context, secret string) context.Context {
	return context.WithValue(ctx, viewerTokenKey{}, secret)
}

// dashboardNode is what the dashboard reads of its node.
type dashboardNode interface {
	// handleMetadata answers a metadata request from the node's catalog.
	handleMetadata(ctx context.Context, r *wire.MetadataRequest) (*wire.MetadataResponse, error)
	// metaLeader names the meta group's leader ("" when none is known).
	metaLeader() string
	// listNodes is the node listing of `ferry node ls`.
	listNodes() *wire.ListNodesResponse
	// replicaViews describes the replicas the node hosts.
	replicaViews() []jsonview.Replica
}

// newDashboardSource returns the dashboard's view of the cluster through
// node self: an HTTP client for the other nodes' admin ports (trusting
// the cluster CA of tlsMat, plaintext when it is nil) and, opened on
// demand, Go clients of its client port at clientAddr.
func newDashboardSource(self, clientAddr string, tlsMat *tlsconf.Material, node dashboardNode) *dashboardSource {
	tr := &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: 5 * time.Second}
	if tlsMat != nil {
		tr.TLSClientConfig = tlsconf.ClientWithPool(tlsMat.CAs)
	}
	return &dashboardSource{self: self, clientAddr: clientAddr, tls: tlsMat, node: node,
		http: &http.Client{Transport: tr, Timeout: 5 * time.Second}}
}

// Cluster implements dashboard.Cluster.
func (s *dashboardSource) Cluster(ctx context.Context) jsonview.Cluster {
	md, _ := s.node.handleMetadata(ctx, &wire.MetadataRequest{})
	out := jsonview.ClusterOf(md.Nodes, md.Queues)
	out.Node, out.MetaLeader, out.MetaIndex = s.self, s.node.metaLeader(), md.MetaIndex
	return out
}

// Shape implements dashboard.Cluster: the node listing `ferry node ls`
// gives, from this node's catalog and gossip.
func (s *dashboardSource) Shape(context.Context) jsonview.Nodes {
	return jsonview.NodesOf(s.node.listNodes())
}

// Replicas implements dashboard.Cluster: this node's own replicas are
// read directly, another node's through its /v1/replicas.
func (s *dashboardSource) Replicas(ctx context.Context, nd jsonview.Node, fwd http.Header) ([]jsonview.Replica, error) {
	if nd.ID == s.self {
		return s.node.replicaViews(), nil
	}
	scheme := "http"
	if s.tls != nil {
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+nd.HTTPAddr+"/v1/replicas", nil)
	if err != nil {
		return nil, err
	}
	for k, v := range fwd {
		req.Header[k] = v
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node %s: /v1/replicas answered %s", nd.ID, resp.Status)
	}
	var out []jsonview.Replica
	if err := json.NewDecoder(io.LimitReader(resp.Body, replicasAnswerBytesMax)).Decode(&out); err != nil {
		return nil, fmt.Errorf("node %s: /v1/replicas: %w", nd.ID, err)
	}
	return out, nil
}

// Queues implements dashboard.Cluster.
func (s *dashboardSource) Queues(ctx context.Context) (dashboard.Queues, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: node closing", dashboard.ErrNoCluster)
	}
	secret, _ := ctx.Value(viewerTokenKey{}).(string)
	if secret == "" {
		secret = s.last
	}
	s.last = secret
	if c := s.clients[secret]; c != nil {
		return c, nil
	}
	opts := []client.Option{client.WithClientName("dashboard-" + s.self), client.WithDialTimeout(2 * time.Second)}
	if s.tls != nil {
		opts = append(opts, client.WithTLS(tlsconf.ClientWithPool(s.tls.CAs)))
	}
	if secret != "" {
		opts = append(opts, client.WithToken(secret))
	}
	c, err := client.Dial(ctx, []string{s.clientAddr}, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", dashboard.ErrNoCluster, err)
	}
	if s.clients == nil {
		s.clients = map[string]*client.Client{}
	}
	if len(s.order) >= dashboardClientsMax {
		s.clients[s.order[0]].Close()
		delete(s.clients, s.order[0])
		s.order = s.order[1:]
	}
	s.clients[secret] = c
	s.order = append(s.order, secret)
	return c, nil
}

// close closes the source's clients; Queues refuses from then on.
func (s *dashboardSource) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.clients {
		c.Close()
	}
	s.clients, s.order = nil, nil
}

// metaLeader implements dashboardNode: the meta leader's id, "" when none
// is known.
func (n *Node) metaLeader() string { return n.meta.leaderID() }

// replicaViews implements dashboardNode (and serves /v1/replicas): the
// replicas this node hosts, by group.
func (n *Node) replicaViews() []jsonview.Replica {
	out := []jsonview.Replica{}
	for _, r := range n.replicas.all() {
		role, leader := r.p.Role()
		idx, dig := r.p.Digest()
		s := r.p.Stats()
		var voters []string
		if role == "Leader" {
			voters = r.p.Voters()
		}
		out = append(out, jsonview.Replica{Queue: r.a.Queue, Partition: r.a.Index, Group: r.a.GroupID,
			Role: jsonview.Enum(role), Leader: leader, AppliedIndex: idx, Digest: hex.EncodeToString(dig[:]),
			Ready: s.Ready, InFlight: s.InFlight, Delayed: s.Delayed, Dead: s.Dead,
			Suffrage: r.p.Suffrage(), Abstaining: r.p.Abstaining(), Voters: voters})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}
