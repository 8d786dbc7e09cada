package raftlog

import (
	"fmt"
	"math"
)

// regBatch is one save of the registry file that every group created
// while the previous save ran waits for: a node opening hundreds of new
// partitions at once writes the file (and pays its two fsyncs) a few
// times, not once per group.
type regBatch struct {
	names []string
	ids   []uint32
	done  chan struct{} // closed once the save ended; err is set then
	err   error
}

// register creates the group name, durably: it joins the batch being
// gathered (or starts one and saves it), and returns once that batch's
// save ended. A name being registered by another caller waits for that
// caller's batch.
func (s *Store) register(name string) (*GroupLog, error) {
	s.regMu.Lock()
	if b := s.regWaiting[name]; b != nil {
		s.regMu.Unlock()
		return s.registered(name, b)
	}
	s.mu.RLock()
	g := s.groups[name]
	s.mu.RUnlock()
	if g != nil {
		s.regMu.Unlock()
		return g, nil
	}
	if len(s.reg.ids) >= s.cfg.GroupsMax || s.reg.nextID == math.MaxUint32 {
		n := len(s.reg.ids)
		s.regMu.Unlock()
		return nil, fmt.Errorf("%w: %d groups, limit %d (Config.GroupsMax)", ErrTooManyGroups, n, s.cfg.GroupsMax)
	}
	id := s.reg.nextID
	s.reg.ids[name] = id
	s.reg.nextID++
	b := s.regNext
	saver := b == nil
	if saver {
		b = &regBatch{done: make(chan struct{})}
		s.regNext = b
	}
	b.names, b.ids = append(b.names, name), append(b.ids, id)
	s.regWaiting[name] = b
	s.regMu.Unlock()
	if saver {
		s.saveBatch(b)
	}
	return s.registered(name, b)
}

// registered waits for b and returns name's group once b saved it.
func (s *Store) registered(name string, b *regBatch) (*GroupLog, error) {
	<-b.done
	if b.err != nil {
		return nil, b.err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if g := s.groups[name]; g != nil {
		return g, nil
	}
	return nil, ErrClosed // saved, but the store closed before it could be used
}

// saveBatch writes the registry with b's groups (and any earlier ones) and
// makes them usable; on failure b's names leave the registry again (their
// ids are not reused: nextID only grows).
func (s *Store) saveBatch(b *regBatch) {
	s.regSave.Lock()
	defer s.regSave.Unlock()
	s.regMu.Lock()
	if s.regNext == b {
		s.regNext = nil // later creations gather the next batch
	}
	data := s.reg.encode()
	s.regMu.Unlock()
	err := s.reg.write(data)
	s.st.registrySaves.Add(1)
	s.regMu.Lock()
	defer s.regMu.Unlock()
	for _, name := range b.names {
		delete(s.regWaiting, name)
	}
	if err != nil {
		for _, name := range b.names {
			delete(s.reg.ids, name)
		}
		b.err = classifyWriteError(err)
		close(b.done)
		return
	}
	s.mu.Lock()
	if !s.closed {
		for i, name := range b.names {
			g := &GroupLog{s: s, name: name, id: b.ids[i]}
			s.groups[name], s.byID[g.id] = g, g
		}
	}
	s.mu.Unlock()
	close(b.done)
}
