package dashboard

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/jsonview"
)

// Limits of the messages page and of the admin port's listing.
const (
	// BrowseDefault is how many messages a listing shows when it names
	// no max.
	BrowseDefault = 100
	// browseFieldMax bounds each filter value taken from a page or URL.
	browseFieldMax = 1024
)

// MessageQuery is a live-message filter as a page, a form or the admin
// port's URL carries it: state (comma-separated ready, leased, delayed or
// all), group, header (key=value), older_than (a duration) and max.
type MessageQuery struct {
	State     string
	Group     string
	Header    string
	OlderThan string
	Max       int
	filter    client.MessageFilter
}

// ParseMessageQuery reads and checks a filter from a query string or
// form; a bad value is an error naming it.
func ParseMessageQuery(vals url.Values) (MessageQuery, error) {
	q := MessageQuery{State: strings.TrimSpace(vals.Get("state")), Group: vals.Get("group"),
		Header: vals.Get("header"), OlderThan: strings.TrimSpace(vals.Get("older_than")), Max: BrowseDefault}
	for k, v := range map[string]string{"state": q.State, "group": q.Group, "header": q.Header, "older_than": q.OlderThan} {
		if len(v) > browseFieldMax {
			return q, fmt.Errorf("%s of %d bytes: at most %d", k, len(v), browseFieldMax)
		}
	}
	if m := vals.Get("max"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > client.MaxPeek {
			return q, fmt.Errorf("max=%q: want 1..%d", m, client.MaxPeek)
		}
		q.Max = n
	}
	f := client.MessageFilter{Group: q.Group}
	for s := range strings.SplitSeq(q.State, ",") {
		switch s = strings.TrimSpace(s); s {
		case "":
		case client.StateReady, client.StateLeased, client.StateDelayed, client.StateAll:
			f.States = append(f.States, s)
		default:
			return q, fmt.Errorf("state %q: want ready, leased, delayed or all", s)
		}
	}
	if len(f.States) > 3 {
		return q, fmt.Errorf("state: at most ready, leased and delayed (or all)")
	}
	if q.Header != "" {
		k, v, ok := strings.Cut(q.Header, "=")
		if !ok || k == "" {
			return q, fmt.Errorf("header %q: want key=value", q.Header)
		}
		f.HeaderKey, f.HeaderValue = k, v
	}
	if q.OlderThan != "" {
		d, err := time.ParseDuration(q.OlderThan)
		if err != nil || d < 0 {
			return q, fmt.Errorf("older_than %q: want a duration such as 10m", q.OlderThan)
		}
		f.OlderThan = d
	}
	q.filter = f
	return q, nil
}

// Filter is the client's form of the query.
func (q MessageQuery) Filter() client.MessageFilter { return q.filter }

// Query gives the filter's query string for a link's href, encoded once.
func (q MessageQuery) Query() template.URL {
	v := url.Values{}
	for k, s := range map[string]string{"state": q.State, "group": q.Group, "header": q.Header, "older_than": q.OlderThan} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return template.URL(v.Encode()) // url.Values.Encode escapes every value
}

// browseData is the messages page: the filter and the messages it shows.
type browseData struct {
	Queue    string
	Q        MessageQuery
	Messages []jsonview.PeekedMessage
}

// browsePage lists the live messages a filter selects (ready ones by
// default) with a peek, which leases nothing.
func (d *Dashboard) browsePage(ctx context.Context, r *http.Request, v *view) (string, error) {
	name := r.PathValue("name")
	v.Title, v.Nav = "Messages of "+name, "queues"
	data := &browseData{Queue: name}
	v.Data = data
	q, err := ParseMessageQuery(r.URL.Query())
	data.Q = q
	if err != nil {
		return "browse.html", err
	}
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "browse.html", err
	}
	ms, err := qs.PeekMessages(ctx, name, client.PeekOptions{Max: q.Max, MessageFilter: q.Filter()})
	now := time.Now()
	for _, m := range ms {
		data.Messages = append(data.Messages, jsonview.PeekedMessageOf(m, now))
	}
	return "browse.html", err
}

// browseConfirmData is the confirm page of a bulk delete: the count of
// messages matching now and a sample of them.
type browseConfirmData struct {
	Queue  string
	Q      MessageQuery
	Result client.DeleteMatchingResult
}

// browseConfirmPage counts the messages the form's filter selects (a dry
// run) and asks before deleting them.
func (d *Dashboard) browseConfirmPage(ctx context.Context, r *http.Request, v *view) (string, error) {
	name := r.PathValue("name")
	data := &browseConfirmData{Queue: name}
	v.Title, v.Nav, v.Data = "Confirm", "queues", data
	q, err := ParseMessageQuery(r.PostForm)
	data.Q = q
	if err != nil {
		return "browse_confirm.html", err
	}
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "browse_confirm.html", err
	}
	data.Result, err = qs.DeleteMatching(ctx, name, q.Filter(), true)
	return "browse_confirm.html", err
}

// applyBrowseDelete deletes the messages the form's filter selects, in
// the viewer's name, and goes back to the messages page with the count.
func (d *Dashboard) applyBrowseDelete(ctx context.Context, r *http.Request, v *view) (string, error) {
	name := r.PathValue("name")
	v.Title, v.Nav = "Messages of "+name, "queues"
	q, err := ParseMessageQuery(r.PostForm)
	if err != nil {
		return "error.html", err
	}
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "error.html", err
	}
	res, err := qs.DeleteMatching(ctx, name, q.Filter(), false)
	if err != nil {
		return "error.html", fmt.Errorf("deleted %d messages, then: %w", res.Deleted, err)
	}
	d.logger.Info("dashboard: messages deleted by filter", "queue", name, "state", q.State, "group", q.Group,
		"header", q.Header, "older_than", q.OlderThan, "matched", res.Matched, "deleted", res.Deleted)
	flash := fmt.Sprintf("deleted %d of %d matching messages", res.Deleted, res.Matched)
	return "", redirectTo("/queues/" + url.PathEscape(name) + "/browse?" + string(q.Query()) + "&" + url.Values{"flash": {flash}}.Encode())
}
