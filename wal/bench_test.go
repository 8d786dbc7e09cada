package wal

import (
	"fmt"
	"log/slog"
	"testing"
)

// benchConfig uses default-sized segments in a temporary directory.
func benchConfig(b *testing.B) Config {
	cfg := DefaultConfig(b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

func BenchmarkWAL_Append(b *testing.B) {
	for _, size := range []int{256, 4 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			l, _ := openLog(b, benchConfig(b))
			payload := payloadFor(1, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Append(uint64(i), payload); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if err := l.Sync(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func BenchmarkWAL_Read(b *testing.B) {
	const records = 4096
	const size = 256
	l, _ := openLog(b, benchConfig(b))
	positions := make([]Pos, records)
	for i := range positions {
		positions[i] = mustAppend(b, l, uint64(i), payloadFor(uint64(i), size))
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A stride that visits positions out of order.
		if _, _, err := l.Read(positions[uint(i)*2654435761%records]); err != nil {
			b.Fatal(err)
		}
	}
}
