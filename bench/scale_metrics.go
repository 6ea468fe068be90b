package main

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// histogram is one cumulative Prometheus histogram read from a /metrics text: the count at or below each upper
// bound, in bound order (+Inf last).
type histogram struct {
	bounds []float64
	counts []float64
}

// parseHistogram reads the buckets of the histogram name from a Prometheus text exposition (without labels other
// than le). A missing histogram is an empty one.
func parseHistogram(text, name string) histogram {
	type bucket struct{ le, n float64 }
	var bs []bucket
	prefix := name + `_bucket{le="`
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		le, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		bound, err1 := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		n, err2 := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err1 == nil && err2 == nil {
			bs = append(bs, bucket{bound, n})
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	var h histogram
	for _, b := range bs {
		h.bounds = append(h.bounds, b.le)
		h.counts = append(h.counts, b.n)
	}
	return h
}

// since is the histogram of the observations made after before was read (same buckets).
func (h histogram) since(before histogram) histogram {
	out := histogram{bounds: h.bounds, counts: make([]float64, len(h.counts))}
	for i := range h.counts {
		out.counts[i] = h.counts[i]
		if i < len(before.counts) {
			out.counts[i] -= before.counts[i]
		}
	}
	return out
}

func (h histogram) total() float64 {
	if len(h.counts) == 0 {
		return 0
	}
	return h.counts[len(h.counts)-1]
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile does: linear within the bucket the rank
// falls in (from 0 for the first bucket); a rank in the +Inf bucket gives the highest finite bound. 0 when empty.
func (h histogram) quantile(q float64) time.Duration {
	total := h.total()
	if total == 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for i, b := range h.bounds {
		if h.counts[i] >= rank {
			if math.IsInf(b, 1) {
				return time.Duration(lower * float64(time.Second))
			}
			in := h.counts[i] - below
			frac := 1.0
			if in > 0 {
				frac = (rank - below) / in
			}
			return time.Duration((lower + (b-lower)*frac) * float64(time.Second))
		}
		lower, below = b, h.counts[i]
	}
	return time.Duration(lower * float64(time.Second))
}
