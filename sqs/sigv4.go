package sqs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Credentials finds the secret of an access key id. When the cluster has
// client tokens, an implementation maps each access key id to a Ferry
// token and its secret; until then Config.Credentials is nil and
// signatures are parsed but not verified.
type Credentials interface {
	// Secret returns the secret access key of id, and whether id is known.
	Secret(accessKeyID string) (secret string, ok bool)
}

// StaticCredentials is a fixed map of access key ids to secrets.
type StaticCredentials map[string]string

// Secret returns the secret of id.
func (c StaticCredentials) Secret(id string) (string, bool) {
	s, ok := c[id]
	return s, ok
}

const sigV4Algorithm = "AWS4-HMAC-SHA256"

// signature is a parsed Signature Version 4 Authorization header.
type signature struct {
	AccessKeyID   string
	Date          string // yyyymmdd of the credential scope
	Region        string
	Service       string
	SignedHeaders []string
	Signature     string
}

// parseAuthorization reads an Authorization header of the form
// "AWS4-HMAC-SHA256 Credential=ID/DATE/REGION/SERVICE/aws4_request,
// SignedHeaders=a;b, Signature=HEX".
func parseAuthorization(h string) (signature, error) {
	var sig signature
	rest, ok := strings.CutPrefix(h, sigV4Algorithm+" ")
	if !ok || len(h) > 4096 {
		return sig, fail(ErrIncompleteSignature, "Authorization header is not %s", sigV4Algorithm)
	}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return sig, fail(ErrIncompleteSignature, "Authorization header part %q has no '='", truncate(part, 32))
		}
		switch k {
		case "Credential":
			f := strings.Split(v, "/")
			if len(f) != 5 || f[4] != "aws4_request" || f[0] == "" {
				return sig, fail(ErrIncompleteSignature, "Credential %q is not ID/DATE/REGION/SERVICE/aws4_request", truncate(v, 64))
			}
			sig.AccessKeyID, sig.Date, sig.Region, sig.Service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			sig.SignedHeaders = strings.Split(v, ";")
		case "Signature":
			sig.Signature = v
		}
	}
	if sig.AccessKeyID == "" || len(sig.SignedHeaders) == 0 || sig.Signature == "" {
		return sig, fail(ErrIncompleteSignature, "Authorization header lacks Credential, SignedHeaders or Signature")
	}
	return sig, nil
}

// checkSignature parses the request's signature, and verifies it when the
// server has Credentials. A request without an Authorization header is
// accepted only while there are no Credentials.
func (s *Server) checkSignature(r *http.Request, body []byte) error {
	h := r.Header.Get("Authorization")
	if h == "" {
		if s.cfg.Credentials != nil {
			return fail(ErrIncompleteSignature, "request is not signed")
		}
		return nil
	}
	sig, err := parseAuthorization(h)
	if err != nil || s.cfg.Credentials == nil {
		return err
	}
	secret, ok := s.cfg.Credentials.Secret(sig.AccessKeyID)
	if !ok {
		return fail(ErrInvalidClientTokenID, "unknown access key id %q", truncate(sig.AccessKeyID, 64))
	}
	want := sign(r, body, sig, secret)
	if !hmac.Equal([]byte(want), []byte(sig.Signature)) {
		return fail(ErrSignatureDoesNotMatch, "signature does not match")
	}
	return nil
}

// sign computes the Signature Version 4 signature of r under secret.
func sign(r *http.Request, body []byte, sig signature, secret string) string {
	var canon strings.Builder
	canon.WriteString(r.Method + "\n")
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	canon.WriteString(path + "\n")
	canon.WriteString(canonicalQuery(r.URL.Query()) + "\n")
	for _, name := range sig.SignedHeaders {
		v := r.Header.Values(name)
		switch {
		case strings.EqualFold(name, "host"):
			v = []string{r.Host}
		case strings.EqualFold(name, "content-length") && len(v) == 0:
			v = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
		canon.WriteString(strings.ToLower(name) + ":" + strings.Join(trimAll(v), ",") + "\n")
	}
	canon.WriteString("\n" + strings.Join(sig.SignedHeaders, ";") + "\n")
	sum := sha256.Sum256(body)
	canon.WriteString(hex.EncodeToString(sum[:]))
	creq := sha256.Sum256([]byte(canon.String()))
	scope := sig.Date + "/" + sig.Region + "/" + sig.Service + "/aws4_request"
	toSign := sigV4Algorithm + "\n" + r.Header.Get("X-Amz-Date") + "\n" + scope + "\n" + hex.EncodeToString(creq[:])
	key := hmacSHA256([]byte("AWS4"+secret), sig.Date)
	for _, part := range []string{sig.Region, sig.Service, "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	return hex.EncodeToString(hmacSHA256(key, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func trimAll(v []string) []string {
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = strings.Join(strings.Fields(s), " ")
	}
	return out
}

func canonicalQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			parts = append(parts, escape(k)+"="+escape(v))
		}
	}
	return strings.Join(parts, "&")
}

func escape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}
