package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestLoopback_PortBelowTheEphemeralRangeAndBindable(t *testing.T) {
	for range 20 {
		addr, err := Loopback("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if port < portMin || port >= portMax {
			t.Fatalf("port %d outside [%d, %d)", port, portMin, portMax)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("picked %s, cannot bind it: %v", addr, err)
		}
		ln.Close()
	}
}

func TestLoopback_SkipsATakenPort(t *testing.T) {
	taken := map[string]net.Listener{}
	defer func() {
		for _, ln := range taken {
			ln.Close()
		}
	}()
	for range 50 {
		addr, err := Loopback("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := taken[addr]; dup {
			t.Fatalf("picked %s, which is held open", addr)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		taken[addr] = ln
	}
}
