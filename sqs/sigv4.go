package sqs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ferrymq/ferry/internal/auth"
)

// Credentials finds the secret of an access key id and what its holder
// may do. ferryd maps each access key id to the Ferry client token of that
// name (its sqs_secret_key); with Config.Credentials nil, signatures are
// parsed but not verified and every request may do everything.
type Credentials interface {
	// Secret returns the secret access key of id, the token whose
	// permissions its requests have (nil: every permission), and whether
	// id is known.
	Secret(accessKeyID string) (secret string, tok *auth.Token, ok bool)
}

// StaticCredentials is a fixed map of access key ids to secrets, each
// with every permission.
type StaticCredentials map[string]string

// Secret returns the secret of id.
func (c StaticCredentials) Secret(id string) (string, *auth.Token, bool) {
	s, ok := c[id]
	return s, nil, ok
}

// TokenCredentials verifies signatures against the client tokens the
// function returns (a node's current set, so a reload applies to the
// next request): the access key id is a token's name, the secret access
// key its sqs_secret_key, and the request gets that token's permissions.
// A token without an SQS key cannot sign.
type TokenCredentials func() *auth.Set

// Secret implements Credentials.
func (f TokenCredentials) Secret(id string) (string, *auth.Token, bool) {
	tok, ok := f().ByName(id)
	if !ok || tok.SQSSecretKey == "" {
		return "", nil, false
	}
	return tok.SQSSecretKey, tok, true
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

// caller is who signed a request: the access key id and its secret, and
// the token whose permissions the request has (nil: every permission).
type caller struct {
	tok         *auth.Token
	key, secret string
}

// checkSignature parses the request's signature, and verifies it when the
// server has Credentials, returning its caller. A request without an
// Authorization header is accepted only while there are no Credentials.
func (s *Server) checkSignature(r *http.Request, body []byte) (caller, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		if s.cfg.Credentials != nil {
			return caller{}, fail(ErrIncompleteSignature, "request is not signed")
		}
		return caller{}, nil
	}
	sig, err := parseAuthorization(h)
	if err != nil || s.cfg.Credentials == nil {
		return caller{}, err
	}
	secret, tok, ok := s.cfg.Credentials.Secret(sig.AccessKeyID)
	if !ok {
		return caller{}, fail(ErrInvalidClientTokenID, "unknown access key id %q", truncate(sig.AccessKeyID, 64))
	}
	if err := checkFresh(r.Header.Get("X-Amz-Date"), time.Now()); err != nil {
		return caller{}, err
	}
	if err := s.checkScope(r, sig); err != nil {
		return caller{}, err
	}
	want := sign(r, body, sig, secret)
	if !hmac.Equal([]byte(want), []byte(sig.Signature)) {
		return caller{}, fail(ErrSignatureDoesNotMatch, "signature does not match")
	}
	return caller{tok: tok, key: sig.AccessKeyID, secret: secret}, nil
}

// sqsService is the service of an SQS credential scope.
const sqsService = "sqs"

// checkScope refuses a signature that does not cover what chooses the
// request's effect, or whose credential scope is not this server's: the
// signed headers must include host and, when the request has one (the
// JSON protocol's action), x-amz-target, so that a captured signature
// cannot be replayed as another action or to another endpoint (the
// method, path, query and body are always signed); the scope's date must
// be that of X-Amz-Date, its region the server's and its service sqs.
func (s *Server) checkScope(r *http.Request, sig signature) error {
	signed := func(h string) bool {
		return slices.ContainsFunc(sig.SignedHeaders, func(n string) bool { return strings.EqualFold(n, h) })
	}
	if !signed("host") {
		return fail(ErrIncompleteSignature, "the signed headers must include host")
	}
	if r.Header.Get("X-Amz-Target") != "" && !signed("x-amz-target") {
		return fail(ErrIncompleteSignature, "the signed headers must include x-amz-target")
	}
	if date := r.Header.Get("X-Amz-Date"); len(date) < 8 || sig.Date != date[:8] {
		return fail(ErrSignatureDoesNotMatch, "the credential scope's date %q is not the date of X-Amz-Date %q", truncate(sig.Date, 16), truncate(date, 32))
	}
	if sig.Region != s.cfg.Region {
		return fail(ErrSignatureDoesNotMatch, "credential should be scoped to a valid region, not %q (this endpoint is %q)", truncate(sig.Region, 32), s.cfg.Region)
	}
	if sig.Service != sqsService {
		return fail(ErrSignatureDoesNotMatch, "credential should be scoped to the correct service %q, not %q", sqsService, truncate(sig.Service, 32))
	}
	return nil
}

// signatureAgeMax is how far a signed request's X-Amz-Date may lie from
// the server's clock, either way, as SQS allows.
const signatureAgeMax = 15 * time.Minute

// checkFresh refuses a signature dated more than signatureAgeMax from now,
// so that a captured request cannot be replayed later.
func checkFresh(amzDate string, now time.Time) error {
	at, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return fail(ErrIncompleteSignature, "X-Amz-Date %q is not a basic ISO 8601 UTC time", truncate(amzDate, 32))
	}
	if d := now.Sub(at); d > signatureAgeMax || d < -signatureAgeMax {
		return fail(ErrRequestExpired, "signature dated %s, more than %s from the server's time", amzDate, signatureAgeMax)
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
