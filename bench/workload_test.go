package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"math"
	"testing"
)

func testCorpus(t *testing.T) *Corpus {
	t.Helper()
	if dir := FindCorpus(""); dir != "" {
		c, err := LoadCorpus(dir)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Log("shared corpus not found (../shared/corpus/github): using the generated corpus")
	return GeneratedCorpus(7, 64)
}

// digest hashes everything an envelope consists of.
func digest(w *Workload) [32]byte {
	h := sha256.New()
	for i := range w.Envelopes {
		m := w.Msg(i)
		h.Write([]byte(m.Subject))
		hb, _ := json.Marshal(m.Header)
		h.Write(hb)
		h.Write(m.Data)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

func TestWorkloadDeterministic(t *testing.T) {
	c := testCorpus(t)
	a := NewWorkload(WorkloadConfig{N: 5000, Seed: 42}, c)
	b := NewWorkload(WorkloadConfig{N: 5000, Seed: 42}, c)
	if digest(a) != digest(b) {
		t.Fatal("same seed, different workloads")
	}
	d := NewWorkload(WorkloadConfig{N: 5000, Seed: 43}, c)
	if digest(a) == digest(d) {
		t.Fatal("different seeds, same workload")
	}
	g1, g2 := GeneratedCorpus(9, 16), GeneratedCorpus(9, 16)
	for i := range g1.Bodies {
		if !bytes.Equal(g1.Bodies[i], g2.Bodies[i]) {
			t.Fatalf("generated corpus body %d differs between two calls with one seed", i)
		}
	}
}

func TestWorkloadMix(t *testing.T) {
	const n = 40_000
	w := NewWorkload(WorkloadConfig{N: n, Seed: 1}, testCorpus(t))
	if len(w.Envelopes) != n {
		t.Fatalf("%d envelopes, want %d", len(w.Envelopes), n)
	}
	st := w.Stats()
	for _, s := range sourceMix {
		got := float64(st.BySource[s.id]) / n
		if math.Abs(got-s.share) > 0.02 {
			t.Errorf("source %s: %.3f of envelopes, want %.2f ± 0.02", s.id, got, s.share)
		}
	}
	if got := float64(st.Duplicates) / n; math.Abs(got-dupShare) > 0.005 {
		t.Errorf("duplicates: %.3f of envelopes, want %.2f", got, dupShare)
	}
	tenants := map[string]int{}
	for _, env := range w.Envelopes {
		tenants[w.Events[env.Event].Tenant]++
	}
	if len(tenants) != numTenants {
		t.Errorf("%d tenants, want %d", len(tenants), numTenants)
	}
	// Duplicates come adjacent, near and far: measure the distance to the previous delivery of the same event.
	last := map[int]int{}
	var adjacent, far int
	for i, env := range w.Envelopes {
		if p, ok := last[env.Event]; ok {
			switch d := i - p; {
			case d <= 4:
				adjacent++
			case d >= 900:
				far++
			}
		}
		last[env.Event] = i
	}
	if float64(adjacent) < 0.3*float64(st.Duplicates) || float64(far) < 0.1*float64(st.Duplicates) {
		t.Errorf("duplicate distances: %d adjacent, %d far of %d duplicates", adjacent, far, st.Duplicates)
	}
	for i := range w.Envelopes {
		if len(w.Body(i)) < 1000 || len(w.Body(i)) > 34*1024 {
			t.Fatalf("envelope %d: body of %d bytes, want realistic webhook sizes", i, len(w.Body(i)))
		}
	}
}

// The expected unique count is checked against an independent count: the keys as the worker would see them
// (header value, JSON field value, digest of the whole body), taken from the built messages.
func TestWorkloadExpectedUnique(t *testing.T) {
	w := NewWorkload(WorkloadConfig{N: 20_000, Seed: 3}, testCorpus(t))
	seen := map[string]bool{}
	unkeyed := 0
	for i := range w.Envelopes {
		m := w.Msg(i)
		e := w.Events[w.Envelopes[i].Event]
		var key string
		switch e.Source {
		case srcHeader:
			key = m.Header.Get("X-GitHub-Delivery")
		case srcJSON:
			var doc struct {
				Data struct {
					Order struct {
						ID string `json:"id"`
					} `json:"order"`
				} `json:"data"`
			}
			if err := json.Unmarshal(m.Data, &doc); err != nil || doc.Data.Order.ID == "" {
				t.Fatalf("envelope %d: orders body without data.order.id: %v", i, err)
			}
			key = doc.Data.Order.ID
		case srcPayload:
			if !json.Valid(m.Data) {
				t.Fatalf("envelope %d: forms body is not JSON", i)
			}
			sum := sha256.Sum256(m.Data)
			key = string(sum[:])
		case srcNone:
			unkeyed++
			continue
		}
		if key == "" {
			t.Fatalf("envelope %d (%s): no key", i, e.Source)
		}
		seen[e.Tenant+"/"+e.Source+"/"+key] = true
	}
	if want := len(seen) + unkeyed; w.Expected() != want {
		t.Fatalf("Expected() = %d, independent count %d", w.Expected(), want)
	}
	if w.Unkeyed() != unkeyed || w.KeyedUnique() != len(seen) {
		t.Fatalf("Unkeyed %d KeyedUnique %d, want %d and %d", w.Unkeyed(), w.KeyedUnique(), unkeyed, len(seen))
	}
	// A prefix keeps its own count.
	p := w.Prefix(5000)
	if len(p.Envelopes) != 5000 || p.Expected() >= w.Expected() || p.Expected() < 3000 {
		t.Fatalf("prefix: %d envelopes, %d expected", len(p.Envelopes), p.Expected())
	}
	// Keys that floor writes are distinct exactly when the events are.
	kv := map[string]bool{}
	for i := range w.Envelopes {
		if k := w.KVKey(i); k != "" {
			kv[k] = true
		}
	}
	if len(kv) != w.KeyedUnique() {
		t.Fatalf("%d distinct KV keys, %d keyed events", len(kv), w.KeyedUnique())
	}
}

func TestWorkloadDuplicateBodies(t *testing.T) {
	w := NewWorkload(WorkloadConfig{N: 4000, Seed: 5}, testCorpus(t))
	first := map[int]int{}
	for i, env := range w.Envelopes {
		p, ok := first[env.Event]
		if !ok {
			first[env.Event] = i
			if env.Attempt != 1 {
				t.Fatalf("envelope %d: first delivery with attempt %d", i, env.Attempt)
			}
			continue
		}
		e := w.Events[env.Event]
		same := bytes.Equal(w.Body(i), w.Body(p))
		if (e.Source == srcJSON) == same {
			t.Fatalf("envelope %d (%s): retry body identical=%v", i, e.Source, same)
		}
	}
}
