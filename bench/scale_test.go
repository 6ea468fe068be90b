package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

func TestPlanScale(t *testing.T) {
	w := planScale(100_000, 30_000, 100, 0.05, 1)
	if len(w.chunks) != 4 || len(w.chunks[3].events) != 10_000 {
		t.Fatalf("%d chunks (last %d envelopes), want 3 of 30000 and one of 10000", len(w.chunks), len(w.chunks[len(w.chunks)-1].events))
	}
	again := planScale(100_000, 30_000, 100, 0.05, 1)
	unique, first := 0, 0
	for i, c := range w.chunks {
		seen := map[int32]bool{}
		for j, e := range c.events {
			if again.chunks[i].events[j] != e {
				t.Fatalf("chunk %d envelope %d differs between two plans of one seed", i, j)
			}
			if int(e) < first || int(e) >= first+c.unique {
				t.Fatalf("chunk %d delivers event %d, outside its own events [%d, %d)", i, e, first, first+c.unique)
			}
			seen[e] = true
		}
		if len(seen) != c.unique {
			t.Errorf("chunk %d: %d distinct events, unique says %d", i, len(seen), c.unique)
		}
		first += c.unique
		unique += c.unique
	}
	if retries := 100_000 - unique; retries < 4_500 || retries > 5_500 {
		t.Errorf("%d retries in 100000 envelopes, want about 5%%", retries)
	}
	if w.events != unique || w.tenant(w.events-1) != scSparseTenant || w.tenant(w.sparse-1) == scSparseTenant ||
		w.tenant(w.events) == scSparseTenant {
		t.Errorf("sparse tenant: events %d, sparse from %d", w.events, w.sparse)
	}
	spread, first := 0, 0
	for _, c := range w.chunks {
		if w.tenant(first) != scSpreadTenant || w.tenant(first+1) == scSpreadTenant {
			t.Errorf("chunk from event %d: its first event is not the spread tenant's alone", first)
		}
		first += c.unique
	}
	for e := range w.events {
		if w.tenant(e) == scSpreadTenant {
			spread++
		}
	}
	if spread != len(w.chunks) {
		t.Errorf("%d events of the spread tenant, want one per chunk", spread)
	}
	for _, e := range []int{0, 7, w.sparse, w.events + 3} {
		m := w.msg(e)
		if len(m.Data) != 100 {
			t.Errorf("event %d: body of %d bytes, want 100", e, len(m.Data))
		}
		want, err := kvwindow.KVKey(w.tenant(e), scSource, m.Header.Get("X-GitHub-Delivery"))
		if err != nil || w.kvKey(e) != want {
			t.Errorf("event %d: kv key %q, kvwindow says %q (%v)", e, w.kvKey(e), want, err)
		}
		if m.Subject != "ingest."+w.tenant(e)+".gh" {
			t.Errorf("event %d: subject %q", e, m.Subject)
		}
	}
	if scDeliveryID(1) == scDeliveryID(2) || len(scDeliveryID(123_456_789)) != 36 {
		t.Errorf("delivery ids: %q %q %q", scDeliveryID(1), scDeliveryID(2), scDeliveryID(123_456_789))
	}
}

func TestHistogramQuantile(t *testing.T) {
	const text = `# TYPE dedupeworker_claim_duration_seconds histogram
dedupeworker_claim_duration_seconds_bucket{le="0.001"} 10
dedupeworker_claim_duration_seconds_bucket{le="0.002"} 60
dedupeworker_claim_duration_seconds_bucket{le="0.004"} 99
dedupeworker_claim_duration_seconds_bucket{le="+Inf"} 100
dedupeworker_claim_duration_seconds_sum 0.2
dedupeworker_claim_duration_seconds_count 100
dedupeworker_publish_duration_seconds_bucket{le="0.001"} 5
`
	before := `dedupeworker_claim_duration_seconds_bucket{le="0.001"} 10
dedupeworker_claim_duration_seconds_bucket{le="0.002"} 10
dedupeworker_claim_duration_seconds_bucket{le="0.004"} 10
dedupeworker_claim_duration_seconds_bucket{le="+Inf"} 10
`
	h := parseHistogram(text, claimHistogram)
	d := h.since(parseHistogram(before, claimHistogram))
	for _, c := range []struct {
		name string
		h    histogram
		q    float64
		want time.Duration
	}{
		{"median", h, 0.5, 1800 * time.Microsecond}, // rank 50 in (1ms, 2ms]: 40 of its 50
		{"p99", h, 0.99, 4 * time.Millisecond},      // rank 99: the top of (2ms, 4ms]
		{"first bucket", h, 0.05, 500 * time.Microsecond},
		{"in +Inf", h, 1, 4 * time.Millisecond},            // the highest finite bound
		{"since: median", d, 0.5, 1900 * time.Microsecond}, // 90 observations: rank 45 in (1ms, 2ms]: 45 of 50
		{"empty", parseHistogram("", claimHistogram), 0.5, 0},
	} {
		if got := c.h.quantile(c.q); (got - c.want).Abs() > time.Microsecond {
			t.Errorf("%s: q%.2f = %s, want %s", c.name, c.q, got, c.want)
		}
	}
}

func TestParseScaleOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" = accepted
	}{
		{nil, ""},
		{[]string{"-n", "200000", "-shards", "4", "-server-gomemlimit", "1GiB"}, ""},
		{[]string{"-n", "0"}, "-n and -chunk must be positive"},
		{[]string{"-shards", "65"}, "-shards must be between 1 and 64"},
		{[]string{"-retries", "1"}, "-retries must be in [0, 1)"},
		{[]string{"-body", "10"}, "-body must be at least 64"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		o, err := parseScaleOptions(c.args, io.Discard)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		case c.want == "" && c.args == nil && (o.n != 5_000_000 || o.chunk != 500_000 || o.shards != 1 || o.bodySize != 100 || o.retryRate != 0.05):
			t.Errorf("defaults: %+v", o)
		}
	}
}

func TestScState(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"not connected to NATS (RECONNECTING for 0s): …", "not connected to NATS (RECONNECTING for 100ms): …"},
		{"recovering: bucket dedupe-window-02 not answering yet, 1.3s after", "recovering: bucket dedupe-window-17 not answering yet, 12s after"},
	} {
		if scState(tc.a) != scState(tc.b) {
			t.Errorf("scState(%q) = %q, scState(%q) = %q: want one state", tc.a, scState(tc.a), tc.b, scState(tc.b))
		}
	}
	if scState("not connected") == scState("dedupe window recovering") {
		t.Error("two states made one")
	}
	if got := scShortReason(strings.Repeat("x", 200)); len([]rune(got)) != 121 {
		t.Errorf("scShortReason: %d runes", len([]rune(got)))
	}
}
