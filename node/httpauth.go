package node

import (
	"html/template"
	"net/http"
	"strings"

	"github.com/ferrymq/ferry/internal/auth"
)

// HTTP authentication. When the node has tokens, every path of the admin
// port but /healthz, /readyz and /login needs a token: the header
// "Authorization: Bearer <token>", or the session cookie the /login form
// sets for browsers. /metrics takes a token with the metrics or the
// cluster admin permission; everything else, including paths added later
// and unknown ones, takes cluster admin (deny by default). A request
// without a usable token gets 401 (a browser's GET / is sent to /login
// instead), a token without the permission 403.
//
// The cookie holds the token itself, HttpOnly and SameSite=Strict (and
// Secure over TLS), so a page of another site can neither read it nor have
// the browser send it; a revoked token stops working in the cookie at
// once.
const (
	// sessionCookie names the cookie /login sets.
	sessionCookie = "ferry_token"
	// sessionMaxAgeSeconds is the cookie's lifetime.
	sessionMaxAgeSeconds = 12 * 60 * 60
)

// openPaths need no token.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true, "/login": true, "/logout": true}

// requireAuth wraps the admin handler with the token check; with auth off
// it returns h unchanged.
func (n *Node) requireAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur := n.auth.load()
		if cur == nil || openPaths[r.URL.Path] {
			h.ServeHTTP(w, r)
			return
		}
		secret := httpToken(r)
		tok, ok := cur.set.Lookup(secret)
		if !ok {
			if r.URL.Path == "/" && r.Method == http.MethodGet && r.Header.Get("Authorization") == "" {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="ferry"`)
			msg := "a token is required: Authorization: Bearer <token>\n"
			if secret != "" {
				msg = "unknown token\n"
			}
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		if !httpAllowed(tok, r.URL.Path) {
			http.Error(w, "token "+tok.Name+" lacks the permission for "+r.URL.Path+"\n", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r.WithContext(withViewerToken(r.Context(), secret)))
	})
}

// httpAllowed reports whether tok may read path: /metrics with the metrics
// or cluster admin permission, anything else with cluster admin.
func httpAllowed(tok *auth.Token, path string) bool {
	if path == "/metrics" {
		return tok.Metrics || tok.ClusterAdmin
	}
	return tok.ClusterAdmin
}

// httpToken returns the bearer token of the request, else its session
// cookie's, else "".
func httpToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		return c.Value
	}
	return ""
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Ferry: sign in</title></head>
<body>
<h1>Ferry node {{.Node}}</h1>
{{if .Failed}}<p><strong>Unknown token.</strong></p>{{end}}
<form method="post" action="/login">
<label>Token <input type="password" name="token" autocomplete="current-password" autofocus></label>
<button type="submit">Sign in</button>
</form>
</body></html>
`))

// handleLogin serves the sign-in form (GET) and checks a posted token
// (POST): a known token is set as the session cookie and the browser is
// sent to /; an unknown one gets the form again with 401.
func (n *Node) handleLogin(w http.ResponseWriter, r *http.Request) {
	page := struct {
		Node   string
		Failed bool
	}{Node: n.cfg.ID}
	cur := n.auth.load()
	if r.Method == http.MethodPost && cur != nil {
		secret := r.PostFormValue("token")
		if _, ok := cur.set.Lookup(secret); ok {
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: secret, Path: "/", MaxAge: sessionMaxAgeSeconds,
				HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		page.Failed = true
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if page.Failed {
		w.WriteHeader(http.StatusUnauthorized)
	}
	loginPage.Execute(w, page)
}

// handleLogout clears the session cookie and sends the browser to /login.
func handleLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
