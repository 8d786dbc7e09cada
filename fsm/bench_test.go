package fsm

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ferrymq/ferry/wal"
	"github.com/vmihailenco/msgpack/v5"
)

// benchID returns a 26-character id, the length of the ids the client
// library generates.
func benchID(i int) string { return fmt.Sprintf("01JF%022d", i) }

func benchWAL(b *testing.B) *wal.Log {
	l, _, err := wal.Open(wal.DefaultConfig(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

func mustEncode(b *testing.B, c Command) []byte {
	data, err := EncodeCommand(c)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkFSM_SendReceiveAck measures the state machine's throughput for
// the full life of 256-byte messages, in batches of 64 as the partition
// layer groups them: send, receive and ack log entries decoded and applied
// through Apply, bodies in a real WAL. One op is one message. With the
// default 5-minute dedup window every id of the run stays remembered (the
// benchmark's clock advances 1 µs per batch), so that case also measures a
// dedup table of b.N entries. The priorities case sends priorities 0 to 9
// in turn: each receive picks from ten levels.
func BenchmarkFSM_SendReceiveAck(b *testing.B) {
	b.Run("dedup=5m", func(b *testing.B) { benchSendReceiveAck(b, DefaultQueueConfig(), false) })
	noDedup := DefaultQueueConfig()
	noDedup.DedupWindow = 0
	b.Run("dedup=off", func(b *testing.B) { benchSendReceiveAck(b, noDedup, false) })
	b.Run("dedup=off,priorities", func(b *testing.B) { benchSendReceiveAck(b, noDedup, true) })
}

func benchSendReceiveAck(b *testing.B, cfg QueueConfig, priorities bool) {
	f, err := New(cfg, WALBodyStore{benchWAL(b)})
	if err != nil {
		b.Fatal(err)
	}
	const batch = 64
	body := make([]byte, 256)
	msgs := make([]NewMessage, batch)
	receipts := make([]Receipt, batch)
	now := t0
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		// Encoding is the proposing leader's work, not the state machine's.
		b.StopTimer()
		now += 1000
		for i := range msgs {
			msgs[i] = NewMessage{ID: benchID(done + i), Body: body}
			if priorities {
				msgs[i].Priority = uint8((done + i) % (PriorityMax + 1))
			}
		}
		send := mustEncode(b, Command{Type: CmdSend, At: now, Send: &SendCmd{Messages: msgs}})
		recv := mustEncode(b, Command{Type: CmdReceive, At: now, Receive: &ReceiveCmd{Consumer: "bench", Max: batch}})
		b.StartTimer()
		f.Apply(send)
		r := f.Apply(recv)
		b.StopTimer()
		for i, d := range r.Delivered {
			receipts[i] = d.Receipt
		}
		ack := mustEncode(b, Command{Type: CmdAck, At: now, Ack: &AckCmd{Receipts: receipts[:len(r.Delivered)]}})
		b.StartTimer()
		f.Apply(ack)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkFSM_MemoryPerMessage queues 1,000,000 messages of 1 KiB with
// bodies in a real WAL and reports the heap the FSM holds per message.
func BenchmarkFSM_MemoryPerMessage(b *testing.B) {
	const count, batch = 1_000_000, 500
	body := make([]byte, 1024)
	for range b.N {
		f, err := New(DefaultQueueConfig(), WALBodyStore{benchWAL(b)})
		if err != nil {
			b.Fatal(err)
		}
		before := heapInUse()
		msgs := make([]NewMessage, batch)
		for done := 0; done < count; done += batch {
			for i := range msgs {
				msgs[i] = NewMessage{ID: benchID(done + i), Body: body}
			}
			f.ApplyCommand(Command{Type: CmdSend, At: t0, Send: &SendCmd{Messages: msgs}})
		}
		after := heapInUse()
		if st := f.Stats(); st.Ready != count {
			b.Fatalf("%d ready", st.Ready)
		}
		b.ReportMetric(float64(after-before)/count, "B/msg")
		runtime.KeepAlive(f)
	}
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkFSM_MemoryPerScheduledMessage schedules 1,000,000 messages of
// 100 bytes on one partition, each delayed by up to a year (spread
// evenly), with bodies in a real WAL, and reports the heap the FSM holds
// per message: the index entry of a delayed message, its id and its place
// in the timer tree. "dedup" keeps every id in the dedup window (all sent
// within it, the worst case); "nodedup" runs with deduplication off.
func BenchmarkFSM_MemoryPerScheduledMessage(b *testing.B) {
	for _, dedup := range []bool{true, false} {
		name := "dedup"
		if !dedup {
			name = "nodedup"
		}
		b.Run(name, func(b *testing.B) {
			const count, batch = 1_000_000, 500
			body := make([]byte, 100)
			cfg := DefaultQueueConfig()
			if !dedup {
				cfg.DedupWindow = 0
			}
			step := int64(SendDelayMax) / count
			for range b.N {
				f, err := New(cfg, WALBodyStore{benchWAL(b)})
				if err != nil {
					b.Fatal(err)
				}
				before := heapInUse()
				msgs := make([]NewMessage, batch)
				for done := 0; done < count; done += batch {
					for i := range msgs {
						k := int64((done + i) * 7919 % count) // delays in no particular order
						msgs[i] = NewMessage{ID: benchID(done + i), Body: body, Delay: time.Duration(k*step + 1)}
					}
					f.ApplyCommand(Command{Type: CmdSend, At: t0, Send: &SendCmd{Messages: msgs}})
				}
				after := heapInUse()
				if st := f.Stats(); st.Delayed != count {
					b.Fatalf("%d delayed", st.Delayed)
				}
				b.ReportMetric(float64(after-before)/count, "B/msg")
				runtime.KeepAlive(f)
			}
		})
	}
}

// BenchmarkFSM_ApplySendEntry measures what every replica does per sent
// message: decode a send log entry of 64 messages of 256 bytes and apply
// it, payloads referred to where the entry holds them (as the partition's
// store does). One op is one message; entries are encoded before the
// timer starts.
func BenchmarkFSM_ApplySendEntry(b *testing.B) {
	b.Run("dedup=5m", func(b *testing.B) { benchApplySendEntry(b, DefaultQueueConfig()) })
	noDedup := DefaultQueueConfig()
	noDedup.DedupWindow = 0
	b.Run("dedup=off", func(b *testing.B) { benchApplySendEntry(b, noDedup) })
}

func benchApplySendEntry(b *testing.B, cfg QueueConfig) {
	const batch = 64
	f, err := New(cfg, locStore{})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 256)
	msgs := make([]NewMessage, batch)
	entries := make([][]byte, 0, b.N/batch+1)
	for done := 0; done < b.N; done += batch {
		for i := range msgs {
			msgs[i] = NewMessage{ID: benchID(done + i), Body: body}
		}
		entries = append(entries, mustEncode(b, Command{Type: CmdSend, At: t0 + int64(done), Send: &SendCmd{Messages: msgs}}))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i, data := range entries {
		if r := f.ApplyEntry(uint64(i+1), data); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkFSM_ReceiveAckCodec encodes and decodes a receive-ack entry
// settling 100 receipts, as a batched consumer's next receive does: the
// leader encodes it once and every replica decodes it. "reflection" is the
// same form through msgpack's reflection, as before the codec. One op is
// one entry.
func BenchmarkFSM_ReceiveAckCodec(b *testing.B) {
	ra := ReceiveAckCmd{Receive: ReceiveCmd{Consumer: "consumer-1", Max: 100, MaxBytes: 1 << 20}}
	for i := range 100 {
		ra.Receipts = append(ra.Receipts, Receipt{Seq: uint64(1_000_000 + i), Attempt: 1})
	}
	c := Command{Type: CmdReceiveAck, At: t0, ReceiveAck: &ra}
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			data, err := EncodeCommand(c)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := DecodeCommand(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflection", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var buf bytes.Buffer
			enc := msgpack.NewEncoder(&buf)
			enc.UseCompactInts(true)
			v := receiveAckByReflection(ra)
			if err := encodeAll(enc.Encode(&commandHeader{Type: CmdReceiveAck, At: t0}), enc.Encode(&v)); err != nil {
				b.Fatal(err)
			}
			var back receiveAckByReflection
			dec := msgpack.NewDecoder(bytes.NewReader(buf.Bytes()))
			if err := encodeAll(dec.Decode(&commandHeader{}), dec.Decode(&back)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
