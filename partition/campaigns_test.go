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
	if !c.TryAcquire(false) || c.TryAcquire(false) {
		t.Fatal("one slot: the first TryAcquire must succeed and the second fail")
	}
	w1, done1 := c.Wait(false)
	w2, done2 := c.Wait(false)
	w3, done3 := c.Wait(false)
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
	if !c.TryAcquire(false) {
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
	w4, done4 := c.Wait(false)
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
	c.TryAcquire(false)
	_, keep := c.Wait(false)
	for range 10000 {
		_, done := c.Wait(false)
		done(false)
	}
	c.mu.Lock()
	n := len(c.idle.waiters)
	c.mu.Unlock()
	if n > 4 || c.Waiting() != 1 {
		t.Fatalf("queue of %d entries for %d live waiters", n, c.Waiting())
	}
	keep(false)
}

// Busy groups (priority asks) may take the reserved slots that idle ones
// leave alone, and a released slot goes to a waiting busy group before
// the idle ones that queued earlier.
func TestCampaigns_BusyGroupsGoFirst(t *testing.T) {
	c := mustCampaigns(t, 2)
	for range 2 {
		if !c.TryAcquire(false) {
			t.Fatal("an idle group could not take one of the 2 slots")
		}
	}
	if c.TryAcquire(false) {
		t.Fatal("an idle group took a reserved slot")
	}
	for i := range CampaignsReserved {
		if !c.TryAcquire(true) {
			t.Fatalf("a busy group could not take reserved slot %d", i)
		}
	}
	if c.TryAcquire(true) {
		t.Fatal("a busy group took a slot beyond the bound and the reserve")
	}
	idleWake, idleDone := c.Wait(false)
	busyWake, busyDone := c.Wait(true)
	c.Release() // free: 1, all of it reserved: the busy waiter only
	if !woken(busyWake) || woken(idleWake) {
		t.Fatal("a released slot must go to the busy waiter first")
	}
	if !c.TryAcquire(true) {
		t.Fatal("the woken busy waiter could not take the slot")
	}
	busyDone(true)
	for range CampaignsReserved + 1 {
		c.Release()
	}
	// Free: CampaignsReserved+1, one above the reserve: the idle waiter.
	if !woken(idleWake) {
		t.Fatal("a slot above the reserve must wake the idle waiter")
	}
	if !c.TryAcquire(false) {
		t.Fatal("the woken idle waiter could not take the slot")
	}
	idleDone(true)
	if c.Waiting() != 0 || c.InUse() != 2 {
		t.Fatalf("%d waiting, %d in use; want 0 and 2", c.Waiting(), c.InUse())
	}
}
