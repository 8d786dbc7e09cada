package sqs

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ferrymq/ferry/client"
)

const (
	messageAttributesMax = 10
	attrNameBytesMax     = 256
	dedupIDBytesMax      = 128
	batchEntryIDBytesMax = 80
	typeHeaderPrefix     = "sqs-type:" // ':' is not allowed in attribute names
)

// attributeValue is one message attribute.
type attributeValue struct {
	DataType         string   `json:"DataType"`
	StringValue      string   `json:"StringValue,omitempty"`
	BinaryValue      []byte   `json:"BinaryValue,omitempty"`
	StringListValues []string `json:"StringListValues,omitempty"`
	BinaryListValues [][]byte `json:"BinaryListValues,omitempty"`
}

// sendEntry is the part of SendMessage a batch entry shares.
type sendEntry struct {
	ID                      string                    `json:"Id"`
	MessageBody             *string                   `json:"MessageBody"`
	DelaySeconds            *int                      `json:"DelaySeconds"`
	MessageAttributes       map[string]attributeValue `json:"MessageAttributes"`
	MessageSystemAttributes map[string]attributeValue `json:"MessageSystemAttributes"`
	MessageDeduplicationID  string                    `json:"MessageDeduplicationId"`
	MessageGroupID          string                    `json:"MessageGroupId"`
}

type sendResult struct {
	ID                     string `json:"Id,omitempty"`
	MessageID              string `json:"MessageId"`
	MD5OfMessageBody       string `json:"MD5OfMessageBody"`
	MD5OfMessageAttributes string `json:"MD5OfMessageAttributes,omitempty"`
	SequenceNumber         string `json:"SequenceNumber,omitempty"`
}

// validText reports whether s holds only the characters SQS allows in
// bodies and string attributes.
func validText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF {
			return false
		}
	}
	return true
}

func validAttrName(n string) bool {
	if n == "" || len(n) > attrNameBytesMax || n[0] == '.' || n[len(n)-1] == '.' || strings.Contains(n, "..") {
		return false
	}
	l := strings.ToLower(n)
	if strings.HasPrefix(l, "aws.") || strings.HasPrefix(l, "amazon.") {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// checkAttributes validates message attributes and returns their size.
func checkAttributes(attrs map[string]attributeValue) (int, error) {
	if len(attrs) > messageAttributesMax {
		return 0, fail(ErrInvalidParameterValue, "%d message attributes (at most %d)", len(attrs), messageAttributesMax)
	}
	size := 0
	for n, a := range attrs {
		if !validAttrName(n) {
			return 0, fail(ErrInvalidParameterValue, "message attribute name %q is invalid", truncate(n, 64))
		}
		base, _, _ := strings.Cut(a.DataType, ".")
		if len(a.DataType) > attrNameBytesMax || !utf8.ValidString(a.DataType) || strings.ContainsAny(a.DataType, "\n\r") {
			return 0, fail(ErrInvalidParameterValue, "message attribute %s has an invalid DataType", n)
		}
		if len(a.StringListValues) > 0 || len(a.BinaryListValues) > 0 {
			return 0, fail(ErrUnsupportedOperation, "message attribute %s: list values are not supported", n)
		}
		switch base {
		case "String", "Number":
			if a.StringValue == "" || !validText(a.StringValue) {
				return 0, fail(ErrInvalidParameterValue, "message attribute %s must have a valid StringValue", n)
			}
			if base == "Number" {
				if _, err := strconv.ParseFloat(a.StringValue, 64); err != nil {
					return 0, fail(ErrInvalidParameterValue, "message attribute %s: %q is not a number", n, truncate(a.StringValue, 32))
				}
			}
		case "Binary":
			if len(a.BinaryValue) == 0 {
				return 0, fail(ErrInvalidParameterValue, "message attribute %s must have a BinaryValue", n)
			}
		default:
			return 0, fail(ErrInvalidParameterValue, "message attribute %s: DataType %q is not String, Number or Binary", n, truncate(a.DataType, 32))
		}
		size += len(n) + len(a.DataType) + len(a.StringValue) + len(a.BinaryValue)
	}
	return size, nil
}

// attributesToHeaders stores attributes as headers: a String attribute is
// the header of its name; other types add a type header and keep binary
// values in base64, so a Ferry consumer reads them as plain headers.
func attributesToHeaders(attrs map[string]attributeValue) map[string]string {
	if len(attrs) == 0 {
		return nil
	}
	h := make(map[string]string, len(attrs))
	for n, a := range attrs {
		if a.DataType != "String" {
			h[typeHeaderPrefix+n] = a.DataType
		}
		if strings.HasPrefix(a.DataType, "Binary") {
			h[n] = base64.StdEncoding.EncodeToString(a.BinaryValue)
		} else {
			h[n] = a.StringValue
		}
	}
	return h
}

// headersToAttributes reads message attributes back from headers; a header
// without a type header is a String attribute.
func headersToAttributes(h map[string]string) map[string]attributeValue {
	out := map[string]attributeValue{}
	for k, v := range h {
		if strings.HasPrefix(k, typeHeaderPrefix) || !validAttrName(k) {
			continue
		}
		typ := h[typeHeaderPrefix+k]
		if typ == "" {
			typ = "String"
		}
		a := attributeValue{DataType: typ, StringValue: v}
		if strings.HasPrefix(typ, "Binary") {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				continue
			}
			a = attributeValue{DataType: typ, BinaryValue: b}
		}
		out[k] = a
	}
	return out
}

// message turns a send entry into a Ferry message, checking it against the
// queue; it returns the message and its SQS size.
func (v queueView) message(e *sendEntry) (client.Message, int, error) {
	var m client.Message
	if e.MessageBody == nil || *e.MessageBody == "" {
		return m, 0, fail(ErrMissingParameter, "the request must contain the parameter MessageBody")
	}
	body := *e.MessageBody
	if !validText(body) {
		return m, 0, fail(ErrInvalidMessageContents, "invalid binary character in the message body")
	}
	asize, err := checkAttributes(e.MessageAttributes)
	if err != nil {
		return m, 0, err
	}
	size := len(body) + asize
	if size > v.maxMessageSize() {
		return m, 0, fail(ErrInvalidParameterValue, "One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", v.maxMessageSize())
	}
	m = client.Message{Body: []byte(body), Headers: attributesToHeaders(e.MessageAttributes), Delay: v.delay()}
	if e.DelaySeconds != nil {
		if v.fifo() {
			return m, 0, fail(ErrInvalidParameterValue, "the request includes DelaySeconds, which FIFO queues take only as a queue attribute")
		}
		if *e.DelaySeconds < 0 || *e.DelaySeconds > maxDelaySeconds {
			return m, 0, fail(ErrInvalidParameterValue, "DelaySeconds %d (want 0..%d)", *e.DelaySeconds, maxDelaySeconds)
		}
		m.Delay = time.Duration(*e.DelaySeconds) * time.Second
	}
	if !v.fifo() {
		return v.standardGroup(e, m, size)
	}
	return v.fifoMessage(e, m, size)
}

// standardGroup gives a message of a standard queue its MessageGroupId as
// its group when the queue delivers fairly across groups (FairGroups);
// otherwise a standard queue ignores MessageGroupId, as it always did.
func (v queueView) standardGroup(e *sendEntry, m client.Message, size int) (client.Message, int, error) {
	if e.MessageGroupID == "" || !v.fairGroups() {
		return m, size, nil
	}
	if len(e.MessageGroupID) > dedupIDBytesMax {
		return m, 0, fail(ErrInvalidParameterValue, "MessageGroupId takes at most %d characters", dedupIDBytesMax)
	}
	m.Group = e.MessageGroupID
	return m, size, nil
}

func (v queueView) fifoMessage(e *sendEntry, m client.Message, size int) (client.Message, int, error) {
	if e.MessageGroupID == "" {
		return m, 0, fail(ErrMissingParameter, "the request must contain the parameter MessageGroupId")
	}
	if len(e.MessageGroupID) > dedupIDBytesMax || len(e.MessageDeduplicationID) > dedupIDBytesMax {
		return m, 0, fail(ErrInvalidParameterValue, "MessageGroupId and MessageDeduplicationId take at most %d characters", dedupIDBytesMax)
	}
	m.Group, m.ID = e.MessageGroupID, e.MessageDeduplicationID
	if m.ID == "" {
		if !v.contentDedup() {
			return m, 0, fail(ErrInvalidParameterValue, "the queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
		sum := sha256.Sum256(m.Body)
		m.ID = hex.EncodeToString(sum[:])
	}
	return m, size, nil
}

func (v queueView) result(e *sendEntry, res client.SendResult) sendResult {
	out := sendResult{ID: e.ID, MessageID: res.ID, MD5OfMessageBody: md5Hex(*e.MessageBody), MD5OfMessageAttributes: md5OfAttributes(e.MessageAttributes)}
	if v.fifo() {
		out.SequenceNumber = sequenceNumber(res.Partition, res.Seq)
	}
	return out
}

// sequenceNumber is a FIFO message's SequenceNumber: a decimal number
// that grows with the message's sequence in its partition (the partition
// index, then the sequence number in 20 digits).
func sequenceNumber(partition int, seq uint64) string {
	return fmt.Sprintf("%d%020d", partition, seq)
}

func (s *Server) sendMessage(ctx context.Context, r *request) (any, error) {
	var in struct {
		QueueUrl string `json:"QueueUrl"`
		sendEntry
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	v, err := s.viewOfURL(ctx, r, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	m, _, err := v.message(&in.sendEntry)
	if err != nil {
		return nil, err
	}
	res, err := s.cl.Queue(v.name).Send(ctx, m)
	if err != nil {
		return nil, clientError(err, v.name)
	}
	out := v.result(&in.sendEntry, res)
	out.ID = ""
	return out, nil
}

// batchError is one failed entry of a batch.
type batchError struct {
	ID          string `json:"Id"`
	Code        string `json:"Code"`
	Message     string `json:"Message"`
	SenderFault bool   `json:"SenderFault"`
}

func entryError(id string, err error) batchError {
	e := asError(err)
	return batchError{ID: id, Code: e.Code.Type, Message: e.Message, SenderFault: e.sender()}
}

// checkBatch checks the entry ids of a batch: 1..MaxBatchEntries, valid
// and distinct.
func checkBatch(ids []string) error {
	switch {
	case len(ids) == 0:
		return fail(ErrEmptyBatchRequest, "there should be at least one entry in the request")
	case len(ids) > MaxBatchEntries:
		return fail(ErrTooManyEntriesInBatchRequest, "maximum number of entries per request are %d; you have sent %d", MaxBatchEntries, len(ids))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || len(id) > batchEntryIDBytesMax || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return fail(ErrInvalidBatchEntryID, "a batch entry id can only contain alphanumerics, hyphens and underscores, at most %d", batchEntryIDBytesMax)
		}
		if seen[id] {
			return fail(ErrBatchEntryIdsNotDistinct, "id %s repeated", id)
		}
		seen[id] = true
	}
	return nil
}

func (s *Server) sendMessageBatch(ctx context.Context, r *request) (any, error) {
	var in struct {
		QueueUrl string      `json:"QueueUrl"`
		Entries  []sendEntry `json:"Entries"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	ids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.ID
	}
	if err := checkBatch(ids); err != nil {
		return nil, err
	}
	v, err := s.viewOfURL(ctx, r, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	var out struct {
		Successful []sendResult `json:"Successful"`
		Failed     []batchError `json:"Failed"`
	}
	out.Successful, out.Failed = []sendResult{}, []batchError{}
	var msgs []client.Message
	var sent []*sendEntry
	total := 0
	for i := range in.Entries {
		e := &in.Entries[i]
		m, size, err := v.message(e)
		if err != nil {
			out.Failed = append(out.Failed, entryError(e.ID, err))
			continue
		}
		total += size
		msgs, sent = append(msgs, m), append(sent, e)
	}
	if total > MaxMessageBytes {
		return nil, fail(ErrBatchRequestTooLong, "batch requests cannot be longer than %d bytes; you have sent %d", MaxMessageBytes, total)
	}
	if len(msgs) == 0 {
		return out, nil
	}
	res, err := s.cl.Queue(v.name).SendBatch(ctx, msgs)
	var be *client.BatchError
	if err != nil && !errors.As(err, &be) {
		return nil, clientError(err, v.name)
	}
	for i, e := range sent {
		if be != nil && be.Errors[i] != nil {
			out.Failed = append(out.Failed, entryError(e.ID, clientError(be.Errors[i], v.name)))
			continue
		}
		out.Successful = append(out.Successful, v.result(e, res[i]))
	}
	return out, nil
}
