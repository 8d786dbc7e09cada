package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/sqs"
)

// sqsCluster is a test cluster with an SQS endpoint on every node, each
// connected to its own node, and an SDK client per endpoint.
type sqsCluster struct {
	*testCluster
	endpoints []string // https://addr
	clients   []*awssqs.Client
}

// sqsSecret is the secret of every access key id the test endpoints
// know: they verify request signatures against it.
const sqsSecret = "ferry-test-secret"

func startSQSCluster(t *testing.T, creds sqs.Credentials) *sqsCluster {
	t.Helper()
	c := startCluster(t, options{})
	if creds == nil { // the nodes' own tokens, as ferryd does
		creds = sqs.TokenCredentials(c.members[0].n.Tokens)
	}
	sc := &sqsCluster{testCluster: c}
	for i, m := range c.members {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		// As ferryd's endpoint does, it dials its node with the node's
		// certificate: the cluster's own identity, the only one that
		// reaches the reserved queue of the SQS attributes.
		member := c.tls.Clone()
		member.Certificates = []tls.Certificate{m.cfg.TLS.Cert}
		l, err := sqs.Listen(ctx, sqs.ListenConfig{
			Addr: "127.0.0.1:0", Seeds: []string{m.cfg.ClientAddr},
			ClientTLS: member, ServerTLS: m.cfg.TLS.Server(),
			Server: sqs.Config{MetaTTL: 200 * time.Millisecond, Credentials: creds},
		})
		cancel()
		if err != nil {
			t.Fatalf("sqs listener on node %d: %v", i, err)
		}
		t.Cleanup(func() { l.Close() })
		ep := "https://" + l.Addr()
		sc.endpoints = append(sc.endpoints, ep)
		sc.clients = append(sc.clients, awssqs.New(awssqs.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(ep),
			Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", sqsSecret, ""),
			HTTPClient:   &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: c.tls}},
		}))
	}
	return sc
}

func sqsCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// createSQSQueue creates a queue through node i and returns its URL.
func (c *sqsCluster) createQueue(t *testing.T, i int, name string, attrs map[string]string) string {
	t.Helper()
	out, err := c.clients[i].CreateQueue(sqsCtx(t), &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return *out.QueueUrl
}

// receive long-polls node i for up to max messages, failing on error.
func (c *sqsCluster) receive(t *testing.T, i int, url string, in awssqs.ReceiveMessageInput) []types.Message {
	t.Helper()
	in.QueueUrl = aws.String(url)
	out, err := c.clients[i].ReceiveMessage(sqsCtx(t), &in)
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	return out.Messages
}

func wantSQSError(t *testing.T, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want API error %s", err, code)
	}
	if ae.ErrorCode() != code && !strings.HasSuffix(fmt.Sprintf("%T", ae), "."+code) {
		t.Fatalf("got error %s (%T): %v, want %s", ae.ErrorCode(), ae, err, code)
	}
}

func TestSQSWithSDK(t *testing.T) {
	c := startSQSCluster(t, sqs.StaticCredentials{"AKIDTEST": sqsSecret})
	t.Run("Signatures", func(t *testing.T) { sqsSignatures(t, c) })
	t.Run("QueueLifecycle", func(t *testing.T) { sqsQueueLifecycle(t, c) })
	t.Run("SendReceiveDelete", func(t *testing.T) { sqsSendReceiveDelete(t, c) })
	t.Run("LongPoll", func(t *testing.T) { sqsLongPoll(t, c) })
	t.Run("Visibility", func(t *testing.T) { sqsVisibility(t, c) })
	t.Run("Redrive", func(t *testing.T) { sqsRedrive(t, c) })
	t.Run("FIFO", func(t *testing.T) { sqsFIFO(t, c) })
	t.Run("PurgeAndAttributes", func(t *testing.T) { sqsPurgeAndAttributes(t, c) })
	t.Run("Errors", func(t *testing.T) { sqsErrors(t, c) })
	t.Run("BadInput", func(t *testing.T) { sqsBadInput(t, c) })
	t.Run("FerryInterop", func(t *testing.T) { sqsFerryInterop(t, c) })
	t.Run("FairGroups", func(t *testing.T) { sqsFairGroups(t, c) })
}

func sqsMaxRequest() int { return sqs.MaxRequestBytes }

func sqsErrorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// sqsSignatures: every call of the suite is signed and verified; a wrong
// secret or an unknown access key id is refused.
func sqsSignatures(t *testing.T, c *sqsCluster) {
	for _, tc := range []struct{ id, secret, code string }{
		{"AKIDTEST", "wrong", "SignatureDoesNotMatch"},
		{"AKIDOTHER", sqsSecret, "InvalidClientTokenId"},
	} {
		cl := awssqs.New(c.clients[0].Options(), func(o *awssqs.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider(tc.id, tc.secret, "")
		})
		_, err := cl.ListQueues(sqsCtx(t), &awssqs.ListQueuesInput{})
		wantSQSError(t, err, tc.code)
	}
	if _, err := c.clients[0].ListQueues(sqsCtx(t), &awssqs.ListQueuesInput{}); err != nil {
		t.Fatalf("signed with the right secret: %v", err)
	}
}

// TestSQSWithTokens: with the nodes' tokens as SQS credentials, a request
// signed with a token's SQS key has exactly that token's permissions;
// listings show only the queues it may see.
func TestSQSWithTokens(t *testing.T) {
	c := startSQSCluster(t, nil)
	perm := func(actions ...string) []auth.FilePermission {
		return []auth.FilePermission{{Queues: []string{"sqsauth-*"}, Actions: actions}}
	}
	c.setTokens(
		auth.FileToken{Name: "app", SHA256: auth.HashSecret("app-token"), Permissions: perm("send", "receive", "admin"), SQSSecretKey: "app-sqs-key-0123456789"},
		auth.FileToken{Name: "sender", SHA256: auth.HashSecret("sender-token"), Permissions: perm("send"), SQSSecretKey: "sender-sqs-key-0123456789"},
		auth.FileToken{Name: "nokey", SHA256: auth.HashSecret("nokey-token"), Permissions: perm("send")},
	)
	as := func(id, key string) *awssqs.Client {
		return awssqs.New(c.clients[0].Options(), func(o *awssqs.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider(id, key, "")
		})
	}
	app, sender := as("app", "app-sqs-key-0123456789"), as("sender", "sender-sqs-key-0123456789")
	ctx := sqsCtx(t)
	if err := c.dial("setup").CreateQueue(ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	out, err := app.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("sqsauth-orders")})
	if err != nil {
		t.Fatalf("app creates a queue it administers: %v", err)
	}
	url := out.QueueUrl
	if _, err := sender.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("hi")}); err != nil {
		t.Fatalf("sender sends: %v", err)
	}
	_, err = sender.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: url})
	wantSQSError(t, err, "AccessDenied")
	_, err = sender.PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: url})
	wantSQSError(t, err, "AccessDenied")
	_, err = app.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("billing-2")})
	wantSQSError(t, err, "AccessDenied")
	// billing exists, but the key may not see it: the answer is that of a
	// missing queue.
	billing := strings.Replace(*url, "sqsauth-orders", "billing", 1)
	_, err = app.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &billing, MessageBody: aws.String("x")})
	wantSQSError(t, err, "QueueDoesNotExist")
	_, err = as("nokey", "anything-0123456789").ListQueues(ctx, &awssqs.ListQueuesInput{})
	wantSQSError(t, err, "InvalidClientTokenId")
	got, err := app.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: url, WaitTimeSeconds: 5})
	if err != nil || len(got.Messages) != 1 || *got.Messages[0].Body != "hi" {
		t.Fatalf("app receives the sender's message: %+v %v", got, err)
	}
	list, err := app.ListQueues(ctx, &awssqs.ListQueuesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range list.QueueUrls {
		if !strings.Contains(u, "/sqsauth-") {
			t.Fatalf("app lists a queue it has no permission on: %s", u)
		}
	}
	if st := completeStats(t, ctx, c.dial("check"), "billing"); st.Total().Ready != 0 {
		t.Fatalf("a refused send reached billing: %+v", st.Total())
	}
}
