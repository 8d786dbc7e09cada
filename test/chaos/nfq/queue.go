// Package nfq is the chaos suite's userspace link delayer: an NFQUEUE
// client that speaks the nfnetlink_queue protocol over a raw netlink
// socket, and a Delayer that holds each queued packet for a drawn delay
// before accepting it. It makes delay, jitter and reordering on chosen
// address pairs where the kernel has no netem qdisc: an iptables rule
// (-j NFQUEUE --queue-num N --queue-bypass) sends the pair's packets to
// the queue, and the Delayer answers each one with NF_ACCEPT when its time
// comes.
//
// It is test-only code; no production package imports it. It needs root
// (CAP_NET_ADMIN) and a kernel with nfnetlink_queue.
//
// The queue is opened in NFQNL_COPY_META mode (only the packet id is read),
// with a bounded kernel queue length and the fail-open flag, so a full
// queue accepts packets rather than dropping them; the rule's
// --queue-bypass accepts packets when no process is bound, so a dead
// delayer never blackholes traffic. Packets the kernel still holds when
// the socket closes without verdicts are dropped by the kernel: Stop
// accepts every held packet first.
package nfq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Errors.
var (
	// ErrUnavailable: the kernel or the process cannot run an NFQUEUE
	// client (no nfnetlink_queue, no CAP_NET_ADMIN).
	ErrUnavailable = errors.New("nfqueue unavailable")
	// ErrQueueBusy: another socket has bound the queue number.
	ErrQueueBusy = errors.New("nfqueue number already bound")
	// ErrConfig: a configuration value is out of range.
	ErrConfig = errors.New("bad delayer configuration")
	// ErrClosed: the queue or delayer has been closed.
	ErrClosed = errors.New("nfqueue closed")
)

// Netlink and nfnetlink_queue constants (linux/netfilter/nfnetlink.h,
// linux/netfilter/nfnetlink_queue.h).
const (
	nfnlSubsysQueue = 3

	nfqnlMsgPacket  = 0
	nfqnlMsgVerdict = 1
	nfqnlMsgConfig  = 2

	nfqaCfgCmd      = 1
	nfqaCfgParams   = 2
	nfqaCfgQueueMax = 3
	nfqaCfgMask     = 4
	nfqaCfgFlags    = 5

	nfqnlCfgCmdBind   = 1
	nfqnlCfgCmdUnbind = 2

	nfqnlCopyMeta = 1

	nfqaCfgFFailOpen = 1

	nfqaPacketHdr  = 1
	nfqaVerdictHdr = 2

	nfAccept = 1

	nlmsgHdrLen = 16
	nfgenLen    = 4
	nlaHdrLen   = 4
	nlaTypeMask = 0x3fff // strips NLA_F_NESTED and NLA_F_NET_BYTEORDER

	// maxQueueLen bounds the kernel queue length a caller may ask for.
	maxQueueLen = 1 << 16
)

// Queue is one bound NFQUEUE number on a netlink socket. Recv and Verdict
// may be called from different goroutines; Recv from one at a time.
type Queue struct {
	num    uint16
	fd     int
	seq    atomic.Uint32
	rbuf   []byte
	wmu    sync.Mutex
	closed atomic.Bool
	// Stray counts messages that were neither packets nor expected acks
	// (for example errors answering a verdict for an unknown id).
	Stray atomic.Uint64
}

// Open binds queue number num with copy mode META, a kernel queue length
// of maxLen packets and the fail-open flag.
func Open(num uint16, maxLen uint32) (*Queue, error) {
	if maxLen == 0 || maxLen > maxQueueLen {
		return nil, fmt.Errorf("%w: queue length %d outside 1..%d", ErrConfig, maxLen, maxQueueLen)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("%w: netlink socket: %v", ErrUnavailable, err)
	}
	q := &Queue{num: num, fd: fd, rbuf: make([]byte, 64<<10)}
	if err := q.setup(maxLen); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return q, nil
}

func (q *Queue) setup(maxLen uint32) error {
	if err := unix.Bind(q.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("%w: bind netlink: %v", ErrUnavailable, err)
	}
	// A large receive buffer keeps packet messages from being lost when
	// many arrive at once; root may exceed rmem_max.
	if unix.SetsockoptInt(q.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) != nil {
		_ = unix.SetsockoptInt(q.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	_ = unix.SetsockoptInt(q.fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1)
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, unix.AF_INET} // command, pad, pf (big-endian)
	if err := q.config(attr(nfqaCfgCmd, cmd)); err != nil {
		// The kernel answers EPERM when another socket holds the queue.
		if errors.Is(err, unix.EPERM) && queueBound(q.num) {
			return fmt.Errorf("%w: queue %d", ErrQueueBusy, q.num)
		}
		return fmt.Errorf("%w: bind queue %d: %v", ErrUnavailable, q.num, err)
	}
	params := []byte{0, 0, 0, 0, nfqnlCopyMeta} // copy_range (big-endian), copy_mode
	if err := q.config(attr(nfqaCfgParams, params)); err != nil {
		return fmt.Errorf("%w: copy mode: %v", ErrUnavailable, err)
	}
	if err := q.config(attr(nfqaCfgQueueMax, be32(maxLen))); err != nil {
		return fmt.Errorf("%w: queue length: %v", ErrUnavailable, err)
	}
	flags := append(attr(nfqaCfgFlags, be32(nfqaCfgFFailOpen)), attr(nfqaCfgMask, be32(nfqaCfgFFailOpen))...)
	if err := q.config(flags); err != nil {
		return fmt.Errorf("%w: fail-open flag: %v", ErrUnavailable, err)
	}
	// Acknowledgements are awaited at most this long per receive.
	tv := unix.NsecToTimeval(int64(50e6))
	return unix.SetsockoptTimeval(q.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

// queueBound reports whether /proc/net/netfilter/nfnetlink_queue lists
// queue num (its first column) as bound.
func queueBound(num uint16) bool {
	b, err := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == strconv.Itoa(int(num)) {
			return true
		}
	}
	return false
}

// config sends one NFQNL_MSG_CONFIG with the given attributes and waits
// for the kernel's acknowledgement.
func (q *Queue) config(attrs []byte) error {
	seq := q.seq.Add(1)
	msg := q.message(nfqnlMsgConfig, unix.NLM_F_REQUEST|unix.NLM_F_ACK, seq, attrs)
	if err := q.send(msg); err != nil {
		return err
	}
	for range 64 {
		n, _, err := unix.Recvfrom(q.fd, q.rbuf, 0)
		if err != nil {
			return fmt.Errorf("waiting for ack: %w", err)
		}
		if done, err := q.ackOf(q.rbuf[:n], seq); done {
			return err
		}
	}
	return errors.New("no ack from the kernel")
}

// ackOf looks for the NLMSG_ERROR answering seq in buf.
func (q *Queue) ackOf(buf []byte, seq uint32) (bool, error) {
	found, ackErr := false, error(nil)
	walk(buf, func(typ uint16, mseq uint32, body []byte) {
		if typ != unix.NLMSG_ERROR || mseq != seq || len(body) < 4 {
			q.Stray.Add(1)
			return
		}
		found = true
		if code := int32(binary.NativeEndian.Uint32(body)); code != 0 {
			ackErr = unix.Errno(-code)
		}
	})
	return found, ackErr
}

// message builds a netlink message of the queue subsystem for this queue.
func (q *Queue) message(msgType uint16, flags uint16, seq uint32, attrs []byte) []byte {
	b := make([]byte, nlmsgHdrLen+nfgenLen, nlmsgHdrLen+nfgenLen+len(attrs))
	b = append(b, attrs...)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|msgType)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	// nfgenmsg: family AF_UNSPEC, version NFNETLINK_V0, res_id = queue
	// number (big-endian).
	binary.BigEndian.PutUint16(b[nlmsgHdrLen+2:], q.num)
	return b
}

func (q *Queue) send(msg []byte) error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.closed.Load() {
		return ErrClosed
	}
	return unix.Sendto(q.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// Recv waits up to wait for packet messages and appends the ids of the
// packets they carry to ids, reading at most 256 messages. A timeout
// returns ids unchanged and no error.
func (q *Queue) Recv(ids []uint32, wait time.Duration) ([]uint32, error) {
	if q.closed.Load() {
		return ids, ErrClosed
	}
	ms := int((wait + time.Millisecond - 1) / time.Millisecond)
	fds := []unix.PollFd{{Fd: int32(q.fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, ms); n == 0 || err == unix.EINTR {
		return ids, nil
	} else if err != nil {
		return ids, fmt.Errorf("nfqueue %d: poll: %w", q.num, err)
	}
	for range 256 {
		n, _, err := unix.Recvfrom(q.fd, q.rbuf, unix.MSG_DONTWAIT)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			return ids, nil
		case err == unix.ENOBUFS:
			// Messages were lost; the packets they announced stay
			// queued until the socket closes. Carry on.
			q.Stray.Add(1)
			continue
		case err != nil:
			return ids, fmt.Errorf("nfqueue %d: recv: %w", q.num, err)
		}
		ids = q.packetIDs(q.rbuf[:n], ids)
	}
	return ids, nil
}

func (q *Queue) packetIDs(buf []byte, ids []uint32) []uint32 {
	walk(buf, func(typ uint16, _ uint32, body []byte) {
		if typ != nfnlSubsysQueue<<8|nfqnlMsgPacket || len(body) < nfgenLen {
			q.Stray.Add(1)
			return
		}
		if id, ok := packetID(body[nfgenLen:]); ok {
			ids = append(ids, id)
		} else {
			q.Stray.Add(1)
		}
	})
	return ids
}

// Accept issues NF_ACCEPT for the packet with the given id.
func (q *Queue) Accept(id uint32) error {
	hdr := append(be32(nfAccept), be32(id)...)
	return q.send(q.message(nfqnlMsgVerdict, unix.NLM_F_REQUEST, 0, attr(nfqaVerdictHdr, hdr)))
}

// Close unbinds the queue (the kernel drops packets still queued without
// a verdict) and closes the socket. Safe to call more than once.
func (q *Queue) Close() error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.closed.Swap(true) {
		return nil
	}
	cmd := []byte{nfqnlCfgCmdUnbind, 0, 0, unix.AF_INET}
	_ = unix.Sendto(q.fd, q.message(nfqnlMsgConfig, unix.NLM_F_REQUEST, q.seq.Add(1), attr(nfqaCfgCmd, cmd)), 0,
		&unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	return unix.Close(q.fd)
}

// packetID finds NFQA_PACKET_HDR among a packet message's attributes and
// returns its packet id.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= nlaHdrLen {
		l := int(binary.NativeEndian.Uint16(attrs))
		typ := binary.NativeEndian.Uint16(attrs[2:]) & nlaTypeMask
		if l < nlaHdrLen || l > len(attrs) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= nlaHdrLen+4 {
			return binary.BigEndian.Uint32(attrs[nlaHdrLen:]), true
		}
		attrs = attrs[min(align4(l), len(attrs)):]
	}
	return 0, false
}

// walk calls fn for every whole netlink message in buf.
func walk(buf []byte, fn func(typ uint16, seq uint32, body []byte)) {
	for len(buf) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(buf))
		if l < nlmsgHdrLen || l > len(buf) {
			return
		}
		fn(binary.NativeEndian.Uint16(buf[4:]), binary.NativeEndian.Uint32(buf[8:]), buf[nlmsgHdrLen:l])
		buf = buf[min(align4(l), len(buf)):]
	}
}

// attr encodes one netlink attribute, padded to four bytes.
func attr(typ uint16, data []byte) []byte {
	b := make([]byte, nlaHdrLen, align4(nlaHdrLen+len(data)))
	binary.NativeEndian.PutUint16(b, uint16(nlaHdrLen+len(data)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func align4(n int) int { return (n + 3) &^ 3 }
