package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func unitsOf(ctxs ...context.Context) []*laneUnit {
	units := make([]*laneUnit, len(ctxs))
	for i, ctx := range ctxs {
		units[i] = &laneUnit{ctx: ctx}
	}
	return units
}

// ended reports whether ctx ends within a short wait.
func ended(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(50 * time.Millisecond):
		return false
	}
}

// The merged context of a request ends only once every caller's context
// has, with the last one's cause, however the callers share contexts.
func TestMergedContext_EndsWhenTheLastCallerContextEnds(t *testing.T) {
	for _, distinct := range []int{1, 3, distinctEndingsScanMax + 5} {
		t.Run(fmt.Sprint(distinct, " distinct"), func(t *testing.T) {
			cancels := make([]context.CancelCauseFunc, distinct)
			var ctxs []context.Context
			for i := range cancels {
				ctx, cancel := context.WithCancelCause(context.Background())
				cancels[i] = cancel
				// Each context three times, once under a value: all
				// share its Done channel.
				type key struct{}
				ctxs = append(ctxs, ctx, context.WithValue(ctx, key{}, i), ctx)
			}
			merged, release := mergedContext(unitsOf(ctxs...))
			defer release()
			last := errors.New("the last caller gave up")
			for i, cancel := range cancels[:distinct-1] {
				cancel(fmt.Errorf("caller %d gave up", i))
				if i == 0 && ended(merged) {
					t.Fatal("merged context ended with callers still waiting")
				}
			}
			if distinct > 1 && ended(merged) {
				t.Fatal("merged context ended with one caller still waiting")
			}
			cancels[distinct-1](last)
			if !ended(merged) {
				t.Fatal("merged context still running after every caller's ended")
			}
			if cause := context.Cause(merged); !errors.Is(cause, last) {
				t.Fatalf("cause %v, want the last caller's", cause)
			}
		})
	}
}

// A caller whose context can never end keeps the merged one running, and
// its release ends it.
func TestMergedContext_NeverEndsWithACallerThatCannot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	merged, release := mergedContext(unitsOf(ctx, context.Background()))
	cancel()
	if ended(merged) {
		t.Fatal("merged context ended while a caller without a deadline waits")
	}
	release()
	if !ended(merged) {
		t.Fatal("release did not end the merged context")
	}
}

// Callers sharing one context cost one watch, not one per caller.
func TestMergedContext_SharedContextAllocatesOnceNotPerCaller(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	few := unitsOf(ctx, ctx)
	many := make([]*laneUnit, 256)
	for i := range many {
		many[i] = &laneUnit{ctx: ctx}
	}
	allocs := func(units []*laneUnit) float64 {
		return testing.AllocsPerRun(50, func() {
			_, release := mergedContext(units)
			release()
		})
	}
	if a, b := allocs(few), allocs(many); b > a {
		t.Fatalf("%v allocations for 256 callers sharing a context, %v for 2", b, a)
	}
}
