// Package auth reads a node's tokens file and answers what a token may do.
//
// A token is a random secret a client presents once per connection. The
// tokens file keeps only the SHA-256 hash of each secret (secrets are 32
// random bytes, so a plain hash is enough to keep them safe at rest), with
// the token's name and permissions:
//
//	{
//	  "tokens": [
//	    {"name": "ops", "sha256": "<64 hex digits>", "cluster": ["admin"]},
//	    {"name": "scraper", "sha256": "<64 hex digits>", "cluster": ["metrics"]},
//	    {"name": "orders-worker", "sha256": "<64 hex digits>",
//	     "permissions": [{"queues": ["orders.*", "billing"], "actions": ["send", "receive"]}]}
//	  ]
//	}
//
// Queue permissions grant actions on queues named exactly, or on every
// queue whose name starts with a prefix when the pattern ends in "*" ("*"
// alone is every queue):
//
//   - send: send messages.
//   - receive: receive, ack, nack, extend, reject and peek; the read side
//     of a queue.
//   - admin: update, delete and purge the queue, list, peek, redrive and
//     delete its dead letters, peek its messages; and create queues whose
//     names the pattern matches.
//
// Any of the three lets the token see the queue in listings and read its
// stats. Cluster permissions are "admin", every right on every queue plus
// cluster operations (creating any queue, removing nodes, the HTTP admin
// API and /metrics), and "metrics", reading /metrics only.
//
// The reserved queues (Reserved) are outside every pattern and every
// token's reach. OpNeed is the table of what each operation of the client
// protocol needs; Token.Allows checks a token against it.
//
// Lookups compare the hash of the presented secret with every entry in
// constant time.
package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ferrymq/ferry/meta"
)

// Errors of the package.
var (
	// ErrInvalidFile is returned for a tokens file that cannot be parsed or
	// breaks a rule; the message names the entry and field.
	ErrInvalidFile = errors.New("auth: invalid tokens file")
)

// Bounds of a tokens file.
const (
	// FileBytesMax is the largest tokens file read.
	FileBytesMax = 1 << 20
	// TokensMax is the most tokens one file holds.
	TokensMax = 1000
	// NameBytesMax is the longest token name.
	NameBytesMax = 128
	// PermissionsMax is the most queue permissions of one token.
	PermissionsMax = 64
	// PatternsMax is the most queue patterns of one permission.
	PatternsMax = 64
	// SecretBytes is the number of random bytes in a generated secret.
	SecretBytes = 32
	// SecretPrefix starts every generated secret, so that a token is
	// recognisable in a config or a leak scan.
	SecretPrefix = "ferry_"
	// SQSKeyBytesMin and SQSKeyBytesMax bound an SQS secret access key.
	SQSKeyBytesMin, SQSKeyBytesMax = 16, 128
)

// Action is something a token may do to a queue.
type Action uint8

// Queue actions, as bits of a set.
const (
	// Send enqueues messages.
	Send Action = 1 << iota
	// Receive leases, settles and peeks messages.
	Receive
	// Admin manages the queue and its dead letters.
	Admin
)

var actionNames = map[string]Action{"send": Send, "receive": Receive, "admin": Admin}

// String names the actions of the set, comma-separated.
func (a Action) String() string {
	var out []string
	for _, n := range []string{"send", "receive", "admin"} {
		if a&actionNames[n] != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// Token is one entry of a tokens file: a name and what it may do.
type Token struct {
	// Name identifies the token in logs; unique within the file.
	Name string
	// ClusterAdmin grants every action on every queue and cluster
	// operations.
	ClusterAdmin bool
	// Metrics grants reading /metrics.
	Metrics bool
	// Internal marks the cluster's own identity (a node certificate on
	// the client port): the only one that reaches the reserved queues
	// (Reserved). A tokens file never sets it.
	Internal bool
	// Grants are the queue permissions.
	Grants []Grant
	// SQSSecretKey is the secret access key that signs SQS requests made
	// with the token's name as access key id; empty when the token has
	// none.
	SQSSecretKey string

	hash [sha256.Size]byte
}

// Grant gives actions on the queues matching any of its patterns.
type Grant struct {
	// Patterns are exact queue names, or prefixes followed by "*".
	Patterns []string
	// Actions is the set of actions granted.
	Actions Action
}

// Can reports whether the token may do action on the named queue.
func (t *Token) Can(action Action, queue string) bool {
	return t.actions(queue)&action != 0
}

// CanCreate reports whether the token may create a queue of that name:
// cluster admin, or queue admin on a pattern matching it.
func (t *Token) CanCreate(queue string) bool { return t.Can(Admin, queue) }

// Sees reports whether the token has any permission on the queue, which
// lets it see the queue in listings and read its stats.
func (t *Token) Sees(queue string) bool { return t.actions(queue) != 0 }

func (t *Token) actions(queue string) Action {
	if Reserved(queue) {
		if t.Internal {
			return Send | Receive | Admin
		}
		return 0
	}
	if t.ClusterAdmin {
		return Send | Receive | Admin
	}
	var out Action
	for _, g := range t.Grants {
		for _, p := range g.Patterns {
			if match(p, queue) {
				out |= g.Actions
			}
		}
	}
	return out
}

// match reports whether a queue name matches a pattern: equal, or
// starting with the pattern's prefix when it ends in "*".
func match(pattern, queue string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(queue, prefix)
	}
	return pattern == queue
}

// Set is a parsed tokens file. The zero Set has no tokens.
type Set struct {
	tokens []Token
}

// ByName returns the token of that name (names are not secret: use it
// only where the caller proves knowledge of a secret another way, as an
// SQS signature does).
func (s *Set) ByName(name string) (*Token, bool) {
	if s == nil {
		return nil, false
	}
	for i := range s.tokens {
		if s.tokens[i].Name == name {
			return &s.tokens[i], true
		}
	}
	return nil, false
}

// Len returns the number of tokens.
func (s *Set) Len() int { return len(s.tokens) }

// Lookup returns the token whose hash matches the secret's. Every entry is
// compared, in constant time each, whatever matches.
func (s *Set) Lookup(secret string) (*Token, bool) {
	if s == nil || secret == "" {
		return nil, false
	}
	h := sha256.Sum256([]byte(secret))
	found := -1
	for i := range s.tokens {
		if subtle.ConstantTimeCompare(h[:], s.tokens[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	return &s.tokens[found], true
}

// LoadFile reads and parses a tokens file of at most FileBytesMax bytes.
func LoadFile(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, FileBytesMax+1))
	if err != nil {
		return nil, err
	}
	if len(data) > FileBytesMax {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalidFile, path, FileBytesMax)
	}
	return Parse(data)
}

// File is the JSON form of a tokens file.
type File struct {
	// Tokens are the entries, in any order.
	Tokens []FileToken `json:"tokens"`
}

// FileToken is the JSON form of one token.
type FileToken struct {
	// Name identifies the token; 1..NameBytesMax printable bytes, unique.
	Name string `json:"name"`
	// SHA256 is the hex SHA-256 of the secret (64 digits).
	SHA256 string `json:"sha256"`
	// Cluster lists cluster permissions: "admin", "metrics".
	Cluster []string `json:"cluster,omitempty"`
	// Permissions list queue permissions.
	Permissions []FilePermission `json:"permissions,omitempty"`
	// SQSSecretKey, when set, lets the token sign requests to the
	// SQS-compatible API: the access key id is the token's name and this
	// is the secret access key (SQSKeyBytesMin..SQSKeyBytesMax printable
	// bytes). Signature Version 4 is a shared-secret scheme, so unlike the
	// token's own secret this key is kept as is: keep the file readable
	// by ferryd only.
	SQSSecretKey string `json:"sqs_secret_key,omitempty"`
}

// FilePermission is the JSON form of one queue permission.
type FilePermission struct {
	// Queues are exact queue names or prefixes ending in "*".
	Queues []string `json:"queues"`
	// Actions are "send", "receive" and "admin".
	Actions []string `json:"actions"`
}

// Parse parses a tokens file. Unknown fields, unknown actions or cluster
// permissions, malformed hashes, empty or malformed patterns, duplicate
// names or hashes, a token with no permission at all, and anything beyond
// the bounds of this package are errors wrapping ErrInvalidFile.
func Parse(data []byte) (*Set, error) {
	if len(data) > FileBytesMax {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidFile, len(data), FileBytesMax)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidFile, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrInvalidFile)
	}
	if len(f.Tokens) > TokensMax {
		return nil, fmt.Errorf("%w: %d tokens, more than %d", ErrInvalidFile, len(f.Tokens), TokensMax)
	}
	s := &Set{tokens: make([]Token, 0, len(f.Tokens))}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]string{}
	for i, ft := range f.Tokens {
		t, err := parseToken(ft)
		if err != nil {
			return nil, fmt.Errorf("%w: token %d (%q): %v", ErrInvalidFile, i, ft.Name, err)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("%w: token %d: name %q used twice", ErrInvalidFile, i, t.Name)
		}
		if other, dup := hashes[t.hash]; dup {
			return nil, fmt.Errorf("%w: token %d (%q): same hash as %q", ErrInvalidFile, i, t.Name, other)
		}
		names[t.Name], hashes[t.hash] = true, t.Name
		s.tokens = append(s.tokens, t)
	}
	return s, nil
}

func parseToken(ft FileToken) (Token, error) {
	t := Token{Name: ft.Name}
	if len(ft.Name) == 0 || len(ft.Name) > NameBytesMax || !printable(ft.Name) {
		return t, fmt.Errorf("name: want 1..%d printable bytes", NameBytesMax)
	}
	h, err := hex.DecodeString(ft.SHA256)
	if err != nil || len(h) != sha256.Size {
		return t, fmt.Errorf("sha256: want %d hex digits, got %d characters", 2*sha256.Size, len(ft.SHA256))
	}
	copy(t.hash[:], h)
	for _, c := range ft.Cluster {
		switch c {
		case "admin":
			t.ClusterAdmin = true
		case "metrics":
			t.Metrics = true
		default:
			return t, fmt.Errorf("cluster: unknown permission %q (want admin or metrics)", c)
		}
	}
	if len(ft.Permissions) > PermissionsMax {
		return t, fmt.Errorf("permissions: %d, more than %d", len(ft.Permissions), PermissionsMax)
	}
	for j, p := range ft.Permissions {
		g, err := parseGrant(p)
		if err != nil {
			return t, fmt.Errorf("permission %d: %v", j, err)
		}
		t.Grants = append(t.Grants, g)
	}
	if ft.SQSSecretKey != "" {
		if n := len(ft.SQSSecretKey); n < SQSKeyBytesMin || n > SQSKeyBytesMax || !printable(ft.SQSSecretKey) {
			return t, fmt.Errorf("sqs_secret_key: want %d..%d printable bytes", SQSKeyBytesMin, SQSKeyBytesMax)
		}
		t.SQSSecretKey = ft.SQSSecretKey
	}
	if !t.ClusterAdmin && !t.Metrics && len(t.Grants) == 0 {
		return t, errors.New("no permission at all")
	}
	return t, nil
}

func parseGrant(p FilePermission) (Grant, error) {
	var g Grant
	if len(p.Queues) == 0 || len(p.Queues) > PatternsMax {
		return g, fmt.Errorf("queues: want 1..%d patterns, got %d", PatternsMax, len(p.Queues))
	}
	for _, q := range p.Queues {
		if err := checkPattern(q); err != nil {
			return g, err
		}
	}
	if len(p.Actions) == 0 {
		return g, errors.New("actions: none given (want send, receive or admin)")
	}
	for _, a := range p.Actions {
		bit, ok := actionNames[a]
		if !ok {
			return g, fmt.Errorf("actions: unknown action %q (want send, receive or admin)", a)
		}
		g.Actions |= bit
	}
	g.Patterns = append([]string(nil), p.Queues...)
	return g, nil
}

// checkPattern accepts a valid queue name, "*", or a prefix of a valid
// queue name followed by "*".
func checkPattern(p string) error {
	prefix, wild := strings.CutSuffix(p, "*")
	switch {
	case p == "":
		return errors.New("queues: empty pattern")
	case wild && prefix == "":
		return nil
	case strings.Contains(prefix, "*"):
		return fmt.Errorf("queues: pattern %q: '*' only at the end", p)
	}
	if err := meta.ValidateName(prefix); err != nil {
		return fmt.Errorf("queues: pattern %q: %v", p, err)
	}
	return nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// NewSecret returns a new random secret: SecretPrefix and the URL-safe
// base64 of SecretBytes random bytes.
func NewSecret() (string, error) {
	b := make([]byte, SecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// HashSecret returns the hex SHA-256 of a secret, as the tokens file
// keeps it.
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// AddToFile appends an entry to the tokens file at path, creating it (mode
// 0600) when missing. The result must parse: a duplicate name or an entry
// breaking a rule changes nothing. The file is replaced atomically.
func AddToFile(path string, entry FileToken) error {
	var f File
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if _, err := Parse(data); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidFile, path, err)
		}
	}
	f.Tokens = append(f.Tokens, entry)
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	out = append(out, '\n')
	if _, err := Parse(out); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
