package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"sort"

	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/ferrymq/ferry/wire"
)

// httpHandler serves the admin API: health, readiness, cluster and queue
// views, and replica digests (used to check that replicas converge).
func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", n.handleReady)
	mux.HandleFunc("GET /v1/cluster", n.handleClusterJSON)
	mux.HandleFunc("GET /v1/queues", n.handleQueuesJSON)
	mux.HandleFunc("GET /v1/replicas", n.handleReplicasJSON)
	mux.Handle("GET /metrics", n.metrics.handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// handleReady answers 200 once the node sees a meta leader.
func (n *Node) handleReady(w http.ResponseWriter, _ *http.Request) {
	if n.meta.leaderID() == "" {
		http.Error(w, "no meta leader yet\n", http.StatusServiceUnavailable)
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

// handleQueuesJSON serves every queue in the form of `ferry queue ls
// --json`.
func (n *Node) handleQueuesJSON(w http.ResponseWriter, _ *http.Request) {
	md, _ := n.handleMetadata(context.Background(), &wire.MetadataRequest{})
	writeJSON(w, jsonview.QueuesOf(md.Queues))
}

func (n *Node) handleReplicasJSON(w http.ResponseWriter, _ *http.Request) {
	out := []jsonview.Replica{}
	for _, r := range n.replicas.all() {
		st := r.p.Status()
		idx, dig := r.p.Digest()
		s := r.p.Stats()
		out = append(out, jsonview.Replica{Queue: r.a.Queue, Partition: r.a.Index, Group: r.a.GroupID,
			Role: jsonview.Enum(st.State), Leader: st.LeaderID, AppliedIndex: idx, Digest: hex.EncodeToString(dig[:]),
			Ready: s.Ready, InFlight: s.InFlight, Delayed: s.Delayed, Dead: s.Dead})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
