package transport

import (
	"fmt"
	"io"
)

// Connection header layout; see the package documentation.
const (
	headerMagic          = "FRYR"
	headerVersion   byte = 1                    // a connection of one group (StreamLayer)
	headerShared    byte = 2                    // a connection of the shared transport
	headerFixedSize      = len(headerMagic) + 2 // magic, version, id length or class

	// MaxGroupIDLen is the longest group id in bytes: its length travels
	// in one byte of the connection header.
	MaxGroupIDLen = 255
)

// ValidateGroupID reports whether id can name a group: 1 to MaxGroupIDLen
// bytes of printable ASCII without spaces (0x21 to 0x7e), so that it can
// be logged and typed as is. The error wraps ErrInvalidGroupID.
func ValidateGroupID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidGroupID)
	}
	if len(id) > MaxGroupIDLen {
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidGroupID, len(id), MaxGroupIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: %q: byte %d (0x%02x) is not printable ASCII", ErrInvalidGroupID, id, i, c)
		}
	}
	return nil
}

// appendHeader appends the connection header naming group id to b. The id
// must have passed ValidateGroupID.
func appendHeader(b []byte, id string) []byte {
	b = append(b, headerMagic...)
	b = append(b, headerVersion, byte(len(id)))
	return append(b, id...)
}

// appendSharedHeader appends the header of a shared-transport connection
// of the given class to b.
func appendSharedHeader(b []byte, class byte) []byte {
	b = append(b, headerMagic...)
	return append(b, headerShared, class)
}

// connHeader is what a connection header names: a group (version 1) or a
// class of shared-transport connection (version 2).
type connHeader struct {
	group string
	class byte // 0 for a group's connection
}

// readHeader reads exactly one connection header from r. It never reads
// past the header. Every failure wraps ErrBadHeader.
func readHeader(r io.Reader) (connHeader, error) {
	var fixed [headerFixedSize]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return connHeader{}, fmt.Errorf("%w: %w", ErrBadHeader, err)
	}
	if string(fixed[:len(headerMagic)]) != headerMagic {
		return connHeader{}, fmt.Errorf("%w: bad magic %q", ErrBadHeader, fixed[:len(headerMagic)])
	}
	switch v := fixed[len(headerMagic)]; v {
	case headerVersion:
	case headerShared:
		class := fixed[len(headerMagic)+1]
		if class == 0 || class >= numClasses {
			return connHeader{}, fmt.Errorf("%w: unknown connection class %d", ErrBadHeader, class)
		}
		return connHeader{class: class}, nil
	default:
		return connHeader{}, fmt.Errorf("%w: unsupported version %d (want %d or %d)", ErrBadHeader, v, headerVersion, headerShared)
	}
	id, err := readGroupID(r, int(fixed[len(headerMagic)+1]))
	return connHeader{group: id}, err
}

// readGroupID reads the n-byte group id of a version 1 header.
func readGroupID(r io.Reader, n int) (string, error) {
	if n == 0 {
		return "", fmt.Errorf("%w: empty group id", ErrBadHeader)
	}
	id := make([]byte, n)
	if _, err := io.ReadFull(r, id); err != nil {
		return "", fmt.Errorf("%w: reading %d-byte group id: %w", ErrBadHeader, n, err)
	}
	if err := ValidateGroupID(string(id)); err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadHeader, err)
	}
	return string(id), nil
}
