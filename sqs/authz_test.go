package sqs

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/wire"
)

// nativeWork states, independently of actionOps, what each SQS action
// does in native operations: the op and the queue of each, from the
// request's queue fields (name: QueueName, url: the queue QueueUrl names,
// src and dst: the queues of SourceArn and DestinationArn).
func nativeWork(action string, name, u, src, dst string) []struct {
	op    wire.Op
	queue string
	arn   bool
} {
	type w = struct {
		op    wire.Op
		queue string
		arn   bool
	}
	switch action {
	case "CreateQueue":
		return []w{{wire.OpCreateQueue, name, false}}
	case "GetQueueUrl":
		return []w{{wire.OpQueueStats, name, false}}
	case "ListQueues", "CancelMessageMoveTask":
		return nil
	case "GetQueueAttributes", "ListQueueTags", "ListDeadLetterSourceQueues":
		return []w{{wire.OpQueueStats, u, false}}
	case "SetQueueAttributes", "TagQueue", "UntagQueue", "AddPermission", "RemovePermission":
		return []w{{wire.OpUpdateQueue, u, false}}
	case "DeleteQueue":
		return []w{{wire.OpDeleteQueue, u, false}}
	case "PurgeQueue":
		return []w{{wire.OpPurge, u, false}}
	case "SendMessage", "SendMessageBatch":
		return []w{{wire.OpSend, u, false}}
	case "ReceiveMessage":
		return []w{{wire.OpReceive, u, false}}
	case "DeleteMessage", "DeleteMessageBatch":
		return []w{{wire.OpAck, u, false}}
	case "ChangeMessageVisibility", "ChangeMessageVisibilityBatch":
		return []w{{wire.OpExtend, u, false}, {wire.OpNack, u, false}}
	case "StartMessageMoveTask":
		return []w{{wire.OpDeadRedrive, src, true}, {wire.OpDeadRedrive, dst, true}}
	case "ListMessageMoveTasks":
		return []w{{wire.OpDeadList, src, true}}
	}
	return nil
}

var (
	propQueues   = []string{"orders-eu", "orders-us", "billing", "victim", "qa", "q", auth.SQSMetaQueue}
	propPatterns = []string{"*", "orders-*", "orders-eu", "billing", "q*", "qa", "sqs.*", auth.SQSMetaQueue, "vic*"}
)

// randomToken makes a token of random grants (sometimes cluster admin)
// through the tokens file parser.
func randomToken(t *testing.T, rng *rand.Rand) *auth.Token {
	ft := auth.FileToken{Name: "k", SHA256: auth.HashSecret("k-secret")}
	if rng.IntN(8) == 0 {
		ft.Cluster = []string{"admin"}
	}
	for range 1 + rng.IntN(3) {
		var p auth.FilePermission
		for range 1 + rng.IntN(2) {
			p.Queues = append(p.Queues, propPatterns[rng.IntN(len(propPatterns))])
		}
		for _, a := range []string{"send", "receive", "admin"} {
			if rng.IntN(2) == 0 {
				p.Actions = append(p.Actions, a)
			}
		}
		if len(p.Actions) == 0 {
			p.Actions = []string{"send"}
		}
		ft.Permissions = append(ft.Permissions, p)
	}
	data, _ := json.Marshal(auth.File{Tokens: []auth.FileToken{ft}})
	set, err := auth.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := set.ByName("k")
	return tok
}

// expectedDecision is the answer the rule gives: nil when every native
// operation is allowed by auth's table, else for the first refused one
// the answer of a missing queue when the token may not see it (AccessDenied
// for a create), AccessDenied when it may.
func expectedDecision(tok *auth.Token, action string, work []struct {
	op    wire.Op
	queue string
	arn   bool
}) error {
	for _, w := range work {
		if tok.Meets(auth.OpNeed(w.op), w.queue) {
			continue
		}
		switch {
		case tok.Sees(w.queue) || action == "CreateQueue":
			return ErrAccessDenied
		case w.arn:
			return ErrResourceNotFound
		}
		return ErrQueueDoesNotExist
	}
	return nil
}

// TestAuthorize_PropertyEveryActionAsItsNativeOps: for random tokens and
// every action, with every queue field naming a random (often different)
// queue, the decision on the JSON and the query protocol is the one auth's
// permission table gives the native operations the action performs, on
// the queues it performs them on; an allowed action may act on exactly
// those queues.
func TestAuthorize_PropertyEveryActionAsItsNativeOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 5))
	pick := func() string { return propQueues[rng.IntN(len(propQueues))] }
	names := make([]string, 0, len(actionOps))
	for a := range actionOps {
		names = append(names, a)
	}
	slices.Sort(names)
	for _, a := range names {
		if _, ok := actions[a]; !ok {
			t.Fatalf("actionOps has %s, which is no action", a)
		}
	}
	if len(actionOps) != len(actions) {
		t.Fatalf("%d actions, %d in actionOps: every action needs its rule", len(actions), len(actionOps))
	}
	for round := range 400 {
		tok := randomToken(t, rng)
		for _, action := range names {
			name, u, src, dst := pick(), pick(), pick(), pick()
			work := nativeWork(action, name, u, src, dst)
			want := expectedDecision(tok, action, work)
			fields := map[string]string{
				"QueueName": name, "QueueUrl": "https://h/000000000000/" + u,
				"SourceArn": "arn:aws:sqs:us-east-1:000000000000:" + src, "DestinationArn": "arn:aws:sqs:us-east-1:000000000000:" + dst,
			}
			body, _ := json.Marshal(fields)
			checked, err := authorize(tok, action, body)
			checkDecision(t, round, "JSON", action, fields, err, want, checked, work)
			// The query protocol, posted to the URL of yet another queue.
			form := url.Values{"Action": {action}}
			for k, v := range fields {
				form.Set(k, v)
			}
			hr := httptest.NewRequest(http.MethodPost, "https://h/000000000000/"+pick(), strings.NewReader(form.Encode()))
			qf, ferr := queryForm(hr, []byte(form.Encode()))
			if ferr != nil {
				t.Fatal(ferr)
			}
			in, jerr := queryToJSON(qf)
			if jerr != nil {
				t.Fatal(jerr)
			}
			checked, err = authorize(tok, action, in)
			checkDecision(t, round, "query", action, fields, err, want, checked, work)
		}
	}
}

func checkDecision(t *testing.T, round int, proto, action string, fields map[string]string, err, want error, checked []string, work []struct {
	op    wire.Op
	queue string
	arn   bool
}) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("round %d %s %s %v: refused (%v), the native ops are allowed", round, proto, action, fields, err)
		}
		for _, w := range work {
			if !slices.Contains(checked, w.queue) {
				t.Fatalf("round %d %s %s %v: %s not among the queues authorized %v", round, proto, action, fields, w.queue, checked)
			}
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("round %d %s %s %v: %v, want %v", round, proto, action, fields, err, want)
	}
}

// TestRequestQueue_RefusesQueuesNotAuthorized: a handler cannot act on a
// queue other than the ones checked for its request; without a token
// (signatures not verified) every queue is allowed, the reserved ones
// excepted by name checks.
func TestRequestQueue_RefusesQueuesNotAuthorized(t *testing.T) {
	tok := &auth.Token{Name: "k"}
	r := &request{tok: tok, checked: []string{"qa"}}
	if _, err := r.queue("qa"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.queue("victim"); !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("unchecked queue: %v", err)
	}
	if _, err := (&request{}).queue("victim"); err != nil {
		t.Fatalf("no token: %v", err)
	}
	if _, err := nameOfURL("https://h/000000000000/" + MetaQueue); !errors.Is(err, ErrQueueDoesNotExist) {
		t.Fatalf("the reserved queue by URL: %v", err)
	}
}

// TestRedriveTarget_RefusedBeforeAnyLookup: a RedrivePolicy naming an ARN
// of another region or account, a name SQS does not take, or a queue the
// caller may not see is refused as a missing target without asking the
// cluster (the server here has none).
func TestRedriveTarget_RefusedBeforeAnyLookup(t *testing.T) {
	s := New(Config{})
	r := &request{tok: &auth.Token{Name: "k", Grants: []auth.Grant{{Patterns: []string{"jobs"}, Actions: auth.Admin}}}}
	for _, arn := range []string{
		"arn:aws:sqs:eu-west-1:000000000000:jobs", "arn:aws:sqs:us-east-1:123456789012:jobs",
		"arn:aws:sqs:us-east-1:000000000000:" + MetaQueue, "arn:aws:sqs:us-east-1:000000000000:billing", "jobs",
	} {
		ch, err := parseAttributes("src", map[string]string{attrRedrivePolicy: `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":3}`}, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.checkRedriveTarget(t.Context(), r, ch); !errors.Is(err, ErrInvalidParameterValue) {
			t.Errorf("%s: %v, want InvalidParameterValue", arn, err)
		}
	}
	if err := s.checkRedriveTarget(t.Context(), r, attrChange{stored: map[string]string{attrRedrivePolicy: ""}}); err != nil {
		t.Fatalf("removing the policy: %v", err)
	}
}
