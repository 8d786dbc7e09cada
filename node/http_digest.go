package node

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/ferrymq/ferry/partition"
)

// digestWaitMax bounds how long GET /v1/replicas/{group}/digest waits for
// the entry asked for.
const digestWaitMax = 30 * time.Second

// handleReplicaDigestJSON serves GET /v1/replicas/{group}/digest?at=N
// [&wait=D]: the state digest of this node's replica of group right after
// it applied entry N, waiting up to D (default 5 s, at most 30 s) for it.
// Replicas that applied the same entries give the same digest at N, so
// comparing them tells whether they agree on a group that keeps applying
// entries. 404: no replica of group here; 409: it applied past N already
// (ask for a later index); 504: N did not come within D.
func (n *Node) handleReplicaDigestJSON(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	at, err := strconv.ParseUint(r.URL.Query().Get("at"), 10, 64)
	if err != nil || at == 0 {
		http.Error(w, "at: want the raft index to digest at, a positive integer\n", http.StatusBadRequest)
		return
	}
	wait := 5 * time.Second
	if v := r.URL.Query().Get("wait"); v != "" {
		if wait, err = time.ParseDuration(v); err != nil || wait <= 0 || wait > digestWaitMax {
			http.Error(w, fmt.Sprintf("wait=%q: want a duration in (0, %v]\n", v, digestWaitMax), http.StatusBadRequest)
			return
		}
	}
	p := n.replicas.get(group)
	if p == nil {
		http.Error(w, fmt.Sprintf("no replica of group %q on this node\n", group), http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	d, err := p.DigestAt(ctx, at)
	switch {
	case errors.Is(err, partition.ErrDigestPassed):
		http.Error(w, err.Error()+"\n", http.StatusConflict)
	case errors.Is(err, context.DeadlineExceeded):
		http.Error(w, fmt.Sprintf("entry %d not applied within %v\n", at, wait), http.StatusGatewayTimeout)
	case err != nil:
		http.Error(w, err.Error()+"\n", http.StatusServiceUnavailable)
	default:
		writeJSON(w, jsonview.ReplicaDigest{Group: group, AppliedIndex: at, Digest: hex.EncodeToString(d[:])})
	}
}
