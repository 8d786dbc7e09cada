package node

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/ferrymq/ferry/internal/jsonview"
)

// messageActionTimeout bounds a find or delete by id: each partition's
// leader walks its messages.
const messageActionTimeout = 30 * time.Second

// handleFindMessageJSON serves GET /v1/queues/{name}/messages/{id}: every
// message with that id, in any state, as `ferry msg find --json` gives
// it; 404 when there is none.
func (n *Node) handleFindMessageJSON(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("name"), r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), messageActionTimeout)
	defer cancel()
	qs, err := n.dashSrc.Queues(ctx)
	if err != nil {
		http.Error(w, err.Error()+"\n", http.StatusServiceUnavailable)
		return
	}
	found, err := qs.FindMessage(ctx, name, id)
	if err != nil {
		http.Error(w, err.Error()+"\n", httpStatusOf(err))
		return
	}
	if len(found) == 0 {
		http.Error(w, fmt.Sprintf("no message %q in queue %s\n", id, name), http.StatusNotFound)
		return
	}
	out := make([]jsonview.FoundMessage, 0, len(found))
	for _, m := range found {
		out = append(out, jsonview.FoundMessageOf(m))
	}
	writeJSON(w, out)
}

// handleDeleteMessageJSON serves DELETE /v1/queues/{name}/messages/{id}:
// every message with that id is deleted, in any state (a consumer holding
// one gets "message not found" for its ack), or with ?undelivered=1 only
// those never delivered (a cancel). 404 when none was deleted.
func (n *Node) handleDeleteMessageJSON(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(w, r) {
		return
	}
	name, id := r.PathValue("name"), r.PathValue("id")
	undelivered := false
	switch v := r.URL.Query().Get("undelivered"); v {
	case "", "0", "false":
	case "1", "true":
		undelivered = true
	default:
		http.Error(w, fmt.Sprintf("undelivered=%q: want 1, true, 0 or false\n", v), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), messageActionTimeout)
	defer cancel()
	qs, err := n.dashSrc.Queues(ctx)
	if err != nil {
		http.Error(w, err.Error()+"\n", http.StatusServiceUnavailable)
		return
	}
	del := qs.DeleteMessage
	if undelivered {
		del = qs.CancelMessage
	}
	deleted, err := del(ctx, name, id)
	if err != nil {
		http.Error(w, err.Error()+"\n", httpStatusOf(err))
		return
	}
	n.logger.Info("message deleted by id over the admin port", "queue", name, "id", id, "undelivered_only", undelivered, "deleted", deleted)
	writeJSON(w, jsonview.MessagesDeleted{Deleted: deleted})
}

// handleSchedulesJSON serves GET /v1/queues/{name}/schedules: the queue's
// recurring schedules by name, as `ferry schedule ls --json` gives them.
func (n *Node) handleSchedulesJSON(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), messageActionTimeout)
	defer cancel()
	qs, err := n.dashSrc.Queues(ctx)
	if err != nil {
		http.Error(w, err.Error()+"\n", http.StatusServiceUnavailable)
		return
	}
	list, err := qs.ListSchedules(ctx, r.PathValue("name"))
	if err != nil {
		http.Error(w, err.Error()+"\n", httpStatusOf(err))
		return
	}
	writeJSON(w, jsonview.SchedulesOf(list))
}

// sameOrigin refuses (403) a browser request sent from another origin: a
// state-changing request must come from a page this port served, or from
// a client that sends no Origin (a script, curl).
func sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			http.Error(w, "cross-origin request refused\n", http.StatusForbidden)
			return false
		}
	}
	return true
}
