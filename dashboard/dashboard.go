// Package dashboard is the web dashboard every node serves on its HTTP
// admin port: cluster, queues, one queue with charts, and dead letters with
// peek, redrive and delete.
//
// Pages are rendered on the server with their data, so they work without
// JavaScript; a small embedded script refreshes the live parts every few
// seconds. Everything (templates, style, script) is embedded in the
// binary: nothing is fetched from elsewhere. State-changing requests are
// POST forms carrying a CSRF token bound to a cookie, and each one goes
// through a confirmation page first.
//
// The package does no authentication: it registers its handlers on the
// node's admin mux, behind whatever guards that mux.
package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/jsonview"
)

// ErrNoCluster is returned by a Cluster that cannot reach the cluster.
var ErrNoCluster = errors.New("dashboard: cluster not reachable")

// Queues is what the dashboard needs of a cluster client; *client.Client
// provides it.
type Queues interface {
	ListQueues(ctx context.Context, prefix string) ([]client.QueueInfo, error)
	QueueStats(ctx context.Context, name string) (client.Stats, error)
	DeadLetters(ctx context.Context, queue string, f client.DeadFilter) ([]client.DeadLetter, error)
	PeekDeadLetters(ctx context.Context, queue string, f client.DeadFilter) ([]client.DeadLetter, error)
	RedriveDeadLetters(ctx context.Context, queue string, f client.DeadFilter) (int, error)
	DeleteDeadLetters(ctx context.Context, queue string, f client.DeadFilter) (int, error)
	Pause(ctx context.Context, queue string) (client.QueuePause, error)
	Resume(ctx context.Context, queue string) (client.QueuePause, error)
	FindMessage(ctx context.Context, queue, id string) ([]client.MessageInfo, error)
	DeleteMessage(ctx context.Context, queue, id string) (int, error)
	CancelMessage(ctx context.Context, queue, id string) (int, error)
	PeekMessages(ctx context.Context, queue string, opts client.PeekOptions) ([]client.PeekedMessage, error)
	DeleteMatching(ctx context.Context, queue string, f client.MessageFilter, dryRun bool) (client.DeleteMatchingResult, error)
	ListSchedules(ctx context.Context, queue string) ([]client.ScheduleStatus, error)
}

// Cluster is what the dashboard needs of the serving node.
type Cluster interface {
	// Cluster returns membership, placement and meta leader as this node
	// sees them.
	Cluster(ctx context.Context) jsonview.Cluster
	// Replicas returns the replicas one node hosts with their applied
	// index; fwd holds the viewer's credentials headers to pass on.
	Replicas(ctx context.Context, node jsonview.Node, fwd http.Header) ([]jsonview.Replica, error)
	// Queues returns a cluster client.
	Queues(ctx context.Context) (Queues, error)
	// Shape returns every node's part in placement (lifecycle, replica
	// and leader counts), the moves in flight and the under-replicated
	// partitions, as this node's catalog and gossip see them.
	Shape(ctx context.Context) jsonview.Nodes
}

//go:embed web
var webFS embed.FS

// Limits of the dashboard.
const (
	// queuesShownMax bounds the queues listed on the queues page.
	queuesShownMax = 500
	// deadShownMax bounds the dead letters listed on one page.
	deadShownMax = 500
	// deadActionMax bounds the dead letters one redrive or delete
	// handles; a larger set is handled in several rounds.
	deadActionMax = 5000
	// requestTimeout bounds the cluster calls of one page.
	requestTimeout = 10 * time.Second
	csrfCookie     = "ferry_csrf"
)

// Dashboard serves the pages. Create it with New; Close stops its
// background sampling.
type Dashboard struct {
	cl     Cluster
	logger *slog.Logger
	tmpl   *template.Template
	secret [32]byte
	samp   *sampler
}

// New returns a dashboard drawing on cl.
func New(cl Cluster, logger *slog.Logger) *Dashboard {
	d := &Dashboard{cl: cl, logger: logger}
	if _, err := rand.Read(d.secret[:]); err != nil {
		panic("dashboard: no randomness: " + err.Error())
	}
	d.tmpl = template.Must(template.New("").Funcs(funcs).ParseFS(webFS, "web/*.html"))
	d.samp = newSampler(cl.Queues)
	return d
}

// Close stops the background sampling.
func (d *Dashboard) Close() { d.samp.close() }

// Register adds the dashboard's routes to mux.
func (d *Dashboard) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(webFS, "web/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", d.page(d.clusterPage))
	mux.HandleFunc("GET /queues", d.page(d.queuesPage))
	mux.HandleFunc("GET /queues/{name}", d.page(d.queuePage))
	mux.HandleFunc("GET /queues/{name}/dead", d.page(d.deadPage))
	mux.HandleFunc("GET /queues/{name}/dead/{partition}/{seq}", d.page(d.peekPage))
	mux.HandleFunc("POST /queues/{name}/dead/confirm", d.post(d.confirmPage))
	mux.HandleFunc("POST /queues/{name}/dead/apply", d.post(d.applyDead))
	mux.HandleFunc("POST /queues/{name}/pause", d.post(d.applyPause))
	mux.HandleFunc("GET /queues/{name}/messages", d.page(d.messagePage))
	mux.HandleFunc("POST /queues/{name}/messages/delete", d.post(d.applyMessageDelete))
	mux.HandleFunc("GET /queues/{name}/browse", d.page(d.browsePage))
	mux.HandleFunc("POST /queues/{name}/browse/confirm", d.post(d.browseConfirmPage))
	mux.HandleFunc("POST /queues/{name}/browse/apply", d.post(d.applyBrowseDelete))
}

// view is what every page template gets.
type view struct {
	Title string
	Nav   string
	CSRF  string
	Flash string
	Error string
	// Live asks the page's script to refresh its data-live parts.
	Live bool
	Data any
}

// pageFunc renders one page: it returns the template name and its data,
// or an error shown in place of the data.
type pageFunc func(ctx context.Context, r *http.Request, v *view) (string, error)

func (d *Dashboard) page(f pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d.samp.touch()
		d.serve(w, r, f)
	}
}

// post checks the CSRF token of a form before running f.
func (d *Dashboard) post(f pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
			return
		}
		c, err := r.Cookie(csrfCookie)
		if err != nil || !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(d.csrfFor(c.Value))) {
			http.Error(w, "missing or stale form token: reload the page and try again", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && o != "null" {
			if u, err := url.Parse(o); err != nil || u.Host != r.Host {
				http.Error(w, "cross-origin form refused", http.StatusForbidden)
				return
			}
		}
		d.serve(w, r, f)
	}
}

func (d *Dashboard) serve(w http.ResponseWriter, r *http.Request, f pageFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	v := &view{CSRF: d.csrfToken(w, r), Flash: r.URL.Query().Get("flash")}
	name, err := f(ctx, r, v)
	var redirect redirectTo
	switch {
	case errors.As(err, &redirect):
		http.Redirect(w, r, string(redirect), http.StatusSeeOther)
		return
	case errors.Is(err, errNotFound):
		w.WriteHeader(http.StatusNotFound)
		v.Error = err.Error()
	case err != nil:
		v.Error = err.Error()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Cache-Control", "no-store")
	if err := d.tmpl.ExecuteTemplate(w, name, v); err != nil {
		d.logger.Warn("dashboard: render", "page", name, "err", err)
	}
}

// redirectTo, returned by a page, sends the browser there (after a POST).
type redirectTo string

func (r redirectTo) Error() string { return "redirect to " + string(r) }

var errNotFound = errors.New("not found")

// csrfToken returns the form token for this browser, setting the cookie
// it is bound to when the browser has none.
func (d *Dashboard) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 32 {
		return d.csrfFor(c.Value)
	}
	var b [16]byte
	rand.Read(b[:])
	val := hex.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: val, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil})
	return d.csrfFor(val)
}

func (d *Dashboard) csrfFor(cookie string) string {
	m := hmac.New(sha256.New, d.secret[:])
	m.Write([]byte("csrf:" + cookie))
	return hex.EncodeToString(m.Sum(nil))
}
