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
					out, err := w.Claim(ctx, kvwindow.Claim{Tenant: "bench", Source: "s", Key: "evt-" + strconv.FormatUint(i, 10), TTL: time.Minute, Claimant: envelope(i), Delivery: delivery(1)}, kvwindow.Known{})
					if err != nil || out.Status != kvwindow.Won {
						b.Errorf("claim %d: %+v %v", i, out, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkClaimAndMark measures what the worker writes for a unique event from many goroutines against a real,
// file-backed server: a fresh claim (Won), then the publish recorded in it (MarkPublished at its revision).
func BenchmarkClaimAndMark(b *testing.B) {
	s := natstest.Run(b)
	w := newWindow(b, jsFor(b, s.URL()), kvwindow.DefaultConfig())
	ctx := ctxT(b, 10*time.Minute)
	var n atomic.Uint64
	b.SetParallelism(100)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			c := kvwindow.Claim{Tenant: "bench", Source: "s", Key: "evt-" + strconv.FormatUint(i, 10), TTL: time.Minute,
				Claimant: envelope(i), Delivery: delivery(1)}
			out, err := w.Claim(ctx, c, kvwindow.Known{})
			if err != nil || out.Status != kvwindow.Won {
				b.Errorf("claim %d: %+v %v", i, out, err)
				return
			}
			if _, ok, err := w.MarkPublished(ctx, c, out.Revision, out.FirstClaimed); err != nil || !ok {
				b.Errorf("mark %d: %v %v", i, ok, err)
				return
			}
		}
	})
}

// BenchmarkClaimDuplicate measures copies of events already claimed (the Duplicate path: a losing create, then a
// read of the key) from many goroutines against a real, file-backed server: "leader" reads through the stream
// leader's API (a redelivered copy), "direct" by direct get (a first delivery).
func BenchmarkClaimDuplicate(b *testing.B) {
	for _, mode := range []struct {
		name  string
		first bool
	}{{"leader", false}, {"direct", true}} {
		b.Run(mode.name, func(b *testing.B) {
			s := natstest.Run(b)
			w := newWindow(b, jsFor(b, s.URL()), kvwindow.DefaultConfig())
			ctx := ctxT(b, 10*time.Minute)
			const keys = 1024
			for i := range uint64(keys) {
				c := kvwindow.Claim{Tenant: "bench", Source: "s", Key: "evt-" + strconv.FormatUint(i, 10), TTL: time.Minute, Claimant: envelope(i + 1), Delivery: delivery(1)}
				if out, err := w.Claim(ctx, c, kvwindow.Known{}); err != nil || out.Status != kvwindow.Won {
					b.Fatalf("claim %d: %+v %v", i, out, err)
				}
			}
			var n atomic.Uint64
			b.SetParallelism(100)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1) % keys
					c := kvwindow.Claim{Tenant: "bench", Source: "s", Key: "evt-" + strconv.FormatUint(i, 10), TTL: time.Minute,
						Claimant: envelope(keys + 1 + i), Delivery: deliveryOf(mode.first)}
					out, err := w.Claim(ctx, c, kvwindow.Known{})
					if err != nil || out.Status != kvwindow.Duplicate {
						b.Errorf("copy of %d: %+v %v", i, out, err)
						return
					}
				}
			})
		})
	}
}

// deliveryOf is a first delivery (read from any replica) or a redelivery (read from the leader).
func deliveryOf(first bool) kvwindow.Delivery {
	if first {
		return delivery(1)
	}
	return delivery(2)
}
