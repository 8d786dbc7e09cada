package cluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
)

func sqsQueueLifecycle(t *testing.T, c *sqsCluster) {
	attrs := map[string]string{"VisibilityTimeout": "45", "DelaySeconds": "0"}
	url := c.createQueue(t, 0, "life-1", attrs)
	if !strings.HasSuffix(url, "/life-1") {
		t.Fatalf("QueueUrl %s does not end in /life-1", url)
	}
	// The same create, through another node, answers the same queue.
	again := c.createQueue(t, 1, "life-1", attrs)
	if again[strings.LastIndex(again, "/"):] != url[strings.LastIndex(url, "/"):] {
		t.Fatalf("repeated CreateQueue: %s, first %s", again, url)
	}
	_, err := c.clients[2].CreateQueue(sqsCtx(t), &awssqs.CreateQueueInput{QueueName: aws.String("life-1"),
		Attributes: map[string]string{"VisibilityTimeout": "46"}})
	wantSQSError(t, err, "QueueNameExists")
	got, err := c.clients[2].GetQueueUrl(sqsCtx(t), &awssqs.GetQueueUrlInput{QueueName: aws.String("life-1")})
	if err != nil || !strings.HasSuffix(*got.QueueUrl, "/life-1") {
		t.Fatalf("GetQueueUrl: %v %v", got, err)
	}
	c.createQueue(t, 0, "life-2", nil)
	c.createQueue(t, 0, "other-1", nil)
	// Prefix and pagination.
	var names []string
	var token *string
	for {
		out, err := c.clients[1].ListQueues(sqsCtx(t), &awssqs.ListQueuesInput{QueueNamePrefix: aws.String("life-"), MaxResults: aws.Int32(1), NextToken: token})
		if err != nil {
			t.Fatalf("ListQueues: %v", err)
		}
		for _, u := range out.QueueUrls {
			names = append(names, u[strings.LastIndex(u, "/")+1:])
		}
		if out.NextToken == nil {
			break
		}
		token = out.NextToken
	}
	if !slices.Equal(names, []string{"life-1", "life-2"}) {
		t.Fatalf("ListQueues life-: %v", names)
	}
	// Tags.
	if _, err := c.clients[0].TagQueue(sqsCtx(t), &awssqs.TagQueueInput{QueueUrl: &url, Tags: map[string]string{"team": "billing", "env": "test"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.clients[0].UntagQueue(sqsCtx(t), &awssqs.UntagQueueInput{QueueUrl: &url, TagKeys: []string{"env"}}); err != nil {
		t.Fatal(err)
	}
	testwait.UntilNil(c.t, 5*time.Second, "tags on another node", func() error {
		out, err := c.clients[2].ListQueueTags(sqsCtx(t), &awssqs.ListQueueTagsInput{QueueUrl: &url})
		if err != nil {
			return err
		}
		if len(out.Tags) != 1 || out.Tags["team"] != "billing" {
			return sqsErrorf("tags %v", out.Tags)
		}
		return nil
	})
	if _, err := c.clients[1].DeleteQueue(sqsCtx(t), &awssqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
		t.Fatal(err)
	}
	// Another node's catalog may lag a moment behind the delete (SQS
	// itself takes up to a minute).
	testwait.UntilNil(c.t, 5*time.Second, "deleted queue gone on another node", func() error {
		_, err := c.clients[0].GetQueueUrl(sqsCtx(t), &awssqs.GetQueueUrlInput{QueueName: aws.String("life-1")})
		if err == nil {
			return sqsErrorf("life-1 still listed")
		}
		wantSQSError(t, err, "QueueDoesNotExist")
		return nil
	})
}

func sqsSendReceiveDelete(t *testing.T, c *sqsCluster) {
	url := c.createQueue(t, 0, "srd", nil)
	attrs := map[string]types.MessageAttributeValue{
		"colour": {DataType: aws.String("String"), StringValue: aws.String("blue")},
		"count":  {DataType: aws.String("Number"), StringValue: aws.String("42")},
		"blob":   {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
	}
	sent, err := c.clients[0].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("hello"), MessageAttributes: attrs})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	if sent.MD5OfMessageAttributes == nil || sent.MessageId == nil {
		t.Fatalf("SendMessage answer lacks MD5OfMessageAttributes or MessageId: %+v", sent)
	}
	ms := c.receive(t, 1, url, awssqs.ReceiveMessageInput{MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}, WaitTimeSeconds: 5})
	if len(ms) != 1 || *ms[0].Body != "hello" || *ms[0].MessageId != *sent.MessageId {
		t.Fatalf("received %+v", ms)
	}
	m := ms[0]
	if *m.MD5OfMessageAttributes != *sent.MD5OfMessageAttributes {
		t.Fatalf("MD5OfMessageAttributes: received %s, sent %s", *m.MD5OfMessageAttributes, *sent.MD5OfMessageAttributes)
	}
	if got := m.MessageAttributes["blob"].BinaryValue; !bytes.Equal(got, []byte{0, 1, 2, 255}) || *m.MessageAttributes["count"].DataType != "Number" {
		t.Fatalf("attributes %+v", m.MessageAttributes)
	}
	if m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["SentTimestamp"] == "" {
		t.Fatalf("system attributes %v", m.Attributes)
	}
	// The handle issued by node 1 deletes through node 2.
	if _, err := c.clients[2].DeleteMessage(sqsCtx(t), &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatalf("DeleteMessage on another node: %v", err)
	}
	// Batch send, receive 10, batch delete with one bad handle.
	var entries []types.SendMessageBatchRequestEntry
	for i := range 10 {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String("e" + strconv.Itoa(i)), MessageBody: aws.String("b" + strconv.Itoa(i))})
	}
	bout, err := c.clients[0].SendMessageBatch(sqsCtx(t), &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
	if err != nil || len(bout.Successful) != 10 || len(bout.Failed) != 0 {
		t.Fatalf("SendMessageBatch: %+v %v", bout, err)
	}
	var got []types.Message
	for len(got) < 10 {
		ms := c.receive(t, 2, url, awssqs.ReceiveMessageInput{MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
		if len(ms) == 0 {
			t.Fatalf("received %d of 10", len(got))
		}
		got = append(got, ms...)
	}
	del := []types.DeleteMessageBatchRequestEntry{{Id: aws.String("bad"), ReceiptHandle: aws.String("not-a-handle")}}
	for i, m := range got[:9] {
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String("d" + strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	dout, err := c.clients[0].DeleteMessageBatch(sqsCtx(t), &awssqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: del})
	if err != nil || len(dout.Successful) != 9 || len(dout.Failed) != 1 || *dout.Failed[0].Id != "bad" || *dout.Failed[0].Code != "ReceiptHandleIsInvalid" {
		t.Fatalf("DeleteMessageBatch: %+v %v", dout, err)
	}
}

func sqsLongPoll(t *testing.T, c *sqsCluster) {
	url := c.createQueue(t, 0, "longpoll", map[string]string{"ReceiveMessageWaitTimeSeconds": "10"})
	type result struct {
		ms  []types.Message
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		// No WaitTimeSeconds: the queue's ReceiveMessageWaitTimeSeconds applies.
		out, err := c.clients[1].ReceiveMessage(sqsCtx(t), &awssqs.ReceiveMessageInput{QueueUrl: &url})
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{ms: out.Messages, at: time.Now()}
	}()
	time.Sleep(500 * time.Millisecond) // let the poll start waiting
	sentAt := time.Now()
	if _, err := c.clients[2].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("late")}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.ms) != 1 || *r.ms[0].Body != "late" {
		t.Fatalf("long poll: %+v", r)
	}
	if wait := r.at.Sub(sentAt); wait > 5*time.Second {
		t.Fatalf("long poll answered %v after the send", wait)
	}
}

func sqsVisibility(t *testing.T, c *sqsCluster) {
	url := c.createQueue(t, 0, "vis", nil)
	if _, err := c.clients[0].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("v")}); err != nil {
		t.Fatal(err)
	}
	sys := []types.MessageSystemAttributeName{"ApproximateReceiveCount"}
	first := c.receive(t, 0, url, awssqs.ReceiveMessageInput{WaitTimeSeconds: 5, VisibilityTimeout: 60, MessageSystemAttributeNames: sys})
	if len(first) != 1 {
		t.Fatalf("first receive: %d messages", len(first))
	}
	if ms := c.receive(t, 1, url, awssqs.ReceiveMessageInput{}); len(ms) != 0 {
		t.Fatalf("leased message received again: %+v", ms)
	}
	if _, err := c.clients[1].ChangeMessageVisibility(sqsCtx(t), &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: first[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatalf("ChangeMessageVisibility 0: %v", err)
	}
	second := c.receive(t, 2, url, awssqs.ReceiveMessageInput{WaitTimeSeconds: 5, VisibilityTimeout: 1, MessageSystemAttributeNames: sys})
	if len(second) != 1 || second[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("after visibility 0: %+v", second)
	}
	// The first handle is stale now.
	_, err := c.clients[0].DeleteMessage(sqsCtx(t), &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: first[0].ReceiptHandle})
	wantSQSError(t, err, "ReceiptHandleIsInvalid")
	// A visibility timeout that ends makes the message visible at once:
	// no retry backoff on queues created through SQS.
	expired := time.Now()
	third := c.receive(t, 0, url, awssqs.ReceiveMessageInput{WaitTimeSeconds: 10, MessageSystemAttributeNames: sys})
	if len(third) != 1 || third[0].Attributes["ApproximateReceiveCount"] != "3" {
		t.Fatalf("after expiry: %+v", third)
	}
	if d := time.Since(expired); d > 4*time.Second {
		t.Fatalf("message came back %v after its 1s visibility", d)
	}
	// Extending through the batch call.
	cout, err := c.clients[1].ChangeMessageVisibilityBatch(sqsCtx(t), &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url,
		Entries: []types.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("a"), ReceiptHandle: third[0].ReceiptHandle, VisibilityTimeout: 120},
			{Id: aws.String("b"), ReceiptHandle: first[0].ReceiptHandle, VisibilityTimeout: 120}}})
	if err != nil || len(cout.Successful) != 1 || len(cout.Failed) != 1 || *cout.Failed[0].Id != "b" {
		t.Fatalf("ChangeMessageVisibilityBatch: %+v %v", cout, err)
	}
}

func sqsRedrive(t *testing.T, c *sqsCluster) {
	dlq := c.createQueue(t, 0, "orders-dlq", nil)
	dlqArn := sqsAttr(t, c, 0, dlq, "QueueArn")
	policy := `{"deadLetterTargetArn":"` + dlqArn + `","maxReceiveCount":"2"}`
	src := c.createQueue(t, 1, "orders", map[string]string{"RedrivePolicy": policy})
	if _, err := c.clients[0].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: &src, MessageBody: aws.String("poison")}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		ms := c.receive(t, i, src, awssqs.ReceiveMessageInput{WaitTimeSeconds: 5, VisibilityTimeout: 30})
		if len(ms) != 1 {
			t.Fatalf("receive %d: %d messages", i+1, len(ms))
		}
		if _, err := c.clients[2].ChangeMessageVisibility(sqsCtx(t), &awssqs.ChangeMessageVisibilityInput{QueueUrl: &src, ReceiptHandle: ms[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	if ms := c.receive(t, 2, src, awssqs.ReceiveMessageInput{WaitTimeSeconds: 1}); len(ms) != 0 {
		t.Fatalf("message past maxReceiveCount still delivered: %+v", ms)
	}
	lout, err := c.clients[2].ListDeadLetterSourceQueues(sqsCtx(t), &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq})
	if err != nil || len(lout.QueueUrls) != 1 || !strings.HasSuffix(lout.QueueUrls[0], "/orders") {
		t.Fatalf("ListDeadLetterSourceQueues: %+v %v", lout, err)
	}
	if got := sqsAttr(t, c, 1, src, "RedrivePolicy"); got != policy {
		t.Fatalf("RedrivePolicy %s, want %s", got, policy)
	}
	task, err := c.clients[1].StartMessageMoveTask(sqsCtx(t), &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqArn)})
	if err != nil || task.TaskHandle == nil {
		t.Fatalf("StartMessageMoveTask: %+v %v", task, err)
	}
	tasks, err := c.clients[1].ListMessageMoveTasks(sqsCtx(t), &awssqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqArn)})
	if err != nil || len(tasks.Results) != 1 || *tasks.Results[0].Status != "COMPLETED" || tasks.Results[0].ApproximateNumberOfMessagesMoved != 1 {
		t.Fatalf("ListMessageMoveTasks: %+v %v", tasks, err)
	}
	ms := c.receive(t, 0, src, awssqs.ReceiveMessageInput{WaitTimeSeconds: 5, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
	if len(ms) != 1 || *ms[0].Body != "poison" || ms[0].Attributes["ApproximateReceiveCount"] != "1" {
		t.Fatalf("after the move task: %+v", ms)
	}
}

func sqsFIFO(t *testing.T, c *sqsCluster) {
	url := c.createQueue(t, 0, "jobs.fifo", map[string]string{"FifoQueue": "true"})
	_, err := c.clients[0].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x")})
	wantSQSError(t, err, "MissingParameter")
	_, err = c.clients[0].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"), MessageGroupId: aws.String("g")})
	wantSQSError(t, err, "InvalidParameterValue")
	var ids []string
	for i, body := range []string{"g1-a", "g1-b", "g1-a"} {
		dedup := body // the third repeats the first's deduplication id
		out, err := c.clients[i].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body),
			MessageGroupId: aws.String("g1"), MessageDeduplicationId: aws.String(dedup)})
		if err != nil || out.SequenceNumber == nil {
			t.Fatalf("FIFO send %d: %+v %v", i, out, err)
		}
		ids = append(ids, *out.MessageId)
	}
	if ids[2] != ids[0] {
		t.Fatalf("duplicate send got MessageId %s, first %s", ids[2], ids[0])
	}
	// One message of the group at a time, in order.
	ms := c.receive(t, 1, url, awssqs.ReceiveMessageInput{MaxNumberOfMessages: 10, WaitTimeSeconds: 5,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"MessageGroupId"}})
	if len(ms) != 1 || *ms[0].Body != "g1-a" || ms[0].Attributes["MessageGroupId"] != "g1" {
		t.Fatalf("first FIFO receive: %+v", ms)
	}
	if _, err := c.clients[2].DeleteMessage(sqsCtx(t), &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: ms[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	ms = c.receive(t, 2, url, awssqs.ReceiveMessageInput{MaxNumberOfMessages: 10, WaitTimeSeconds: 5})
	if len(ms) != 1 || *ms[0].Body != "g1-b" {
		t.Fatalf("second FIFO receive: %+v", ms)
	}
}

func sqsAttr(t *testing.T, c *sqsCluster, i int, url, name string) string {
	t.Helper()
	out, err := c.clients[i].GetQueueAttributes(sqsCtx(t), &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{types.QueueAttributeName(name)}})
	if err != nil {
		t.Fatalf("GetQueueAttributes %s: %v", name, err)
	}
	return out.Attributes[name]
}

func sqsPurgeAndAttributes(t *testing.T, c *sqsCluster) {
	url := c.createQueue(t, 0, "attrs", nil)
	for _, body := range []string{"1", "2", "3"} {
		if _, err := c.clients[0].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.clients[0].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("later"), DelaySeconds: 600}); err != nil {
		t.Fatal(err)
	}
	held := c.receive(t, 1, url, awssqs.ReceiveMessageInput{WaitTimeSeconds: 5})
	out, err := c.clients[2].GetQueueAttributes(sqsCtx(t), &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	a := out.Attributes
	want := map[string]string{"ApproximateNumberOfMessages": "2", "ApproximateNumberOfMessagesNotVisible": "1",
		"ApproximateNumberOfMessagesDelayed": "1", "VisibilityTimeout": "30", "MessageRetentionPeriod": "345600",
		"MaximumMessageSize": "262144", "DelaySeconds": "0", "QueueArn": "arn:aws:sqs:us-east-1:000000000000:attrs"}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, a[k], v, a)
		}
	}
	if created, _ := strconv.ParseInt(a["CreatedTimestamp"], 10, 64); time.Since(time.Unix(created, 0)) > time.Minute {
		t.Errorf("CreatedTimestamp %s", a["CreatedTimestamp"])
	}
	// A change through node 0 is seen through node 2.
	if _, err := c.clients[0].SetQueueAttributes(sqsCtx(t), &awssqs.SetQueueAttributesInput{QueueUrl: &url,
		Attributes: map[string]string{"DelaySeconds": "5", "VisibilityTimeout": "90"}}); err != nil {
		t.Fatal(err)
	}
	testwait.UntilNil(c.t, 5*time.Second, "attributes on another node", func() error {
		if d, v := sqsAttr(t, c, 2, url, "DelaySeconds"), sqsAttr(t, c, 2, url, "VisibilityTimeout"); d != "5" || v != "90" {
			return sqsErrorf("DelaySeconds %s VisibilityTimeout %s", d, v)
		}
		return nil
	})
	if _, err := c.clients[1].PurgeQueue(sqsCtx(t), &awssqs.PurgeQueueInput{QueueUrl: &url}); err != nil {
		t.Fatal(err)
	}
	// As in SQS, a purge deletes the messages in flight too: their
	// visibility can no longer be changed, and deleting them is a no-op.
	for _, name := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
		if n := sqsAttr(t, c, 0, url, name); n != "0" {
			t.Fatalf("after purge: %s = %s", name, n)
		}
	}
	if len(held) != 1 {
		t.Fatalf("received %d messages before the purge", len(held))
	}
	_, err = c.clients[1].ChangeMessageVisibility(sqsCtx(t), &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url,
		ReceiptHandle: held[0].ReceiptHandle, VisibilityTimeout: 60})
	wantSQSError(t, err, "MessageNotInflight")
	if _, err := c.clients[1].DeleteMessage(sqsCtx(t), &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: held[0].ReceiptHandle}); err != nil {
		t.Fatalf("delete of a purged message: %v", err)
	}
	_, err = c.clients[0].SetQueueAttributes(sqsCtx(t), &awssqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"VisibilityTimeout": "99999"}})
	wantSQSError(t, err, "InvalidAttributeValue")
}

func sqsErrors(t *testing.T, c *sqsCluster) {
	missing := c.endpoints[0] + "/000000000000/no-such-queue"
	_, err := c.clients[0].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: &missing, MessageBody: aws.String("x")})
	wantSQSError(t, err, "QueueDoesNotExist")
	url := c.createQueue(t, 0, "errs", nil)
	var entries []types.SendMessageBatchRequestEntry
	for i := range 11 {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String("e" + strconv.Itoa(i)), MessageBody: aws.String("b")})
	}
	_, err = c.clients[1].SendMessageBatch(sqsCtx(t), &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
	wantSQSError(t, err, "TooManyEntriesInBatchRequest")
	_, err = c.clients[1].SendMessageBatch(sqsCtx(t), &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries[:1:1][:1]})
	if err != nil {
		t.Fatal(err)
	}
	dup := []types.SendMessageBatchRequestEntry{entries[0], entries[0]}
	_, err = c.clients[1].SendMessageBatch(sqsCtx(t), &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: dup})
	wantSQSError(t, err, "BatchEntryIdsNotDistinct")
	_, err = c.clients[2].ReceiveMessage(sqsCtx(t), &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 11})
	wantSQSError(t, err, "InvalidParameterValue")
	big := strings.Repeat("x", 256<<10+1)
	_, err = c.clients[2].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: &big})
	wantSQSError(t, err, "InvalidParameterValue")
	_, err = c.clients[2].DeleteMessage(sqsCtx(t), &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: aws.String("garbage")})
	wantSQSError(t, err, "ReceiptHandleIsInvalid")
	_, err = c.clients[2].AddPermission(sqsCtx(t), &awssqs.AddPermissionInput{QueueUrl: &url, Label: aws.String("l"), AWSAccountIds: []string{"1"}, Actions: []string{"SendMessage"}})
	wantSQSError(t, err, "UnsupportedOperation")
}

// sqsBadInput sends malformed requests over plain HTTP and checks each
// gets an SQS-shaped error and the endpoint keeps serving.
func sqsBadInput(t *testing.T, c *sqsCluster) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: c.tls}}
	post := func(target string, body []byte) (int, string, string) {
		req, err := http.NewRequest(http.MethodPost, c.endpoints[1]+"/", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", target)
		sum := sha256.Sum256(body)
		creds := aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: sqsSecret}
		if err := v4.NewSigner().SignHTTP(sqsCtx(t), creds, req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e struct {
			Type string `json:"__type"`
		}
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e.Type, resp.Header.Get("x-amzn-query-error")
	}
	cases := []struct {
		what, target string
		body         []byte
		status       int
		typ          string
	}{
		{"malformed JSON", "AmazonSQS.ListQueues", []byte(`{"QueueNamePrefix": `), 400, "SerializationException"},
		{"wrong JSON types", "AmazonSQS.ReceiveMessage", []byte(`{"QueueUrl": 7}`), 400, "SerializationException"},
		{"unknown action", "AmazonSQS.FlyToTheMoon", []byte(`{}`), 400, "InvalidAction"},
		{"other service", "DynamoDB_20120810.ListTables", []byte(`{}`), 400, "InvalidAction"},
		{"oversize body", "AmazonSQS.SendMessage", bytes.Repeat([]byte("a"), sqsMaxRequest()+1), 413, "RequestEntityTooLarge"},
		{"eleven entries", "AmazonSQS.DeleteMessageBatch", sqsElevenEntries(), 400, "TooManyEntriesInBatchRequest"},
		{"empty batch", "AmazonSQS.DeleteMessageBatch", []byte(`{"QueueUrl":"x","Entries":[]}`), 400, "EmptyBatchRequest"},
	}
	for _, tc := range cases {
		status, typ, qerr := post(tc.target, tc.body)
		if status != tc.status || typ != "com.amazonaws.sqs#"+tc.typ || !strings.HasSuffix(qerr, ";Sender") {
			t.Errorf("%s: status %d type %q query error %q, want %d %s", tc.what, status, typ, qerr, tc.status, tc.typ)
		}
	}
	if _, err := c.clients[1].ListQueues(sqsCtx(t), &awssqs.ListQueuesInput{}); err != nil {
		t.Fatalf("endpoint no longer serves after bad input: %v", err)
	}
}

func sqsElevenEntries() []byte {
	var es []map[string]string
	for i := range 11 {
		es = append(es, map[string]string{"Id": "e" + strconv.Itoa(i), "ReceiptHandle": "h"})
	}
	b, _ := json.Marshal(map[string]any{"QueueUrl": "q", "Entries": es})
	return b
}

// sqsFerryInterop: a queue made with the Ferry client is served through
// SQS, with headers as String attributes and the group reported; a message
// sent through SQS reaches a Ferry consumer with its attributes as headers.
func sqsFerryInterop(t *testing.T, c *sqsCluster) {
	fc := c.dial("interop")
	ctx := sqsCtx(t)
	if err := fc.CreateQueue(ctx, "native"); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Queue("native").Send(ctx, client.Message{Group: "acct-7", Headers: map[string]string{"trace": "t-1"}, Body: []byte("from ferry")}); err != nil {
		t.Fatal(err)
	}
	url := c.endpoints[2] + "/000000000000/native"
	ms := c.receive(t, 2, url, awssqs.ReceiveMessageInput{WaitTimeSeconds: 5, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"MessageGroupId"}})
	if len(ms) != 1 || *ms[0].Body != "from ferry" || *ms[0].MessageAttributes["trace"].StringValue != "t-1" || ms[0].Attributes["MessageGroupId"] != "acct-7" {
		t.Fatalf("Ferry message through SQS: %+v", ms)
	}
	if _, err := c.clients[0].DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: ms[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	_, err := c.clients[0].SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("from sqs"),
		MessageAttributes: map[string]types.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("invoice")}}})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := fc.Queue("native").Receive(ctx, client.ReceiveOptions{Wait: 5 * time.Second})
	if err != nil || len(ds) != 1 || string(ds[0].Body) != "from sqs" || ds[0].Headers["kind"] != "invoice" {
		t.Fatalf("SQS message through Ferry: %+v %v", ds, err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// sqsFairGroups: a standard queue created with FairGroups=true keeps
// MessageGroupId as the group and serves the groups in turn: three
// tenants' messages sent after 30 ungrouped ones all come in the first
// receive. Without it, a standard queue ignores MessageGroupId.
func sqsFairGroups(t *testing.T, c *sqsCluster) {
	url := c.createQueue(t, 0, "tenants", map[string]string{"FairGroups": "true"})
	if got := sqsAttr(t, c, 1, url, "FairGroups"); got != "true" {
		t.Fatalf("FairGroups attribute %q", got)
	}
	plain := c.createQueue(t, 0, "untenanted", nil)
	for _, u := range []string{url, plain} {
		for i := range 30 {
			if _, err := c.clients[0].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: aws.String(u),
				MessageBody: aws.String("bulk-" + strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		for _, tenant := range []string{"t1", "t2", "t3"} {
			if _, err := c.clients[1].SendMessage(sqsCtx(t), &awssqs.SendMessageInput{QueueUrl: aws.String(u),
				MessageBody: aws.String(tenant), MessageGroupId: aws.String(tenant)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	in := awssqs.ReceiveMessageInput{MaxNumberOfMessages: 10, WaitTimeSeconds: 5,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"MessageGroupId"}}
	tenants := map[string]string{}
	for _, m := range c.receive(t, 2, url, in) {
		if g := m.Attributes["MessageGroupId"]; g != "" {
			tenants[g] = *m.Body
		}
	}
	if len(tenants) != 3 || tenants["t2"] != "t2" {
		t.Fatalf("fair queue's first receive had tenants %v", tenants)
	}
	for _, m := range c.receive(t, 2, plain, in) {
		if g := m.Attributes["MessageGroupId"]; g != "" || !strings.HasPrefix(*m.Body, "bulk-") {
			t.Fatalf("a standard queue without FairGroups delivered %q of group %q first", *m.Body, g)
		}
	}
	if _, err := c.clients[0].SetQueueAttributes(sqsCtx(t), &awssqs.SetQueueAttributesInput{QueueUrl: aws.String(url),
		Attributes: map[string]string{"FairGroups": "maybe"}}); err == nil {
		t.Fatal("FairGroups=maybe accepted")
	}
}
