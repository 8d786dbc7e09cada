package client

import (
	"errors"
	"testing"
)

func TestReceipt_TextFormRoundTrips(t *testing.T) {
	r := Receipt{Queue: "orders.eu-1", Partition: 3, Seq: 17, Attempt: 2}
	s := r.String()
	if s != "orders.eu-1:3:17:2" {
		t.Fatalf("String() = %q", s)
	}
	back, err := ParseReceipt(s)
	if err != nil || back != r {
		t.Fatalf("ParseReceipt(%q) = %+v, %v", s, back, err)
	}
	for _, bad := range []string{"", "orders", "orders:0:1", ":0:1:1", "orders:x:1:1", "orders:0:0:1", "orders:0:1:0",
		"orders:-1:1:1", "orders:0:1:1:9", "orders:0:1:99999999999"} {
		if _, err := ParseReceipt(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseReceipt(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestReceipt_IncompleteReceiptsFailWithoutACall(t *testing.T) {
	c := &Client{queues: map[string]*Queue{}}
	errs := c.AckReceipts(t.Context(), []Receipt{{Partition: 0, Seq: 1, Attempt: 1}, {Queue: "q", Seq: 0, Attempt: 1}})
	for i, err := range errs {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("receipt %d: %v, want ErrInvalidArgument", i, err)
		}
	}
}
