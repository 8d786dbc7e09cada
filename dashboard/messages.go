package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/ferrymq/ferry/internal/jsonview"
)

// messageIDMax bounds the id a find takes from the page (ids are shorter
// on the wire; this only keeps a pasted blob out of the form).
const messageIDMax = 1024

// messageData is the find-a-message page: the id asked for and every
// message found with it.
type messageData struct {
	Queue string
	ID    string
	Found []jsonview.FoundMessage
	// Asked is set once an id was given (an empty result then says
	// "none").
	Asked bool
}

// messagePage finds the messages with ?id= in any state (ready, delayed,
// leased with its holder, dead), with a delete and a cancel button each.
func (d *Dashboard) messagePage(ctx context.Context, r *http.Request, v *view) (string, error) {
	name := r.PathValue("name")
	v.Title, v.Nav = "Find a message in "+name, "queues"
	data := &messageData{Queue: name, ID: strings.TrimSpace(r.URL.Query().Get("id"))}
	v.Data = data
	if data.ID == "" {
		return "message.html", nil
	}
	if len(data.ID) > messageIDMax {
		return "message.html", fmt.Errorf("an id of %d bytes: at most %d", len(data.ID), messageIDMax)
	}
	data.Asked = true
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "message.html", err
	}
	found, err := qs.FindMessage(ctx, name, data.ID)
	if err != nil {
		return "message.html", err
	}
	for _, m := range found {
		data.Found = append(data.Found, jsonview.FoundMessageOf(m))
	}
	return "message.html", nil
}

// applyMessageDelete deletes (action=delete) every message with the form's
// id, in any state, or cancels (action=cancel) those never delivered, in
// the viewer's name, and goes back to the find page with the outcome.
func (d *Dashboard) applyMessageDelete(ctx context.Context, r *http.Request, v *view) (string, error) {
	name := r.PathValue("name")
	v.Title, v.Nav = "Find a message in "+name, "queues"
	id := strings.TrimSpace(r.PostFormValue("id"))
	if id == "" || len(id) > messageIDMax {
		return "error.html", fmt.Errorf("a message id of 1 to %d bytes is needed", messageIDMax)
	}
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "error.html", err
	}
	action := r.PostFormValue("action")
	del := qs.DeleteMessage
	switch action {
	case "delete":
	case "cancel":
		del = qs.CancelMessage
	default:
		return "error.html", fmt.Errorf("unknown action %q", action)
	}
	n, err := del(ctx, name, id)
	if err != nil {
		return "error.html", fmt.Errorf("%s message %s of queue %s: %w", action, id, name, err)
	}
	d.logger.Info("dashboard: message deleted by id", "queue", name, "id", id, "action", action, "deleted", n)
	flash := fmt.Sprintf("%d message(s) with id %s deleted", n, id)
	if action == "cancel" {
		flash = fmt.Sprintf("%d undelivered message(s) with id %s cancelled", n, id)
	}
	return "", redirectTo("/queues/" + url.PathEscape(name) + "/messages?" + url.Values{"id": {id}, "flash": {flash}}.Encode())
}
