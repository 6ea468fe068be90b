package kvwindow_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// BenchmarkClaimParallel measures fresh claims (the Won path) from many goroutines against a real, file-backed
// server.
func BenchmarkClaimParallel(b *testing.B) {
	for _, mode := range []struct{ name string }{{"won"}} {
		b.Run(mode.name, func(b *testing.B) {
			s := natstest.Run(b)
			w := newWindow(b, jsFor(b, s.URL()), kvwindow.DefaultConfig())
			ctx := ctxT(b, 10*time.Minute)
			var n atomic.Uint64
			b.SetParallelism(100) // hundreds of claims in flight, as in the pipeline
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					out, err := w.Claim(ctx, kvwindow.Claim{Tenant: "bench", Source: "s", Key: "evt-" + strconv.FormatUint(i, 10), TTL: time.Minute, Claimant: envelope(i), Delivery: delivery(1)})
					if err != nil || out.Status != kvwindow.Won {
						b.Errorf("claim %d: %+v %v", i, out, err)
						return
					}
				}
			})
		})
	}
}
