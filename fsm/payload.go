package fsm

import (
	"encoding/binary"
	"errors"
	"slices"
)

// A stored payload is the headers, sorted by key, followed by the body:
//
//	u16 header count, then per header: u16 key length, key, u32 value length,
//	value; then the body bytes to the end.
//
// Sorting makes the bytes (and so their checksum) independent of map order.

var errBadPayload = errors.New("fsm: malformed stored payload")

// messageBytes is the size MaxMessageBytes limits: body plus header keys and
// values.
func messageBytes(headers map[string]string, body []byte) int {
	n := len(body)
	for k, v := range headers {
		n += len(k) + len(v)
	}
	return n
}

func encodePayload(headers map[string]string, body []byte) []byte {
	keys := make([]string, 0, len(headers))
	size := 2 + len(body)
	for k, v := range headers {
		keys = append(keys, k)
		size += 6 + len(k) + len(v)
	}
	slices.Sort(keys)
	buf := make([]byte, 0, size)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(keys)))
	for _, k := range keys {
		v := headers[k]
		buf = binary.LittleEndian.AppendUint16(buf, uint16(len(k)))
		buf = append(buf, k...)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(v)))
		buf = append(buf, v...)
	}
	return append(buf, body...)
}

func decodePayload(p []byte) (map[string]string, []byte, error) {
	if len(p) < 2 {
		return nil, nil, errBadPayload
	}
	n := int(binary.LittleEndian.Uint16(p))
	p = p[2:]
	var headers map[string]string
	if n > 0 {
		headers = make(map[string]string, n)
	}
	for range n {
		if len(p) < 2 {
			return nil, nil, errBadPayload
		}
		kl := int(binary.LittleEndian.Uint16(p))
		if len(p) < 2+kl+4 {
			return nil, nil, errBadPayload
		}
		k := string(p[2 : 2+kl])
		p = p[2+kl:]
		vl := int(binary.LittleEndian.Uint32(p))
		if len(p) < 4+vl {
			return nil, nil, errBadPayload
		}
		headers[k] = string(p[4 : 4+vl])
		p = p[4+vl:]
	}
	return headers, p, nil
}
