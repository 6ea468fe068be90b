package pipeline_test

import (
	"strconv"
	"testing"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// BenchmarkHolders is the in-memory bookkeeping of every claim a worker wins: begin, then finish as published,
// over more keys than the finished holdings remembered, so that the ring evicts as in a long drain.
func BenchmarkHolders(b *testing.B) {
	h := pipeline.NewHolders()
	keys := make([]string, 1<<14)
	for i := range keys {
		keys[i] = "acme\x00gh\x00delivery-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	var seq uint64
	for b.Loop() {
		seq++
		h.Hold(keys[seq%uint64(len(keys))], seq)
	}
}
