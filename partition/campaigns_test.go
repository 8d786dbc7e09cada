package partition

import "testing"

func mustCampaigns(t *testing.T, n int) *Campaigns {
	t.Helper()
	c, err := NewCampaigns(n)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Slots are bounded, waiters are woken one per release in the order they
// queued, and a wake that a waiter does not use passes to the next.
func TestCampaigns_QueueWakesInOrderAndPassesUnusedWakes(t *testing.T) {
	c := mustCampaigns(t, 1)
	if !c.TryAcquire() || c.TryAcquire() {
		t.Fatal("one slot: the first TryAcquire must succeed and the second fail")
	}
	w1, done1 := c.Wait()
	w2, done2 := c.Wait()
	w3, done3 := c.Wait()
	if c.Waiting() != 3 || woken(w1) || woken(w2) || woken(w3) {
		t.Fatalf("%d waiting, wakes before any release", c.Waiting())
	}
	c.Release()
	if !woken(w1) || woken(w2) || woken(w3) {
		t.Fatal("a release must wake the first waiter only")
	}
	done1(false) // woken, found a leader meanwhile: the wake passes on
	if !woken(w2) || woken(w3) {
		t.Fatal("an unused wake must pass to the next waiter")
	}
	if !c.TryAcquire() {
		t.Fatal("the woken waiter could not take the free slot")
	}
	done2(true)
	if woken(w3) || c.Waiting() != 1 {
		t.Fatal("a used wake must not wake another")
	}
	done3(false) // leaves without a wake: nothing to pass, the slot is taken
	if c.Waiting() != 0 || c.InUse() != 1 {
		t.Fatalf("%d waiting, %d in use; want 0 and 1", c.Waiting(), c.InUse())
	}
	c.Release()
	if c.InUse() != 0 {
		t.Fatal("slot not returned")
	}
	w4, done4 := c.Wait()
	if !woken(w4) {
		t.Fatal("waiting while a slot is free must wake at once")
	}
	done4(false)
	defer func() {
		if recover() == nil {
			t.Fatal("a release with no slot taken must panic")
		}
	}()
	c.Release()
}

// Waiters that leave without being woken are compacted away: the queue
// never holds more than twice the live waiters.
func TestCampaigns_LeftWaitersDoNotPileUp(t *testing.T) {
	c := mustCampaigns(t, 1)
	c.TryAcquire()
	_, keep := c.Wait()
	for range 10000 {
		_, done := c.Wait()
		done(false)
	}
	c.mu.Lock()
	n := len(c.waiters)
	c.mu.Unlock()
	if n > 4 || c.Waiting() != 1 {
		t.Fatalf("queue of %d entries for %d live waiters", n, c.Waiting())
	}
	keep(false)
}
