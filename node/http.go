package node

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/clock"
	"github.com/ferrymq/ferry/internal/diskfault"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/ferrymq/ferry/wire"
	"github.com/hashicorp/raft"
)

// Limits of the HTTP admin server.
const (
	// httpBodyBytesMax bounds a request body: larger ones are refused
	// with 413 before they are read (or cut where their length is not
	// declared). No admin endpoint takes more than a few bytes.
	httpBodyBytesMax = 1 << 20
	// httpHeaderBytesMax bounds the request line and headers.
	httpHeaderBytesMax = 64 << 10
	// httpWriteTimeout bounds one response; with the profiler on it is
	// httpPprofWriteTimeout, room for a profile or trace of up to about
	// four minutes (the profiler refuses longer ones).
	httpWriteTimeout      = 30 * time.Second
	httpPprofWriteTimeout = 5 * time.Minute
)

// httpServer is the admin server with its timeouts and size limits.
func (n *Node) httpServer() *http.Server {
	write := httpWriteTimeout
	if n.cfg.Pprof {
		write = httpPprofWriteTimeout
	}
	var tlsCfg *tls.Config
	if n.tls != nil {
		tlsCfg = n.tls.Server()
	}
	return &http.Server{
		TLSConfig:         tlsCfg,
		Handler:           limitBody(n.requireAuth(n.httpHandler())),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      write,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    httpHeaderBytesMax,
	}
}

// limitBody refuses a declared body over httpBodyBytesMax with 413 and
// cuts an undeclared one there.
func limitBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > httpBodyBytesMax {
			w.Header().Set("Connection", "close")
			http.Error(w, "request body too large\n", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, httpBodyBytesMax)
		h.ServeHTTP(w, r)
	})
}

// httpHandler serves the admin API: health, readiness, cluster and queue
// views, and replica digests (used to check that replicas converge); the
// profiler only when Config.Pprof is set. requireAuth (httpauth.go) guards
// every path it serves, present and future.
func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", n.handleLogin)
	mux.HandleFunc("POST /login", n.handleLogin)
	mux.HandleFunc("POST /logout", handleLogout)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", n.handleReady)
	mux.HandleFunc("GET /v1/cluster", n.handleClusterJSON)
	mux.HandleFunc("GET /v1/queues", n.handleQueuesJSON)
	mux.HandleFunc("GET /v1/replicas", n.handleReplicasJSON)
	mux.HandleFunc("GET /v1/replicas/summary", n.handleReplicaSummaryJSON)
	mux.HandleFunc("GET /v1/replicas/{group}/digest", n.handleReplicaDigestJSON)
	mux.HandleFunc("GET /v1/nodes", n.handleNodesJSON)
	mux.HandleFunc("GET /v1/nodes/{id}/safe-to-stop", n.handleSafeToStopJSON)
	mux.HandleFunc("POST /v1/queues/{name}/pause", n.handlePauseJSON(true))
	mux.HandleFunc("POST /v1/queues/{name}/resume", n.handlePauseJSON(false))
	mux.HandleFunc("GET /v1/queues/{name}/messages", n.handlePeekJSON)
	mux.HandleFunc("GET /v1/queues/{name}/messages/{id}", n.handleFindMessageJSON)
	mux.HandleFunc("DELETE /v1/queues/{name}/messages/{id}", n.handleDeleteMessageJSON)
	mux.HandleFunc("GET /v1/queues/{name}/schedules", n.handleSchedulesJSON)
	mux.Handle("GET /metrics", n.metrics.handler())
	n.dash.Register(mux)
	if clock.Adjustable {
		mux.HandleFunc("GET /v1/debug/clock", n.handleClockShift)
		mux.HandleFunc("POST /v1/debug/clock", n.handleClockShift)
	}
	if diskfault.Armable {
		mux.HandleFunc("GET /v1/debug/disk", n.handleDiskFault)
		mux.HandleFunc("POST /v1/debug/disk", n.handleDiskFault)
	}
	if n.cfg.Pprof {
		mux.HandleFunc("GET /v1/debug/raft", n.handleRaftDebug)
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// handleClockShift serves the chaos suite's clock control, present only in
// a chaosclock build: POST ?offset=DURATION shifts this node's clock (not
// cumulative; 0 restores it), and both methods answer the offset in force.
func (n *Node) handleClockShift(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		d, err := time.ParseDuration(r.URL.Query().Get("offset"))
		if err != nil {
			http.Error(w, "offset: "+err.Error()+"\n", http.StatusBadRequest)
			return
		}
		if err := clock.Shift(d); err != nil {
			http.Error(w, err.Error()+"\n", http.StatusBadRequest)
			return
		}
		n.logger.Warn("clock shifted by the chaos control", "offset", d)
	}
	fmt.Fprintf(w, "%s\n", clock.Offset())
}

// handleDiskFault serves the chaos suite's disk fault control, present
// only in a chaosdisk build. POST ?match=STRING&kind=KIND&count=N makes the
// next N operations of KIND on log files whose path contains STRING fail
// with EIO: KIND is fsync (the default), write (nothing written) or
// short-write (half written); the fault replaces any armed before, and 0
// disarms. The older form ?match=STRING&syncs=N arms fsync failures. Both
// methods answer how many failures are still to fire.
func (n *Node) handleDiskFault(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		q := r.URL.Query()
		kind, err := diskfault.Sync, error(nil)
		if k := q.Get("kind"); k != "" {
			kind, err = diskfault.ParseKind(k)
		}
		param := "count"
		if !q.Has(param) {
			param = "syncs"
		}
		var count int
		if err == nil {
			count, err = strconv.Atoi(q.Get(param))
		}
		if err == nil {
			err = diskfault.ArmKind(kind, q.Get("match"), count)
		}
		if err != nil {
			http.Error(w, "disk fault: "+err.Error()+"\n", http.StatusBadRequest)
			return
		}
		n.logger.Warn("disk faults armed by the chaos control", "match", q.Get("match"), "kind", kind.String(), "count", count)
	}
	fmt.Fprintf(w, "%d\n", diskfault.Remaining())
}

// handleReady answers 200 once the node sees a meta leader, unless its
// clock is off the majority's by more than the bound or the client port
// is failing to accept connections.
func (n *Node) handleReady(w http.ResponseWriter, _ *http.Request) {
	if p := n.clock.problem(); p != "" {
		http.Error(w, p+"\n", http.StatusServiceUnavailable)
		return
	}
	if n.meta.leaderID() == "" {
		http.Error(w, "no meta leader yet\n", http.StatusServiceUnavailable)
		return
	}
	if n.clients.acceptTrouble() {
		http.Error(w, "client port failing to accept connections (out of file descriptors?)\n", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ready\n"))
}

// handleClusterJSON serves the membership and placement in the form of
// `ferry cluster status --json`, plus the answering node, the meta leader
// and the meta index.
func (n *Node) handleClusterJSON(w http.ResponseWriter, _ *http.Request) {
	md, _ := n.handleMetadata(context.Background(), &wire.MetadataRequest{})
	out := jsonview.ClusterOf(md.Nodes, md.Queues)
	out.Node, out.MetaLeader, out.MetaIndex = n.cfg.ID, n.meta.leaderID(), md.MetaIndex
	writeJSON(w, out)
}

// handlePauseJSON serves POST /v1/queues/{name}/pause (pause) and
// /resume: the queue's deliveries stop or start again, in the name of the
// request's token, and the answer is the pause state as `ferry queue
// pause --json` prints it. A browser's cross-origin post is refused.
func (n *Node) handlePauseJSON(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(w, r) {
			return
		}
		name := r.PathValue("name")
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		qs, err := n.dashSrc.Queues(ctx)
		if err != nil {
			http.Error(w, err.Error()+"\n", http.StatusServiceUnavailable)
			return
		}
		set := qs.Resume
		if pause {
			set = qs.Pause
		}
		p, err := set(ctx, name)
		if err != nil {
			http.Error(w, err.Error()+"\n", httpStatusOf(err))
			return
		}
		writeJSON(w, jsonview.PauseOf(name, p.Partitions, p.Paused, p.By, p.At))
	}
}

// httpStatusOf maps a client error to an HTTP status.
func httpStatusOf(err error) int {
	switch {
	case errors.Is(err, client.ErrQueueNotFound), errors.Is(err, client.ErrMessageNotFound):
		return http.StatusNotFound
	case errors.Is(err, client.ErrUnauthorized):
		return http.StatusForbidden
	case errors.Is(err, client.ErrInvalidArgument):
		return http.StatusBadRequest
	}
	return http.StatusServiceUnavailable
}

// handleQueuesJSON serves every queue in the form of `ferry queue ls
// --json`.
func (n *Node) handleQueuesJSON(w http.ResponseWriter, _ *http.Request) {
	md, _ := n.handleMetadata(context.Background(), &wire.MetadataRequest{})
	writeJSON(w, jsonview.QueuesOf(md.Queues))
}

// handleReplicasJSON serves the replicas this node hosts, with role,
// applied index, digest and counts (GET /v1/replicas).
func (n *Node) handleReplicasJSON(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, n.replicaViews())
}

// handleReplicaSummaryJSON counts this node's replicas by role, reading
// each replica's role without its digest or stats.
func (n *Node) handleReplicaSummaryJSON(w http.ResponseWriter, _ *http.Request) {
	var sum jsonview.ReplicaSummary
	for _, r := range n.replicas.all() {
		role, leader := r.p.Role()
		sum.Replicas++
		switch role {
		case raft.Leader.String():
			sum.Leaders++
		case raft.Follower.String():
			sum.Followers++
		case raft.Candidate.String():
			sum.Candidates++
		}
		if leader == "" {
			sum.WithoutLeader++
		}
	}
	writeJSON(w, sum)
}

// handleNodesJSON serves every node's status in the form of `ferry node ls
// --json`.
func (n *Node) handleNodesJSON(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, jsonview.NodesOf(n.listNodes()))
}

// handleSafeToStopJSON answers whether node {id} can be stopped now: 200
// when it can, 409 when it cannot (the body says why either way), 404 for
// a node the catalog does not know.
func (n *Node) handleSafeToStopJSON(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ans, err := n.safeToStop(&wire.SafeToStopRequest{ID: id})
	if err != nil {
		http.Error(w, err.Error()+"\n", http.StatusNotFound)
		return
	}
	if !ans.Safe {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
	}
	writeJSON(w, struct {
		Node    string   `json:"node"`
		Safe    bool     `json:"safe"`
		Leads   int      `json:"leads"`
		Reasons []string `json:"reasons"`
	}{id, ans.Safe, ans.Leads, append([]string{}, ans.Reasons...)})
}

// writeJSON writes v as indented JSON; a failed write is the client's
// loss and is not reported.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
