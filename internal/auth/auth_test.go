package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func hashOf(secret string) string { return HashSecret(secret) }

func TestParse_GrantsAndLookup(t *testing.T) {
	file := `{"tokens": [
	  {"name": "ops", "sha256": "` + hashOf("s-ops") + `", "cluster": ["admin"]},
	  {"name": "scraper", "sha256": "` + hashOf("s-scraper") + `", "cluster": ["metrics"]},
	  {"name": "orders", "sha256": "` + hashOf("s-orders") + `",
	   "permissions": [{"queues": ["orders.*", "billing"], "actions": ["send", "receive"]},
	                   {"queues": ["orders.eu"], "actions": ["admin"]}]}
	]}`
	s, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 {
		t.Fatalf("Len = %d", s.Len())
	}
	if _, ok := s.Lookup("nope"); ok {
		t.Fatal("unknown secret found")
	}
	if _, ok := s.Lookup(""); ok {
		t.Fatal("empty secret found")
	}
	ops, ok := s.Lookup("s-ops")
	if !ok || ops.Name != "ops" || !ops.Can(Admin, "anything") || !ops.CanCreate("x") {
		t.Fatalf("ops = %+v, %v", ops, ok)
	}
	sc, _ := s.Lookup("s-scraper")
	if !sc.Metrics || sc.ClusterAdmin || sc.Sees("orders.us") {
		t.Fatalf("scraper = %+v", sc)
	}
	o, _ := s.Lookup("s-orders")
	cases := []struct {
		a     Action
		queue string
		want  bool
	}{
		{Send, "orders.us", true}, {Receive, "orders.", true}, {Admin, "orders.us", false},
		{Admin, "orders.eu", true}, {Send, "billing", true}, {Send, "billing2", false},
		{Send, "orders", false}, {Receive, "other", false},
	}
	for _, c := range cases {
		if got := o.Can(c.a, c.queue); got != c.want {
			t.Errorf("Can(%s, %q) = %v, want %v", c.a, c.queue, got, c.want)
		}
	}
	if !o.Sees("billing") || o.Sees("other") || o.CanCreate("orders.new") || !o.CanCreate("orders.eu") {
		t.Fatal("Sees/CanCreate wrong")
	}
}

func TestParse_RangeChecks(t *testing.T) {
	h := hashOf("x")
	for name, file := range map[string]string{
		"short hash":        `{"tokens":[{"name":"a","sha256":"abcd","cluster":["admin"]}]}`,
		"long hash":         `{"tokens":[{"name":"a","sha256":"` + h + `00","cluster":["admin"]}]}`,
		"non-hex hash":      `{"tokens":[{"name":"a","sha256":"` + strings.Repeat("z", 64) + `","cluster":["admin"]}]}`,
		"unknown action":    `{"tokens":[{"name":"a","sha256":"` + h + `","permissions":[{"queues":["q"],"actions":["delete"]}]}]}`,
		"no actions":        `{"tokens":[{"name":"a","sha256":"` + h + `","permissions":[{"queues":["q"],"actions":[]}]}]}`,
		"empty patterns":    `{"tokens":[{"name":"a","sha256":"` + h + `","permissions":[{"queues":[],"actions":["send"]}]}]}`,
		"empty pattern":     `{"tokens":[{"name":"a","sha256":"` + h + `","permissions":[{"queues":[""],"actions":["send"]}]}]}`,
		"inner star":        `{"tokens":[{"name":"a","sha256":"` + h + `","permissions":[{"queues":["a*b"],"actions":["send"]}]}]}`,
		"bad queue chars":   `{"tokens":[{"name":"a","sha256":"` + h + `","permissions":[{"queues":["a/b"],"actions":["send"]}]}]}`,
		"unknown cluster":   `{"tokens":[{"name":"a","sha256":"` + h + `","cluster":["root"]}]}`,
		"no permission":     `{"tokens":[{"name":"a","sha256":"` + h + `"}]}`,
		"empty name":        `{"tokens":[{"name":"","sha256":"` + h + `","cluster":["admin"]}]}`,
		"unknown field":     `{"tokens":[{"name":"a","secret":"x","sha256":"` + h + `","cluster":["admin"]}]}`,
		"duplicate name":    `{"tokens":[{"name":"a","sha256":"` + h + `","cluster":["admin"]},{"name":"a","sha256":"` + hashOf("y") + `","cluster":["admin"]}]}`,
		"duplicate hash":    `{"tokens":[{"name":"a","sha256":"` + h + `","cluster":["admin"]},{"name":"b","sha256":"` + h + `","cluster":["admin"]}]}`,
		"trailing data":     `{"tokens":[]} {}`,
		"not json":          `tokens: []`,
		"too many patterns": `{"tokens":[{"name":"a","sha256":"` + h + `","permissions":[{"queues":[` + strings.Repeat(`"q",`, PatternsMax) + `"q"],"actions":["send"]}]}]}`,
	} {
		if _, err := Parse([]byte(file)); !errors.Is(err, ErrInvalidFile) {
			t.Errorf("%s: err = %v, want ErrInvalidFile", name, err)
		}
	}
	if _, err := Parse([]byte(`{"tokens":[{"name":"a","sha256":"` + h + `","permissions":[{"queues":["*"],"actions":["receive"]}]}]}`)); err != nil {
		t.Errorf("bare * refused: %v", err)
	}
}

func TestAddToFile_AppendsAndRefusesDuplicates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	secret, err := NewSecret()
	if err != nil || !strings.HasPrefix(secret, SecretPrefix) {
		t.Fatalf("NewSecret = %q, %v", secret, err)
	}
	if err := AddToFile(path, FileToken{Name: "ops", SHA256: HashSecret(secret), Cluster: []string{"admin"}}); err != nil {
		t.Fatal(err)
	}
	if err := AddToFile(path, FileToken{Name: "ops", SHA256: HashSecret("other"), Cluster: []string{"admin"}}); !errors.Is(err, ErrInvalidFile) {
		t.Fatalf("duplicate name: %v", err)
	}
	if err := AddToFile(path, FileToken{Name: "w", SHA256: HashSecret("w"), Permissions: []FilePermission{{Queues: []string{"q"}, Actions: []string{"send"}}}}); err != nil {
		t.Fatal(err)
	}
	s, err := LoadFile(path)
	if err != nil || s.Len() != 2 {
		t.Fatalf("LoadFile: %v, %v", s, err)
	}
	if tok, ok := s.Lookup(secret); !ok || tok.Name != "ops" {
		t.Fatal("generated secret not found")
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
}

// The example tokens file in docs/security.md parses.
func TestParse_DocumentedExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no json example in docs/security.md")
	}
	s, err := Parse([]byte(example))
	if err != nil || s.Len() != 3 {
		t.Fatalf("documented example: %v", err)
	}
}

func TestParse_SQSSecretKeyAndByName(t *testing.T) {
	ok := `{"tokens":[{"name":"app","sha256":"` + HashSecret("app-secret") + `","permissions":[{"queues":["orders"],"actions":["send"]}],"sqs_secret_key":"0123456789abcdef0123"}]}`
	set, err := Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	tok, found := set.ByName("app")
	if !found || tok.SQSSecretKey != "0123456789abcdef0123" || !tok.Can(Send, "orders") {
		t.Fatalf("ByName(app) = %+v, %v", tok, found)
	}
	if _, found := set.ByName("nobody"); found {
		t.Fatal("ByName found a token that is not in the file")
	}
	short := `{"tokens":[{"name":"app","sha256":"` + HashSecret("app-secret") + `","cluster":["admin"],"sqs_secret_key":"short"}]}`
	if _, err := Parse([]byte(short)); !errors.Is(err, ErrInvalidFile) {
		t.Fatalf("a 5-byte SQS key was accepted: %v", err)
	}
}

// TestReserved_NoPatternNoAdminReachesThem: a reserved queue is outside
// "*", a prefix pattern, its exact name and cluster admin; only the
// internal identity meets a need on it. Other queues are unchanged.
func TestReserved_NoPatternNoAdminReachesThem(t *testing.T) {
	file := `{"tokens": [
	  {"name": "ops", "sha256": "` + hashOf("s-ops") + `", "cluster": ["admin"]},
	  {"name": "every", "sha256": "` + hashOf("s-every") + `",
	   "permissions": [{"queues": ["*", "sqs.*", "sqs.meta"], "actions": ["send", "receive", "admin"]}]}
	]}`
	s, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	ops, _ := s.ByName("ops")
	every, _ := s.ByName("every")
	internal := &Token{Name: "node", ClusterAdmin: true, Internal: true}
	if !Reserved(SQSMetaQueue) || Reserved("sqs.metadata") || Reserved("orders") {
		t.Fatal("Reserved names the wrong queues")
	}
	for _, need := range []Need{NeedSee, NeedSend, NeedReceive, NeedAdmin, NeedReceiveOrAdmin} {
		for _, tok := range []*Token{ops, every} {
			if tok.Meets(need, SQSMetaQueue) {
				t.Errorf("%s meets %s on %s", tok.Name, need, SQSMetaQueue)
			}
			if !tok.Meets(need, "sqs.metadata") {
				t.Errorf("%s does not meet %s on an ordinary queue", tok.Name, need)
			}
		}
		if !internal.Meets(need, SQSMetaQueue) {
			t.Errorf("the internal identity does not meet %s on %s", need, SQSMetaQueue)
		}
	}
	if ops.Sees(SQSMetaQueue) || ops.CanCreate(SQSMetaQueue) || every.Sees(SQSMetaQueue) {
		t.Fatal("a token sees or creates a reserved queue")
	}
	var off *Token
	if !off.Meets(NeedCluster, SQSMetaQueue) {
		t.Fatal("auth off (nil token) must allow everything")
	}
	if every.Meets(NeedCluster, "") || !ops.Meets(NeedCluster, "") {
		t.Fatal("cluster admin need")
	}
}
