package raftlog

import (
	"fmt"
	"sync"
	"testing"
)

// Groups created at once share registry saves, every one gets its own id,
// a name asked for twice at once is one group, and all of them are there
// after a reopen.
func TestStore_ConcurrentGroupsShareRegistrySaves(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	const n = 300
	groups := make([]*GroupLog, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Go(func() {
			g, err := s.Group(fmt.Sprintf("g%d", i%n)) // each name twice
			if err != nil {
				t.Errorf("Group: %v", err)
			}
			groups[i] = g
		})
	}
	wg.Wait()
	ids := map[uint32]string{}
	for i := range n {
		a, b := groups[i], groups[i+n]
		if a == nil || a != b {
			t.Fatalf("g%d: two callers got %p and %p", i, a, b)
		}
		if other, dup := ids[a.id]; dup {
			t.Fatalf("g%d and %s share id %d", i, other, a.id)
		}
		ids[a.id] = a.name
	}
	st := s.Stats()
	if st.Groups != n || st.RegistrySaves >= n {
		t.Fatalf("%d groups in %d registry saves; want %d in fewer saves than groups", st.Groups, st.RegistrySaves, n)
	}
	t.Logf("%d groups created at once in %d registry saves", n, st.RegistrySaves)
	mustClose(t, s)
	s2, _ := openStore(t, cfg)
	for i := range n {
		g, err := s2.Group(fmt.Sprintf("g%d", i))
		if err != nil || g.id != groups[i].id {
			t.Fatalf("g%d after reopen: id %v, %v; want %d", i, g, err, groups[i].id)
		}
	}
	if st := s2.Stats(); st.RegistrySaves != 0 {
		t.Fatalf("reopening and looking up known groups saved the registry %d times", st.RegistrySaves)
	}
}
