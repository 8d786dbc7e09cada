package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/test/chaos"
)

// ferrydSQS is a cluster of real ferryd processes (TLS, -tokens) with an
// SQS endpoint on every node, and the SQS keys of its tokens.
type ferrydSQS struct {
	t     *testing.T
	c     *chaos.Cluster
	admin *client.Client // native, cluster admin
	http  *http.Client
	keys  map[string]string // access key id -> secret access key
}

// sqsKey is the SQS secret access key of token name in these tests.
func sqsKey(name string) string { return name + "-sqs-secret-key-0123456789" }

// startFerrydSQS starts three ferryd processes whose tokens file holds
// the tokens given (each with an SQS key, see sqsKey) and waits until
// every node's SQS endpoint answers.
func startFerrydSQS(t *testing.T, tokens ...auth.FileToken) *ferrydSQS {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs per-node loopback addresses (127.0.1.x)")
	}
	bin, err := chaos.BuildFerryd(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := chaos.NewCluster(chaos.ClusterOptions{Nodes: 3, Root: t.TempDir(), Bin: bin, TLS: true, SQS: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	f := &ferrydSQS{t: t, c: c, keys: map[string]string{},
		http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: c.ClientTLS}}}
	for _, tok := range tokens {
		tok.SQSSecretKey = sqsKey(tok.Name)
		f.keys[tok.Name] = tok.SQSSecretKey
		if err := auth.AddToFile(c.TokensFile, tok); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	startFerryds(ctx, t, c)
	f.admin = f.native(ctx, c.AdminToken)
	for i := range c.Nodes {
		untilNil(t, ctx, "the SQS endpoint of "+c.Nodes[i].ID, func() error {
			_, err := f.sdk(tokens[0].Name, i).ListQueues(ctx, &awssqs.ListQueuesInput{})
			return err
		})
	}
	return f
}

// native dials the client port with a token.
func (f *ferrydSQS) native(ctx context.Context, token string) *client.Client {
	f.t.Helper()
	cl, err := client.Dial(ctx, f.c.ClientAddrs(), client.WithTLS(f.c.ClientTLS), client.WithToken(token), client.WithDialTimeout(time.Second))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { cl.Close() })
	return cl
}

// endpoint is node i's SQS base URL.
func (f *ferrydSQS) endpoint(i int) string { return "https://" + f.c.Nodes[i].SQSAddr }

// queueURL is the URL of queue name on node i.
func (f *ferrydSQS) queueURL(i int, name string) string {
	return f.endpoint(i) + "/000000000000/" + name
}

// sdk is an SDK client of node i signing with key's secret.
func (f *ferrydSQS) sdk(key string, i int, opts ...func(*awssqs.Options)) *awssqs.Client {
	return awssqs.New(awssqs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(f.endpoint(i)), HTTPClient: f.http, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(key, f.keys[key], ""),
	}, opts...)
}

// signed returns a JSON protocol request of node i signed with key's
// secret by the SDK's signer. With signTarget false, X-Amz-Target is set
// after signing, so the signature does not cover it.
func (f *ferrydSQS) signed(i int, key, action, body string, signTarget bool) *http.Request {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.endpoint(i)+"/", strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	if signTarget {
		req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	}
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: key, SecretAccessKey: f.keys[key]}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", time.Now()); err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	return req
}

// do sends a request (again: the body is re-read from body) and returns
// the SQS error code of the answer ("" for 200) and its message.
func (f *ferrydSQS) do(req *http.Request, body string) (code, msg string) {
	f.t.Helper()
	req.Body = io.NopCloser(strings.NewReader(body))
	resp, err := f.http.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return "", string(b)
	}
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
		Code    string `xml:"Error>Code"`
		XMLMsg  string `xml:"Error>Message"`
	}
	if json.Unmarshal(b, &e) == nil {
		return e.Type[strings.LastIndexByte(e.Type, '#')+1:], e.Message
	}
	if xml.Unmarshal(b, &e) == nil {
		return e.Code, e.XMLMsg
	}
	f.t.Fatalf("answer %s: %s", resp.Status, b)
	return "", ""
}

// call signs and sends a JSON protocol request of action to node i.
func (f *ferrydSQS) call(i int, key, action, body string) (code, msg string) {
	f.t.Helper()
	return f.do(f.signed(i, key, action, body, true), body)
}

// query signs and sends a query protocol request posted to path of node i.
func (f *ferrydSQS) query(i int, key, path string, form url.Values) (code, msg string) {
	f.t.Helper()
	body := form.Encode()
	req, err := http.NewRequest(http.MethodPost, f.endpoint(i)+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: key, SecretAccessKey: f.keys[key]}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", time.Now()); err != nil {
		f.t.Fatal(err)
	}
	return f.do(req, body)
}

// attr reads one attribute of a queue as key sees it through node i.
func (f *ferrydSQS) attr(key string, i int, queue, name string) string {
	f.t.Helper()
	code, out := f.call(i, key, "GetQueueAttributes", `{"QueueUrl":"`+f.queueURL(i, queue)+`","AttributeNames":["All"]}`)
	if code != "" {
		f.t.Fatalf("GetQueueAttributes %s by %s: %s %s", queue, key, code, out)
	}
	var a struct{ Attributes map[string]string }
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		f.t.Fatal(err)
	}
	return a.Attributes[name]
}

// exists reports whether the cluster has the queue, as the cluster admin
// sees it on the client port.
func (f *ferrydSQS) exists(ctx context.Context, name string) bool {
	f.t.Helper()
	qs, err := f.admin.ListQueues(ctx, name)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == name {
			return true
		}
	}
	return false
}

// reloadWithout drops the named tokens from the tokens file and sends
// every node SIGHUP.
// restoreTokens writes data back as the tokens file and has every node
// reload it.
func (f *ferrydSQS) restoreTokens(data []byte) {
	f.t.Helper()
	if err := os.WriteFile(f.c.TokensFile, data, 0o600); err != nil {
		f.t.Fatal(err)
	}
	for _, n := range f.c.Nodes {
		if err := f.c.Reload(n); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *ferrydSQS) reloadWithout(names ...string) {
	f.t.Helper()
	data, err := os.ReadFile(f.c.TokensFile)
	if err != nil {
		f.t.Fatal(err)
	}
	var file auth.File
	if err := json.Unmarshal(data, &file); err != nil {
		f.t.Fatal(err)
	}
	kept := file.Tokens[:0]
	for _, tok := range file.Tokens {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+tok.Name+" ") {
			kept = append(kept, tok)
		}
	}
	file.Tokens = kept
	out, _ := json.Marshal(file)
	if err := os.WriteFile(f.c.TokensFile, out, 0o600); err != nil {
		f.t.Fatal(err)
	}
	for _, n := range f.c.Nodes {
		if err := f.c.Reload(n); err != nil {
			f.t.Fatal(err)
		}
	}
}

// wantCode fails unless code is want.
func wantCode(t *testing.T, what, code, msg, want string) {
	t.Helper()
	if code != want {
		t.Fatalf("%s: %q (%s), want %s", what, code, msg, want)
	}
}

// isUnauthorized reports whether err is the client port's refusal.
func isUnauthorized(err error) bool { return errors.Is(err, client.ErrUnauthorized) }
