package kvwindow_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestBytesPerKey fills a file-backed bucket with DEDUPE_KV_SIZE claims (e.g. 100000) through the window and
// reports what the stream stores per key. It is a measurement, not a check of today's figure (BENCHMARKS.md and
// OPERATIONS.md quote it), so it runs only when asked: DEDUPE_KV_SIZE=100000 go test -run TestBytesPerKey ./kvwindow/.
// Keys are realistic provider event ids ("evt_" + 24 characters, raw in the KV key) and, for the hashed form,
// 64-byte keys.
func TestBytesPerKey(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DEDUPE_KV_SIZE"))
	if n <= 0 {
		t.Skip("set DEDUPE_KV_SIZE=<claims> to measure bytes per key")
	}
	for _, tc := range []struct {
		name string
		key  func(i int) string
	}{
		{"raw-key", func(i int) string { return fmt.Sprintf("evt_%024d", i) }},
		{"hashed-key", func(i int) string { return fmt.Sprintf("order.created:%050d", i) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := natstest.Run(t)
			js := jsFor(t, s.URL())
			w := newWindow(t, js, kvwindow.DefaultConfig())
			ctx := ctxT(t, 10*time.Minute)
			// The server runs in this process: after a GC the heap's growth is the server's per-key state (the
			// window keeps none).
			heap0 := liveHeap()
			var next atomic.Int64
			var wg sync.WaitGroup
			var failed atomic.Pointer[error]
			for range 64 {
				wg.Go(func() {
					for {
						i := int(next.Add(1))
						if i > n || failed.Load() != nil {
							return
						}
						c := kvwindow.Claim{Tenant: "acme", Source: "stripe", Key: tc.key(i), TTL: time.Hour,
							Claimant: envelope(uint64(1_000_000 + i)), Delivery: delivery(1)}
						if out, err := w.Claim(ctx, c, kvwindow.Known{}); err != nil || out.Status != kvwindow.Won {
							err = fmt.Errorf("claim %d: %+v %w", i, out, err)
							failed.Store(&err)
							return
						}
					}
				})
			}
			wg.Wait()
			if p := failed.Load(); p != nil {
				t.Fatal(*p)
			}
			st, err := js.Stream(ctx, "KV_dedupe-window")
			if err != nil {
				t.Fatal(err)
			}
			info := st.CachedInfo()
			if info.State.Msgs != uint64(n) {
				t.Fatalf("%d messages, want %d", info.State.Msgs, n)
			}
			k, _ := kvwindow.KVKey("acme", "stripe", tc.key(1))
			m := lastOn(t, st, "acme", "stripe", tc.key(1))
			t.Logf("%s: %d claims, %d bytes on disk, %.1f bytes per key (KV key %d B, value %d B, headers %d B: %s)",
				tc.name, n, info.State.Bytes, float64(info.State.Bytes)/float64(n), len(k), len(m.Data),
				headerLen(m.Header), strings.Join(headerNames(m.Header), ","))
			// The file store caches recently written blocks for a while: read the heap at once, and its lowest
			// over the next 20 s (a measurement window, not a wait for a condition).
			first := liveHeap() - heap0
			low := first
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for range 20 {
				<-tick.C
				low = min(low, liveHeap()-heap0)
			}
			t.Logf("%s: server heap per key: %.0f B right after the fill, %.0f B settled (lowest over 20 s)",
				tc.name, float64(first)/float64(n), float64(low)/float64(n))
		})
	}
}

func headerLen(h map[string][]string) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

func headerNames(h map[string][]string) []string {
	var out []string
	for k := range h {
		out = append(out, k)
	}
	return out
}

func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
