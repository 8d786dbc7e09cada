package dashboard

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/ferrymq/ferry/wire"
)

// replicaRow is one replica of a partition on the cluster page.
type replicaRow struct {
	Node    string
	Leader  bool
	Applied uint64
	// Lag is the leader's applied index minus this replica's; Known is
	// false when the replica's node did not answer.
	Lag   uint64
	Known bool
}

type partitionRow struct {
	Queue    string
	Index    int
	Leader   string
	Replicas []replicaRow
}

type clusterData struct {
	C          jsonview.Cluster
	Shape      map[string]jsonview.NodeStatus // by node id
	Moves      jsonview.Nodes
	Partitions []partitionRow
	Unreached  []string
}

func (d *Dashboard) clusterPage(ctx context.Context, r *http.Request, v *view) (string, error) {
	v.Title, v.Nav, v.Live = "Cluster", "cluster", true
	c := d.cl.Cluster(ctx)
	shape := d.cl.Shape(ctx)
	data := &clusterData{C: c, Moves: shape, Shape: map[string]jsonview.NodeStatus{}}
	for _, st := range shape.Nodes {
		data.Shape[st.ID] = st
	}
	v.Data = data
	applied := map[string]map[string]uint64{} // group -> node -> applied index
	var mu sync.Mutex
	var wg sync.WaitGroup
	fwd := forwardHeaders(r)
	for _, nd := range c.Nodes {
		if nd.State != "alive" || nd.HTTPAddr == "" {
			continue
		}
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			reps, err := d.cl.Replicas(rctx, nd, fwd)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				data.Unreached = append(data.Unreached, nd.ID)
				return
			}
			for _, rep := range reps {
				key := rep.Queue + "/" + strconv.Itoa(rep.Partition)
				if applied[key] == nil {
					applied[key] = map[string]uint64{}
				}
				applied[key][nd.ID] = rep.AppliedIndex
			}
		})
	}
	wg.Wait()
	sort.Strings(data.Unreached)
	for _, q := range c.Queues {
		for _, p := range q.Partitions {
			row := partitionRow{Queue: q.Name, Index: p.Index, Leader: p.Leader}
			idx := applied[q.Name+"/"+strconv.Itoa(p.Index)]
			lead, leadKnown := idx[p.Leader]
			for _, id := range p.Replicas {
				a, ok := idx[id]
				rr := replicaRow{Node: id, Leader: id == p.Leader, Applied: a, Known: ok && leadKnown}
				if rr.Known && lead > a {
					rr.Lag = lead - a
				}
				row.Replicas = append(row.Replicas, rr)
			}
			data.Partitions = append(data.Partitions, row)
		}
	}
	return "cluster.html", nil
}

// forwardHeaders picks the viewer's credentials to pass on to other nodes.
func forwardHeaders(r *http.Request) http.Header {
	h := http.Header{}
	for _, k := range []string{"Authorization", "Cookie"} {
		if v := r.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	return h
}

// queueRow is one queue's current figures.
type queueRow struct {
	Name       string
	Partitions int
	Total      client.PartitionStats
	Failed     int // partitions whose figures could not be read
	Rates      Rates
	Err        string
}

func (d *Dashboard) queueRows(ctx context.Context, qs Queues, list []client.QueueInfo) []queueRow {
	rows := make([]queueRow, len(list))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, q := range list {
		rows[i] = queueRow{Name: q.Name, Partitions: len(q.Partitions)}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			st, err := qs.QueueStats(ctx, q.Name)
			if err != nil {
				rows[i].Err = err.Error()
				return
			}
			rows[i].Total = st.Total()
			for _, p := range st.Partitions {
				if p.Err() != nil {
					rows[i].Failed++
				}
			}
			rows[i].Rates = ratesOf(d.samp.samples(q.Name))
		})
	}
	wg.Wait()
	return rows
}

type queuesData struct {
	Rows      []queueRow
	Truncated bool
}

func (d *Dashboard) queuesPage(ctx context.Context, _ *http.Request, v *view) (string, error) {
	v.Title, v.Nav, v.Live = "Queues", "queues", true
	data := &queuesData{}
	v.Data = data
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "queues.html", err
	}
	list, err := qs.ListQueues(ctx, "")
	if err != nil {
		return "queues.html", err
	}
	if len(list) > queuesShownMax {
		list, data.Truncated = list[:queuesShownMax], true
	}
	data.Rows = d.queueRows(ctx, qs, list)
	return "queues.html", nil
}

type queueData struct {
	Name       string
	Config     [][2]string
	Partitions []client.PartitionStats
	Info       client.QueueInfo
	Row        queueRow
	Depth      template.HTML
	Rate       template.HTML
	// Schedules are the queue's recurring schedules; ScheduleErr says why
	// they could not be listed (the rest of the page still shows).
	Schedules   []client.ScheduleStatus
	ScheduleErr string
}

func (d *Dashboard) queuePage(ctx context.Context, r *http.Request, v *view) (string, error) {
	name := r.PathValue("name")
	v.Title, v.Nav, v.Live = "Queue "+name, "queues", true
	data := &queueData{Name: name}
	v.Data = data
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "queue.html", err
	}
	info, err := findQueue(ctx, qs, name)
	if err != nil {
		return "queue.html", err
	}
	data.Info, data.Config = info, configRows(info.Config)
	st, err := qs.QueueStats(ctx, name)
	if err != nil {
		return "queue.html", err
	}
	data.Partitions = st.Partitions
	data.Row = queueRow{Name: name, Partitions: len(info.Partitions), Total: st.Total()}
	ss := d.samp.samples(name)
	data.Row.Rates = ratesOf(ss)
	data.Depth, data.Rate = depthChart(ss), rateChart(ss)
	if data.Schedules, err = qs.ListSchedules(ctx, name); err != nil {
		data.ScheduleErr = err.Error()
	}
	return "queue.html", nil
}

// applyPause pauses (action=pause) or resumes (action=resume) a queue's
// deliveries, in the viewer's name, and goes back to the queue's page.
func (d *Dashboard) applyPause(ctx context.Context, r *http.Request, v *view) (string, error) {
	name := r.PathValue("name")
	v.Title, v.Nav = "Queue "+name, "queues"
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "error.html", err
	}
	var p client.QueuePause
	action := r.PostFormValue("action")
	switch action {
	case "pause":
		p, err = qs.Pause(ctx, name)
	case "resume":
		p, err = qs.Resume(ctx, name)
	default:
		return "error.html", fmt.Errorf("unknown action %q", action)
	}
	if err != nil {
		return "error.html", fmt.Errorf("%s queue %s: %w", action, name, err)
	}
	d.logger.Info("dashboard: queue deliveries changed", "queue", name, "action", action, "paused", p.Paused, "partitions", p.Partitions)
	flash := fmt.Sprintf("deliveries paused on %d of %d partitions", p.Paused, p.Partitions)
	if p.Paused == 0 {
		flash = "deliveries resumed"
	}
	return "", redirectTo("/queues/" + url.PathEscape(name) + "?" + url.Values{"flash": {flash}}.Encode())
}

func findQueue(ctx context.Context, qs Queues, name string) (client.QueueInfo, error) {
	list, err := qs.ListQueues(ctx, name)
	if err != nil {
		return client.QueueInfo{}, err
	}
	for _, q := range list {
		if q.Name == name {
			return q, nil
		}
	}
	return client.QueueInfo{}, fmt.Errorf("queue %q %w", name, errNotFound)
}

// configRows lists a queue's settings for its page: its shape, then one
// row per setting of fsm's table, a 0 that means "no limit", "off" or
// "keep" written as such.
func configRows(c client.QueueConfig) [][2]string {
	rows := [][2]string{{"partitions", strconv.Itoa(c.Partitions)}, {"replicas", strconv.Itoa(c.Replicas)}}
	for _, s := range fsm.Settings() {
		f, _ := wire.ConfigFieldNamed(s.Name)
		v, text := c.Get(f), ""
		if v == 0 && s.Zero != "" {
			text = s.Zero
		} else {
			text = s.Format(v)
		}
		rows = append(rows, [2]string{strings.ReplaceAll(s.Name, "_", " "), text})
	}
	return rows
}

// deadQuery is the dead-letter filter of a page or form.
type deadQuery struct {
	Reason string // "", rejected, retries_exhausted, lease_expired
	Group  string
	ID     string // substring of the message id
}

var reasons = map[string]client.DeadReason{
	"rejected": client.DeadRejected, "retries_exhausted": client.DeadRetriesExhausted, "lease_expired": client.DeadLeaseExpired,
}

func deadQueryOf(vals url.Values) (deadQuery, error) {
	q := deadQuery{Reason: vals.Get("reason"), Group: vals.Get("group"), ID: vals.Get("id")}
	if _, ok := reasons[q.Reason]; q.Reason != "" && !ok {
		return q, fmt.Errorf("unknown reason %q", q.Reason)
	}
	if len(q.Group) > 256 || len(q.ID) > 256 {
		return q, fmt.Errorf("filter values are at most 256 bytes")
	}
	return q, nil
}

// Query gives the query string of the filter for a link's href: already
// encoded, so the template must not encode it again (it did, and the
// confirm page's Cancel link lost its filter: "reason=x" became
// "reason%3dx").
func (q deadQuery) Query() template.URL {
	return template.URL(q.Encode()) // url.Values.Encode escapes every value
}

// Encode gives the query string of the filter.
func (q deadQuery) Encode() string {
	v := url.Values{}
	for k, s := range map[string]string{"reason": q.Reason, "group": q.Group, "id": q.ID} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// list returns up to limit dead letters matching q, and whether more
// matched.
func (q deadQuery) list(ctx context.Context, qs Queues, queue string, limit int) ([]client.DeadLetter, bool, error) {
	f := client.DeadFilter{Reason: reasons[q.Reason], Group: q.Group, Limit: deadActionMax + 1}
	all, err := qs.DeadLetters(ctx, queue, f)
	if err != nil {
		return nil, false, err
	}
	var out []client.DeadLetter
	more := len(all) > deadActionMax
	for _, l := range all {
		if q.ID != "" && !containsFold(l.ID, q.ID) {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, l)
	}
	return out, more, nil
}

type deadData struct {
	Queue   string
	Q       deadQuery
	Letters []client.DeadLetter
	More    bool
	Reasons []string
}

func (d *Dashboard) deadPage(ctx context.Context, r *http.Request, v *view) (string, error) {
	name := r.PathValue("name")
	v.Title, v.Nav, v.Live = "Dead letters of "+name, "queues", true
	data := &deadData{Queue: name, Reasons: []string{"rejected", "retries_exhausted", "lease_expired"}}
	v.Data = data
	q, err := deadQueryOf(r.URL.Query())
	data.Q = q
	if err != nil {
		return "dead.html", err
	}
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "dead.html", err
	}
	data.Letters, data.More, err = q.list(ctx, qs, name, deadShownMax)
	return "dead.html", err
}

type peekData struct {
	Queue  string
	Letter client.DeadLetter
	Text   bool
}

func (d *Dashboard) peekPage(ctx context.Context, r *http.Request, v *view) (string, error) {
	name := r.PathValue("name")
	v.Title, v.Nav = "Dead letter", "queues"
	data := &peekData{Queue: name}
	v.Data = data
	p, err1 := strconv.Atoi(r.PathValue("partition"))
	seq, err2 := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err1 != nil || err2 != nil || p < 0 {
		return "peek.html", fmt.Errorf("bad dead-letter reference")
	}
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "peek.html", err
	}
	ls, err := qs.PeekDeadLetters(ctx, name, client.DeadFilter{Letters: []client.LetterRef{{Partition: p, Seq: seq}}})
	if err != nil {
		return "peek.html", err
	}
	if len(ls) != 1 {
		return "peek.html", fmt.Errorf("dead letter %d/%d %w (redriven or deleted?)", p, seq, errNotFound)
	}
	data.Letter, data.Text = ls[0], printable(ls[0].Body)
	return "peek.html", nil
}

type confirmData struct {
	Queue   string
	Action  string
	Q       deadQuery
	Letters []client.DeadLetter
	Refs    string
	More    bool
}

func (d *Dashboard) confirmPage(ctx context.Context, r *http.Request, v *view) (string, error) {
	name := r.PathValue("name")
	data := &confirmData{Queue: name, Action: r.PostFormValue("action")}
	v.Title, v.Nav, v.Data = "Confirm", "queues", data
	if data.Action != "redrive" && data.Action != "delete" {
		return "confirm.html", fmt.Errorf("unknown action %q", data.Action)
	}
	q, err := deadQueryOf(r.PostForm)
	data.Q = q
	if err != nil {
		return "confirm.html", err
	}
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "confirm.html", err
	}
	data.Letters, data.More, err = q.list(ctx, qs, name, deadActionMax)
	data.Refs = encodeRefs(data.Letters)
	return "confirm.html", err
}

func (d *Dashboard) applyDead(ctx context.Context, r *http.Request, v *view) (string, error) {
	name := r.PathValue("name")
	v.Title, v.Nav = "Dead letters of "+name, "queues"
	refs, err := decodeRefs(r.PostFormValue("letters"))
	if err != nil {
		return "error.html", err
	}
	qs, err := d.cl.Queues(ctx)
	if err != nil {
		return "error.html", err
	}
	f := client.DeadFilter{Letters: refs}
	var n int
	verb := "redrove"
	switch r.PostFormValue("action") {
	case "redrive":
		n, err = qs.RedriveDeadLetters(ctx, name, f)
	case "delete":
		verb = "deleted"
		n, err = qs.DeleteDeadLetters(ctx, name, f)
	default:
		return "error.html", fmt.Errorf("unknown action %q", r.PostFormValue("action"))
	}
	if err != nil {
		return "error.html", fmt.Errorf("%s %d dead letters, then: %w", verb, n, err)
	}
	d.logger.Info("dashboard: dead letters changed", "queue", name, "action", r.PostFormValue("action"), "count", n)
	back := "/queues/" + url.PathEscape(name) + "/dead?" + url.Values{"flash": {fmt.Sprintf("%s %d dead letters", verb, n)}}.Encode()
	return "", redirectTo(back)
}
