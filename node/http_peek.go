package node

import (
	"context"
	"net/http"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/dashboard"
	"github.com/ferrymq/ferry/internal/jsonview"
)

// handlePeekJSON serves GET /v1/queues/{name}/messages: the live messages
// a filter selects (?state=ready,leased,delayed|all&group=&header=k=v&
// older_than=10m&max=100; ready ones and max 100 by default), oldest
// first per partition, nothing leased, as `ferry peek --json` gives them.
// A bad filter is 400.
func (n *Node) handlePeekJSON(w http.ResponseWriter, r *http.Request) {
	q, err := dashboard.ParseMessageQuery(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error()+"\n", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), messageActionTimeout)
	defer cancel()
	qs, err := n.dashSrc.Queues(ctx)
	if err != nil {
		http.Error(w, err.Error()+"\n", http.StatusServiceUnavailable)
		return
	}
	ms, err := qs.PeekMessages(ctx, r.PathValue("name"), client.PeekOptions{Max: q.Max, MessageFilter: q.Filter()})
	if err != nil {
		http.Error(w, err.Error()+"\n", httpStatusOf(err))
		return
	}
	now := time.Now()
	out := make([]jsonview.PeekedMessage, 0, len(ms))
	for _, m := range ms {
		out = append(out, jsonview.PeekedMessageOf(m, now))
	}
	writeJSON(w, out)
}
