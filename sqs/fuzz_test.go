package sqs

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"

	"github.com/ferrymq/ferry/client"
)

// FuzzSQS_DecodeInput feeds arbitrary receipt handles, query strings and
// Authorization headers to the decoders: each returns a value or an SQS
// error, never panics, and a decoded handle names the queue asked for.
func FuzzSQS_DecodeInput(f *testing.F) {
	f.Add(encodeHandle(client.Receipt{Queue: "q", Partition: 1, Seq: 2, Attempt: 3}),
		"Action=SendMessageBatch&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=n",
		"AWS4-HMAC-SHA256 Credential=AK/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=00")
	f.Add("", "Attribute.0.Name=x&Attribute..=&Tag.99999999999999999999.Key=k", "AWS4-HMAC-SHA256 ,,,=")
	f.Fuzz(func(t *testing.T, handle, query, auth string) {
		if r, err := decodeHandle("q", handle); err == nil {
			if r.Queue != "q" {
				t.Fatalf("handle of queue %q accepted for q", r.Queue)
			}
		} else if !isSQSError(err) {
			t.Fatalf("handle: %v is not an SQS error", err)
		}
		if form, err := url.ParseQuery(query); err == nil {
			b, err := queryToJSON(form)
			if err == nil && !json.Valid(b) {
				t.Fatalf("query gave invalid JSON %s", b)
			}
			if err != nil && !isSQSError(err) {
				t.Fatalf("query: %v is not an SQS error", err)
			}
		}
		if _, err := parseAuthorization(auth); err != nil && !errors.Is(err, ErrIncompleteSignature) {
			t.Fatalf("authorization: %v", err)
		}
	})
}

func isSQSError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
