package sqs

import (
	"encoding/base64"
	"strings"

	"github.com/ferrymq/ferry/client"
)

const (
	receiptPrefix    = "ferry1:"
	receiptHandleMax = 1024
)

// encodeHandle returns the receipt handle of a delivery: its Ferry receipt
// (queue, partition, sequence number, attempt), which any node accepts and
// whose attempt fences a stale handle.
func encodeHandle(r client.Receipt) string {
	return base64.RawURLEncoding.EncodeToString([]byte(receiptPrefix + r.String()))
}

// decodeHandle reads a receipt handle of queue.
func decodeHandle(queue, h string) (client.Receipt, error) {
	bad := func(why string) (client.Receipt, error) {
		return client.Receipt{}, fail(ErrReceiptHandleIsInvalid, "the input receipt handle %q is not valid: %s", truncate(h, 64), why)
	}
	if h == "" {
		return client.Receipt{}, fail(ErrMissingParameter, "the request must contain the parameter ReceiptHandle")
	}
	if len(h) > receiptHandleMax {
		return bad("too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return bad("not issued by this service")
	}
	text, ok := strings.CutPrefix(string(b), receiptPrefix)
	if !ok {
		return bad("not issued by this service")
	}
	r, err := client.ParseReceipt(text)
	if err != nil {
		return bad("malformed")
	}
	if r.Queue != queue {
		return bad("it belongs to another queue")
	}
	return r, nil
}
