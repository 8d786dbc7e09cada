package sqs

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// handSigned returns a request for action signed correctly under secret,
// but with the given signed headers and credential scope: the signature
// itself always matches, so only the scope and header rules can refuse it.
func handSigned(action string, body []byte, headers []string, date, region, service string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9324/", bytes.NewReader(body))
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	req.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
	sig := signature{AccessKeyID: "AKIDFERRY", Date: date, Region: region, Service: service, SignedHeaders: headers}
	sig.Signature = sign(req, body, sig, "right")
	req.Header.Set("Authorization", sigV4Algorithm+" Credential=AKIDFERRY/"+date+"/"+region+"/"+service+"/aws4_request, SignedHeaders="+
		strings.Join(headers, ";")+", Signature="+sig.Signature)
	return req
}

// TestSigV4_SignedHeadersAndScope: a signature that leaves host or
// x-amz-target out of its signed headers is refused, so a captured
// SendMessage cannot be replayed as a PurgeQueue; a credential scope of
// another date, region or service is refused too.
func TestSigV4_SignedHeadersAndScope(t *testing.T) {
	s := New(Config{Credentials: StaticCredentials{"AKIDFERRY": "right"}, Region: "eu-west-1"})
	body := []byte(`{"QueueUrl":"http://127.0.0.1:9324/000000000000/jobs","MessageBody":"x"}`)
	today := time.Now().UTC().Format("20060102")
	all := []string{"host", "x-amz-date", "x-amz-target"}
	if _, err := s.checkSignature(handSigned("SendMessage", body, all, today, "eu-west-1", "sqs"), body); err != nil {
		t.Fatalf("a complete signature: %v", err)
	}
	// The captured SendMessage, its target changed: the signature covered
	// neither host nor the target.
	replay := handSigned("SendMessage", body, []string{"x-amz-date"}, today, "eu-west-1", "sqs")
	replay.Header.Set("X-Amz-Target", "AmazonSQS.PurgeQueue")
	if _, err := s.checkSignature(replay, body); !errors.Is(err, ErrIncompleteSignature) {
		t.Fatalf("signature without host and x-amz-target: %v", err)
	}
	for name, tc := range map[string]struct {
		headers               []string
		date, region, service string
		want                  error
	}{
		"no host":       {[]string{"x-amz-date", "x-amz-target"}, today, "eu-west-1", "sqs", ErrIncompleteSignature},
		"no target":     {[]string{"host", "x-amz-date"}, today, "eu-west-1", "sqs", ErrIncompleteSignature},
		"other date":    {all, "20200101", "eu-west-1", "sqs", ErrSignatureDoesNotMatch},
		"other region":  {all, today, "us-east-1", "sqs", ErrSignatureDoesNotMatch},
		"other service": {all, today, "eu-west-1", "sns", ErrSignatureDoesNotMatch},
		"upper case ok": {[]string{"Host", "x-amz-date", "X-Amz-Target"}, today, "eu-west-1", "sqs", nil},
	} {
		_, err := s.checkSignature(handSigned("SendMessage", body, tc.headers, tc.date, tc.region, tc.service), body)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// The query protocol has no target header: host is enough beside the
	// signed body.
	q := []byte("Action=PurgeQueue&QueueUrl=x")
	req := handSigned("PurgeQueue", q, []string{"host", "x-amz-date"}, today, "eu-west-1", "sqs")
	req.Header.Del("X-Amz-Target")
	if _, err := s.checkSignature(req, q); err != nil {
		t.Fatalf("query request signed with host: %v", err)
	}
}
