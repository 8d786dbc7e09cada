package sqs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
)

// TestMD5OfAttributesKnownValue checks the attribute digest against a value
// SQS itself returned for this attribute.
func TestMD5OfAttributesKnownValue(t *testing.T) {
	got := md5OfAttributes(map[string]attributeValue{
		"AtTimestamp": {DataType: "String", StringValue: "2021-02-15T12:00:33+09:00"},
	})
	if want := "9fd5e217089075be61cd1d67e35e5117"; got != want {
		t.Fatalf("MD5OfMessageAttributes = %s, want %s", got, want)
	}
	if md5OfAttributes(nil) != "" {
		t.Fatal("no attributes must give an empty digest")
	}
}

// TestMD5OfAttributesOrderAndTransport: the digest does not depend on map
// order and tells binary from string values of the same bytes.
func TestMD5OfAttributesOrderAndTransport(t *testing.T) {
	a := map[string]attributeValue{"b": {DataType: "String", StringValue: "x"}, "a": {DataType: "Number", StringValue: "1"}}
	first := md5OfAttributes(a)
	for range 20 {
		if md5OfAttributes(a) != first {
			t.Fatal("digest depends on map order")
		}
	}
	s := md5OfAttributes(map[string]attributeValue{"k": {DataType: "String", StringValue: "v"}})
	b := md5OfAttributes(map[string]attributeValue{"k": {DataType: "Binary", BinaryValue: []byte("v")}})
	if s == b {
		t.Fatal("binary and string values share a digest")
	}
}

func TestAttributesHeadersRoundTrip(t *testing.T) {
	in := map[string]attributeValue{
		"s":          {DataType: "String", StringValue: "plain"},
		"n":          {DataType: "Number.int", StringValue: "-12.5"},
		"bin":        {DataType: "Binary", BinaryValue: []byte{0, 0xff, 7}},
		"dotted.key": {DataType: "String.custom", StringValue: "c"},
	}
	if _, err := checkAttributes(in); err != nil {
		t.Fatal(err)
	}
	h := attributesToHeaders(in)
	if h["s"] != "plain" {
		t.Fatalf("a String attribute is not a plain header: %v", h)
	}
	out := headersToAttributes(h)
	if md5OfAttributes(out) != md5OfAttributes(in) || len(out) != len(in) {
		t.Fatalf("round trip changed the attributes: %v -> %v", in, out)
	}
	// A header set by a Ferry producer reads as a String attribute.
	if got := headersToAttributes(map[string]string{"trace": "t1"}); got["trace"].DataType != "String" {
		t.Fatalf("plain header: %v", got)
	}
}

func TestCheckAttributesRefuses(t *testing.T) {
	for name, attrs := range map[string]map[string]attributeValue{
		"reserved prefix": {"AWS.x": {DataType: "String", StringValue: "v"}},
		"bad name":        {"a b": {DataType: "String", StringValue: "v"}},
		"empty value":     {"a": {DataType: "String"}},
		"not a number":    {"a": {DataType: "Number", StringValue: "ten"}},
		"unknown type":    {"a": {DataType: "Blob", StringValue: "v"}},
		"control char":    {"a": {DataType: "String", StringValue: "\x00"}},
	} {
		if _, err := checkAttributes(attrs); !errors.Is(err, ErrInvalidParameterValue) {
			t.Errorf("%s: %v, want InvalidParameterValue", name, err)
		}
	}
	many := map[string]attributeValue{}
	for i := range 11 {
		many[string(rune('a'+i))] = attributeValue{DataType: "String", StringValue: "v"}
	}
	if _, err := checkAttributes(many); !errors.Is(err, ErrInvalidParameterValue) {
		t.Errorf("11 attributes: %v", err)
	}
}

func TestReceiptHandle(t *testing.T) {
	r := client.Receipt{Queue: "orders", Partition: 2, Seq: 99, Attempt: 3}
	h := encodeHandle(r)
	got, err := decodeHandle("orders", h)
	if err != nil || got != r {
		t.Fatalf("decode: %v %v", got, err)
	}
	for name, bad := range map[string]string{
		"other queue": encodeHandle(client.Receipt{Queue: "other", Partition: 0, Seq: 1, Attempt: 1}),
		"not base64":  "%%%",
		"no prefix":   "b3JkZXJzOjA6MTox",
		"too long":    string(bytes.Repeat([]byte("A"), receiptHandleMax+1)),
	} {
		if _, err := decodeHandle("orders", bad); !errors.Is(err, ErrReceiptHandleIsInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidQueueName(t *testing.T) {
	for name, want := range map[string]bool{
		"orders": true, "a-b_c": true, "jobs.fifo": true, ".fifo": false, "": false,
		"a.b": false, MetaQueue: false, string(bytes.Repeat([]byte("x"), 81)): false,
	} {
		if validQueueName(name) != want {
			t.Errorf("validQueueName(%q) != %v", name, want)
		}
	}
}

// signedRequest returns a ListQueues request signed by the SDK's signer.
func signedRequest(t *testing.T, secret string, body []byte) *http.Request {
	return signedRequestFor(t, "ListQueues", secret, body)
}

// signedRequestFor signs a JSON protocol request for action.
func signedRequestFor(t *testing.T, action, secret string, body []byte) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9324/", bytes.NewReader(body))
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: "AKIDFERRY", SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

func errorType(t *testing.T, rec *httptest.ResponseRecorder) string {
	var e struct {
		Type string `json:"__type"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("answer %q: %v", rec.Body.String(), err)
	}
	return e.Type
}

// TestSignatureVerification: with Credentials, a signature made with the
// right secret passes the check and one made with another is refused.
func TestSignatureVerification(t *testing.T) {
	s := New(Config{Credentials: StaticCredentials{"AKIDFERRY": "right"}})
	body := []byte(`{}`)
	if _, err := s.checkSignature(signedRequest(t, "right", body), body); err != nil {
		t.Fatalf("good signature refused: %v", err)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, signedRequest(t, "wrong", body))
	if rec.Code != http.StatusForbidden || errorType(t, rec) != "com.amazonaws.sqs#SignatureDoesNotMatch" {
		t.Fatalf("bad signature: %d %s", rec.Code, rec.Body)
	}
	if _, err := s.checkSignature(signedRequest(t, "right", body), []byte(`{"tampered":1}`)); !errors.Is(err, ErrSignatureDoesNotMatch) {
		t.Fatalf("changed body: %v", err)
	}
	unsigned := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	if _, err := s.checkSignature(unsigned, body); !errors.Is(err, ErrIncompleteSignature) {
		t.Fatalf("unsigned request with credentials configured: %v", err)
	}
}

// TestSignatureParsedNotVerified: without Credentials any well-formed
// signature is accepted and a malformed Authorization header is refused.
func TestSignatureParsedNotVerified(t *testing.T) {
	s := New(Config{})
	body := []byte(`{}`)
	if _, err := s.checkSignature(signedRequest(t, "anything", body), body); err != nil {
		t.Fatalf("signature refused without credentials: %v", err)
	}
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=broken")
	if _, err := s.checkSignature(req, body); !errors.Is(err, ErrIncompleteSignature) {
		t.Fatalf("malformed header: %v", err)
	}
	sig, err := parseAuthorization("AWS4-HMAC-SHA256 Credential=AK/20260101/eu-west-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc")
	if err != nil || sig.AccessKeyID != "AK" || sig.Region != "eu-west-1" || len(sig.SignedHeaders) != 2 {
		t.Fatalf("parse: %+v %v", sig, err)
	}
}

func TestParseAttributes(t *testing.T) {
	ch, err := parseAttributes("q", map[string]string{"VisibilityTimeout": "10", "DelaySeconds": "5",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:0:d","maxReceiveCount":3}`}, true)
	if err != nil || len(ch.settings) != 2 || ch.stored["DelaySeconds"] != "5" {
		t.Fatalf("%+v %v", ch, err)
	}
	if ch, err := parseAttributes("q", map[string]string{"FairGroups": "true"}, false); err != nil || len(ch.settings) != 1 || len(ch.stored) != 0 {
		t.Fatalf("FairGroups: %+v %v", ch, err)
	}
	for name, attrs := range map[string]map[string]string{
		"delay too long":     {"DelaySeconds": "901"},
		"retention too low":  {"MessageRetentionPeriod": "59"},
		"bad redrive":        {"RedrivePolicy": `{"maxReceiveCount":0,"deadLetterTargetArn":"x"}`},
		"redrive not json":   {"RedrivePolicy": `{`},
		"size too big":       {"MaximumMessageSize": "262145"},
		"unknown attribute":  {"Colour": "blue"},
		"fifo without .fifo": {"FifoQueue": "true"},
		"fair groups yes":    {"FairGroups": "yes"},
	} {
		if _, err := parseAttributes("q", attrs, true); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestQueryToJSON(t *testing.T) {
	form := url.Values{
		"Action":                            {"SendMessageBatch"},
		"QueueUrl":                          {"https://h/0/q"},
		"SendMessageBatchRequestEntry.2.Id": {"b"},
		"SendMessageBatchRequestEntry.2.MessageBody":                          {"two"},
		"SendMessageBatchRequestEntry.1.Id":                                   {"a"},
		"SendMessageBatchRequestEntry.1.MessageBody":                          {"one"},
		"SendMessageBatchRequestEntry.1.DelaySeconds":                         {"5"},
		"SendMessageBatchRequestEntry.1.MessageAttribute.1.Name":              {"colour"},
		"SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType":    {"String"},
		"SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue": {"blue"},
		"SendMessageBatchRequestEntry.1.MessageAttribute.2.Name":              {"bin"},
		"SendMessageBatchRequestEntry.1.MessageAttribute.2.Value.DataType":    {"Binary"},
		"SendMessageBatchRequestEntry.1.MessageAttribute.2.Value.BinaryValue": {"AAH/"},
	}
	b, err := queryToJSON(form)
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		QueueUrl string      `json:"QueueUrl"`
		Entries  []sendEntry `json:"Entries"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if in.QueueUrl != "https://h/0/q" || len(in.Entries) != 2 || in.Entries[0].ID != "a" || in.Entries[1].ID != "b" {
		t.Fatalf("entries out of order or lost: %s", b)
	}
	e := in.Entries[0]
	if *e.DelaySeconds != 5 || e.MessageAttributes["colour"].StringValue != "blue" || !bytes.Equal(e.MessageAttributes["bin"].BinaryValue, []byte{0, 1, 255}) {
		t.Fatalf("entry %+v", e)
	}
	b, err = queryToJSON(url.Values{"Attribute.1.Name": {"DelaySeconds"}, "Attribute.1.Value": {"3"}, "AttributeName.1": {"All"}, "Tag.1.Key": {"k"}, "Tag.1.Value": {"v"}})
	if err != nil || !bytes.Contains(b, []byte(`"Attributes":{"DelaySeconds":"3"}`)) || !bytes.Contains(b, []byte(`"AttributeNames":["All"]`)) || !bytes.Contains(b, []byte(`"Tags":{"k":"v"}`)) {
		t.Fatalf("maps and lists: %s %v", b, err)
	}
}

func TestRenderXML(t *testing.T) {
	var out struct {
		Messages []message `json:"Messages"`
	}
	out.Messages = []message{{MessageID: "m1", ReceiptHandle: "h", MD5OfBody: "d", Body: "a<b",
		Attributes:        map[string]string{"ApproximateReceiveCount": "2"},
		MessageAttributes: map[string]attributeValue{"colour": {DataType: "String", StringValue: "blue"}}}}
	var b bytes.Buffer
	if err := renderXML(&b, "ReceiveMessage", out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<Message><Attribute><Name>ApproximateReceiveCount</Name><Value>2</Value></Attribute><Body>a&lt;b</Body>",
		"<MessageAttribute><Name>colour</Name><Value><DataType>String</DataType><StringValue>blue</StringValue></Value></MessageAttribute>",
		"<MessageId>m1</MessageId>",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("XML lacks %s:\n%s", want, b.String())
		}
	}
}

// TestQueryErrors: query requests get XML errors with the query codes.
func TestQueryErrors(t *testing.T) {
	s := New(Config{})
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{"Action=FlyToTheMoon", 400, "<Code>InvalidAction</Code>"},
		{"Action=ListQueues&%zz", 400, "<Code>InvalidParameterValue</Code>"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.code) || !strings.Contains(rec.Body.String(), "<Type>Sender</Type>") {
			t.Errorf("%s: %d %s", tc.body, rec.Code, rec.Body)
		}
	}
}

// tokenCredentials gives each access key the permissions of a token.
type tokenCredentials map[string]*auth.Token

func (c tokenCredentials) Secret(id string) (string, *auth.Token, bool) {
	tok, ok := c[id]
	return id + "-secret", tok, ok
}

// TestAuthorize_ActionsNeedTheTokensPermission: a signed request runs only
// with the permission its action needs on the queue it names; a queue the
// key may not see answers as a missing one; listings show only the queues
// the key sees.
func TestAuthorize_ActionsNeedTheTokensPermission(t *testing.T) {
	f := auth.File{Tokens: []auth.FileToken{{Name: "sender", SHA256: auth.HashSecret("sender-token-secret"),
		Permissions: []auth.FilePermission{{Queues: []string{"orders.*"}, Actions: []string{"send"}}}}}}
	data, _ := json.Marshal(f)
	set, err := auth.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	sender, _ := set.ByName("sender")
	for _, tc := range []struct {
		action, body string
		want         error // nil: allowed
	}{
		{"SendMessage", `{"QueueUrl":"https://h/000000000000/orders.eu","MessageBody":"x"}`, nil},
		{"SendMessageBatch", `{"QueueUrl":"https://h/000000000000/orders.eu"}`, nil},
		{"SendMessage", `{"QueueUrl":"https://h/000000000000/billing","MessageBody":"x"}`, ErrQueueDoesNotExist},
		{"ReceiveMessage", `{"QueueUrl":"https://h/000000000000/orders.eu"}`, ErrAccessDenied},
		{"DeleteMessage", `{"QueueUrl":"https://h/000000000000/orders.eu"}`, ErrAccessDenied},
		{"PurgeQueue", `{"QueueUrl":"https://h/000000000000/orders.eu"}`, ErrAccessDenied},
		{"CreateQueue", `{"QueueName":"orders.us"}`, ErrAccessDenied},
		{"CreateQueue", `{"QueueName":"billing","QueueUrl":"https://h/000000000000/orders.eu"}`, ErrAccessDenied},
		{"GetQueueUrl", `{"QueueName":"orders.us"}`, nil},
		{"GetQueueUrl", `{"QueueName":"billing","QueueUrl":"https://h/000000000000/orders.eu"}`, ErrQueueDoesNotExist},
		{"StartMessageMoveTask", `{"SourceArn":"arn:aws:sqs:us-east-1:0:orders.eu"}`, ErrAccessDenied},
		{"StartMessageMoveTask", `{"SourceArn":"arn:aws:sqs:us-east-1:0:billing"}`, ErrResourceNotFound},
		{"SendMessage", `{"QueueUrl":"https://h/000000000000/sqs.meta","MessageBody":"x"}`, ErrQueueDoesNotExist},
		{"ListQueues", `{}`, nil},
	} {
		_, err := authorize(sender, tc.action, []byte(tc.body))
		if (err == nil) != (tc.want == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s %s: err %v, want %v", tc.action, tc.body, err, tc.want)
		}
	}
	s := New(Config{Credentials: tokenCredentials{"AKIDFERRY": sender}})
	for body, want := range map[string]string{
		`{"QueueUrl":"https://h/000000000000/billing"}`:   "com.amazonaws.sqs#QueueDoesNotExist",
		`{"QueueUrl":"https://h/000000000000/orders.eu"}`: "com.amazonaws.sqs#AccessDeniedException",
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, signedRequestFor(t, "PurgeQueue", "AKIDFERRY-secret", []byte(body)))
		if rec.Code != http.StatusBadRequest || errorType(t, rec) != want {
			t.Errorf("purge %s: %d %s, want %s", body, rec.Code, rec.Body, want)
		}
	}
}

func TestCheckFresh_RefusesOldAndFutureSignatures(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for date, ok := range map[string]bool{
		"20261130T120000Z": true, "20261130T114600Z": true, "20261130T121400Z": true,
		"20261130T114400Z": false, "20261130T121600Z": false, "yesterday": false,
	} {
		err := checkFresh(date, now)
		if (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", date, err, ok)
		}
	}
	if err := checkFresh("20261130T100000Z", now); !errors.Is(err, ErrRequestExpired) {
		t.Fatalf("two hours old: %v, want ErrRequestExpired", err)
	}
}
