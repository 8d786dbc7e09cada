package fsm

import (
	"bytes"
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
	return append(appendPayloadHead(nil, headers, len(body)), body...)
}

// payloadEncodable says whether a stored payload can represent headers:
// at most 65,535 of them, keys of at most 65,535 bytes, values under 4 GiB.
func payloadEncodable(headers map[string]string) bool {
	if len(headers) > 0xffff {
		return false
	}
	for k, v := range headers {
		if len(k) > 0xffff || int64(len(v)) > 0xffffffff {
			return false
		}
	}
	return true
}

// appendPayloadHead appends the headers part of a stored payload to buf,
// with room for bodyBytes more when buf must grow.
func appendPayloadHead(buf []byte, headers map[string]string, bodyBytes int) []byte {
	keys := make([]string, 0, len(headers))
	size := 2 + bodyBytes
	for k, v := range headers {
		keys = append(keys, k)
		size += 6 + len(k) + len(v)
	}
	slices.Sort(keys)
	buf = slices.Grow(buf, size)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(keys)))
	for _, k := range keys {
		v := headers[k]
		buf = binary.LittleEndian.AppendUint16(buf, uint16(len(k)))
		buf = append(buf, k...)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(v)))
		buf = append(buf, v...)
	}
	return buf
}

// scanPayload checks that p is a well-formed, canonical stored payload
// (header keys strictly increasing, so that one set of headers has one
// encoding) and returns its header count and whether a key is empty.
func scanPayload(p []byte) (headers int, emptyKey bool, err error) {
	if len(p) < 2 {
		return 0, false, errBadPayload
	}
	n := int(binary.LittleEndian.Uint16(p))
	p = p[2:]
	var prev []byte
	for i := range n {
		if len(p) < 2 {
			return 0, false, errBadPayload
		}
		kl := int(binary.LittleEndian.Uint16(p))
		if len(p) < 2+kl+4 {
			return 0, false, errBadPayload
		}
		k := p[2 : 2+kl]
		if i > 0 && bytes.Compare(prev, k) >= 0 {
			return 0, false, errBadPayload
		}
		prev, emptyKey = k, emptyKey || kl == 0
		p = p[2+kl:]
		vl := int64(binary.LittleEndian.Uint32(p))
		if int64(len(p)) < 4+vl {
			return 0, false, errBadPayload
		}
		p = p[4+vl:]
	}
	return n, emptyKey, nil
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
