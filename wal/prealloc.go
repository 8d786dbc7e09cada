package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Pre-written segments. With Config.PreallocateSegments the next segment
// file (the spare) is written full of zeros and fsynced in the background
// while the active segment fills, under spareFileName. Rotation renames it
// into place and writes its header, so that appends overwrite blocks that
// already exist and an fdatasync commits no size change. At most one spare
// exists, prepared once the active segment is half full; preparing it
// never fails an append: without a ready spare, rotation creates an empty
// segment as before. The first segment of a directory, and the one active
// when a Log is opened, are not pre-written: once such a segment holds
// earlySealBytes a spare is prepared and the segment is sealed early when
// it is ready. The spare's file is open only while it is filled (outside
// any FileCache bound); a ready spare waits closed, and rotation opens it
// as a segment through the FileCache.
const (
	// spareFileName is the spare's name while it is prepared and waits.
	// Recovery deletes a spare left by a crash.
	spareFileName = "spare.seg.tmp"
	// spareFillChunkBytes is the size of one zero write (and fdatasync)
	// while filling the spare: on a disk that writes 400 MB/s an append's
	// fdatasync waits at most about 0.7 ms behind one. Close interrupts
	// the fill between chunks.
	spareFillChunkBytes = 256 << 10
)

// spareState is the Log's spare segment file. Fields are guarded by
// Log.mu.
type spareState struct {
	ready     bool  // a filled spare waits, closed, under spareFileName
	bytes     int64 // size of the ready spare's file
	preparing bool  // a goroutine is filling a spare
	// skippedFor is the active segment for which no spare is prepared
	// because it is being written too fast (Config.PrewriteRateMaxBytesPerSecond).
	skippedFor uint32
	// failedFor is the active segment during which preparing a spare
	// last failed; no new attempt is made until the next rotation.
	failedFor uint32
	stop      chan struct{}
	done      chan struct{} // closed when the preparing goroutine ends
}

// removeStaleSpare deletes a spare left by an earlier process.
func removeStaleSpare(dir string) error {
	err := os.Remove(filepath.Join(dir, spareFileName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("wal: remove stale spare segment: %w", err)
	}
	return nil
}

// earlySealBytes is how full an active segment that was not pre-written
// must be before a spare is prepared for it and it is sealed early, as
// soon as the spare is ready: a log opened on such a segment then gets
// pre-written segments after a few hundred KiB rather than a whole
// segment. Every fdatasync of an append that grows the file commits the
// new size to the file system's journal (on ext4 here: 110-130 us for a
// 4 KiB append against 70-80 us into pre-written blocks), and it was 4 MiB
// until a fresh three-node cluster showed what that costs: its first 4 MiB
// (about 10,000 small messages per node) plus the fill took 16 synchronous
// senders at 7,900-9,300 msgs/s against 10,200-12,800 with 256 KiB
// (interleaved fresh clusters, `ferry bench pub --sync -c 16 -n 16000`
// after 3,000 single-client sends). A log that never gets this far holds
// no spare. Segments of at most twice this size just wait for half, as
// usual.
const earlySealBytes = 256 << 10

// spareStartBytesLocked is the active segment size at which a spare is
// prepared: half the segment, or earlySealBytes for an active segment
// that was not pre-written if that is less.
func (l *Log) spareStartBytesLocked() int64 {
	half := l.cfg.SegmentBytesMax / 2
	if l.active.prewritten {
		return half
	}
	return min(half, earlySealBytes)
}

// sealEarlyLocked reports whether the active segment, which was not
// pre-written, should be sealed now that a spare is ready. Segments of at
// most twice earlySealBytes are never sealed early.
func (l *Log) sealEarlyLocked() bool {
	return l.spare.ready && !l.active.prewritten && l.active.sizeBytes >= earlySealBytes &&
		l.cfg.SegmentBytesMax > 2*earlySealBytes
}

// startSpareLocked starts preparing a spare if preallocation is on, the
// active segment has reached spareStartBytesLocked, no spare is ready or
// being prepared, and the active segment is being written slower than
// Config.PrewriteRateMaxBytesPerSecond. Waiting keeps idle logs from
// holding a spare. The rate is judged once per segment.
func (l *Log) startSpareLocked() {
	if !l.cfg.PreallocateSegments || l.closed || l.spare.ready || l.spare.preparing ||
		l.active.sizeBytes < l.spareStartBytesLocked() || l.spare.failedFor == l.active.num ||
		l.spare.skippedFor == l.active.num {
		return
	}
	if l.activeRateTooHighLocked(time.Now()) {
		l.spare.skippedFor = l.active.num
		l.sparesSkipped++
		return
	}
	l.spare.preparing = true
	l.spare.stop = make(chan struct{})
	l.spare.done = make(chan struct{})
	go l.prepareSpare(l.spare.stop, l.spare.done)
}

// activeRateTooHighLocked reports whether the active segment has been
// appended to faster than Config.PrewriteRateMaxBytesPerSecond since it
// became active.
func (l *Log) activeRateTooHighLocked(now time.Time) bool {
	written := l.active.sizeBytes - l.active.activeBaseBytes
	elapsed := now.Sub(l.active.activeSince)
	if elapsed <= 0 {
		return written > 0
	}
	return float64(written) > float64(l.cfg.PrewriteRateMaxBytesPerSecond)*elapsed.Seconds()
}

// prepareSpare writes a zero-filled, fsynced spare and offers it to the
// Log. On failure or stop the file is removed and rotation goes on as if
// preallocation were off until the next attempt (at the next rotation).
func (l *Log) prepareSpare(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	path := filepath.Join(l.cfg.Dir, spareFileName)
	f, err := fillSpare(path, l.cfg.SegmentBytesMax, stop)
	if err == nil {
		err = syncDir(l.cfg.Dir)
	}
	created := f != nil // a file this call created; nothing else is removed
	if created {
		// A ready spare waits closed: an idle log holds no descriptor.
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("wal: close spare segment: %w", cerr)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spare.preparing = false
	if err == nil && l.closed {
		err = ErrClosed
	}
	if err != nil {
		if created {
			_ = os.Remove(path)
		}
		l.spareFailures++
		if l.active != nil {
			l.spare.failedFor = l.active.num
		}
		if !errors.Is(err, ErrClosed) && !errors.Is(err, errSpareStopped) {
			l.logger.Warn("wal: preparing a pre-written segment failed; rotating without one",
				"dir", l.cfg.Dir, "err", err)
		}
		return
	}
	l.spare.ready, l.spare.bytes = true, l.cfg.SegmentBytesMax
}

// errSpareStopped reports a fill interrupted by Close.
var errSpareStopped = errors.New("wal: spare preparation stopped")

// fillSpare creates path and writes size zero bytes to it in chunks of
// spareFillChunkBytes, each made durable with fdatasync and followed by a
// pause as long as the chunk took, checking stop between chunks. The
// pacing keeps the fill from queuing more than one chunk ahead of an
// append's fdatasync on the same disk (one 64 MiB flush stalled appends
// for up to a second) and gives it at most about half of the disk's time.
// Before each chunk it checks that the file system keeps at least size
// bytes free after the chunk, room for the active segment to fill up, and
// gives up otherwise: the spare must not be what fills the disk under an
// append. (Other writers to the same file system can still race it.)
func fillSpare(path string, size int64, stop <-chan struct{}) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, segmentFileMode)
	if err != nil {
		return nil, fmt.Errorf("wal: create spare segment: %w", err)
	}
	zeros := make([]byte, min(size, spareFillChunkBytes))
	for off := int64(0); off < size; off += int64(len(zeros)) {
		chunk := zeros[:min(int64(len(zeros)), size-off)]
		if err := checkSpareRoom(f, size+int64(len(chunk))); err != nil {
			return f, err
		}
		began := time.Now()
		if _, err := f.WriteAt(chunk, off); err != nil {
			return f, fmt.Errorf("wal: fill spare segment at offset %d: %w", off, err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return f, fmt.Errorf("wal: sync spare segment at offset %d: %w", off, err)
		}
		if !pauseFill(time.Since(began), stop) {
			return f, errSpareStopped
		}
	}
	if err := f.Sync(); err != nil {
		return f, fmt.Errorf("wal: sync spare segment: %w", err)
	}
	return f, nil
}

// pauseFill waits d, or less if stop is closed; it reports false if it
// was stopped.
func pauseFill(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// takeSpareLocked turns the ready spare into segment num, or returns nil
// if there is none or it cannot be used (the caller then creates the
// segment as usual). The next spare is started by a later append, once
// the new segment is half full.
func (l *Log) takeSpareLocked(num uint32) *segment {
	if !l.spare.ready {
		return nil
	}
	l.spare.ready, l.spare.bytes = false, 0
	from := filepath.Join(l.cfg.Dir, spareFileName)
	seg := l.newSegment(num, false)
	if err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, seg.path, unix.RENAME_NOREPLACE); err != nil {
		_ = os.Remove(from)
		l.logger.Warn("wal: could not use the pre-written segment", "dir", l.cfg.Dir, "segment", num, "err", err)
		return nil
	}
	if err := writeSpareHeader(seg); err != nil {
		_ = seg.close()
		_ = os.Remove(seg.path)
		l.logger.Warn("wal: could not use the pre-written segment", "dir", l.cfg.Dir, "segment", num, "err", err)
		return nil
	}
	seg.sizeBytes, seg.flushedBytes, seg.prewritten = segmentHeaderBytes, segmentHeaderBytes, true
	return seg
}

// writeSpareHeader writes the header of seg, a spare renamed into place.
func writeSpareHeader(seg *segment) error {
	f, _, err := seg.h.acquire(true)
	if err != nil {
		return err
	}
	defer seg.h.release()
	hdr := encodeSegmentHeader(seg.num)
	if _, err := f.WriteAt(hdr[:], 0); err != nil {
		return fmt.Errorf("wal: write header of segment %d: %w", seg.num, err)
	}
	return nil
}

// stopSpare interrupts a spare being prepared, waits for it, and removes
// a ready spare. Close calls it without holding l.mu.
func (l *Log) stopSpare() error {
	l.mu.Lock()
	preparing, stop, done := l.spare.preparing, l.spare.stop, l.spare.done
	if preparing {
		close(stop)
	}
	l.mu.Unlock()
	if preparing {
		<-done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.spare.ready {
		return nil
	}
	l.spare.ready, l.spare.bytes = false, 0
	if err := os.Remove(filepath.Join(l.cfg.Dir, spareFileName)); err != nil {
		return fmt.Errorf("wal: remove spare segment: %w", err)
	}
	return nil
}

// trimPrewritten cuts the zeros after a pre-written segment's logical end
// (flushed first) and makes the cut durable, so that a sealed or closed
// segment file ends at its last record.
func trimPrewritten(seg *segment) error {
	if !seg.prewritten {
		return nil
	}
	if err := seg.flush(); err != nil {
		return err
	}
	f, _, err := seg.h.acquire(true)
	if err != nil {
		return err
	}
	defer seg.h.release()
	if err := f.Truncate(seg.flushedBytes); err != nil {
		return fmt.Errorf("wal: truncate segment %d at offset %d: %w", seg.num, seg.flushedBytes, err)
	}
	seg.prewritten = false
	return nil
}

// errSpareNoRoom reports a spare given up to keep room for appends.
var errSpareNoRoom = errors.New("wal: too little free space for a spare segment")

// checkSpareRoom returns errSpareNoRoom if the file system holding f has
// fewer than needBytes available.
func checkSpareRoom(f *os.File, needBytes int64) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("wal: statfs for spare segment: %w", err)
	}
	if free := st.Bavail * uint64(st.Bsize); free < uint64(needBytes) {
		return fmt.Errorf("%w: %d bytes free, %d wanted", errSpareNoRoom, free, needBytes)
	}
	return nil
}
