package natstest_test

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// TestFreePortOutsideEphemeralRange: the kernel hands ports of its ephemeral range to every outgoing connection
// (clients, routes, reconnects of every test process on the machine). A port picked there and closed until the
// server listens on it can be taken meanwhile; the server then runs without its listener and never becomes ready
// (make test failed so, twice: "server n2 not ready after 30s (running: true)").
func TestFreePortOutsideEphemeralRange(t *testing.T) {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no ephemeral port range to read here")
	}
	f := strings.Fields(string(raw))
	lo, _ := strconv.Atoi(f[0])
	hi, _ := strconv.Atoi(f[1])
	for range 200 {
		if p := natstest.FreePort(t); p >= lo && p <= hi {
			t.Fatalf("FreePort gave %d, inside the ephemeral range %d-%d", p, lo, hi)
		}
	}
}

// TestFreePortHeldUntilTestEnds: test packages run as parallel processes, each picking ports; a port handed out
// stays reserved (across processes too) until its test ends, so no two callers are given the same one.
func TestFreePortHeldUntilTestEnds(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 250 {
				p := natstest.FreePort(t)
				mu.Lock()
				if seen[p] {
					t.Errorf("port %d handed out twice", p)
				}
				seen[p] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
