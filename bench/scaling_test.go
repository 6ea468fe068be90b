package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestScalingFlags(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseOptions(nil, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.scaling.vals) > 0 || len(o.variants()) > 0 || !slices.Equal(o.contenders, allContenders) || !slices.Equal(o.modes, []string{"drain", "live"}) {
		t.Fatalf("no flags: scaling %v, contenders %v, modes %v", o.scaling.vals, o.contenders, o.modes)
	}
	for _, c := range []struct {
		args       []string
		variants   []string
		replicas   []int
		shards     []int
		contenders []string
		modes      []string
		rssCheck   bool
	}{
		{[]string{"-scaling", "1,2,4"}, []string{"worker-x1", "worker-x2", "worker-x4"}, []int{1, 2, 4}, []int{1, 1, 1}, nil, []string{"drain"}, false},
		{[]string{"-scaling", " 4, 1 ,2", "-shards", "4"}, []string{"worker-x4", "worker-x1", "worker-x2"}, []int{4, 1, 2}, []int{4, 4, 4}, nil, []string{"drain"}, false},
		{[]string{"-scaling", "1,2", "-contenders", "floor,worker", "-rss-check"}, []string{"worker-x1", "worker-x2"}, []int{1, 2}, []int{1, 1},
			[]string{cFloor, cWorker}, []string{"drain"}, true},
		{[]string{"-scaling", "2", "-modes", "live"}, []string{"worker-x2"}, []int{2}, []int{1}, nil, []string{"live", "drain"}, false},
		{[]string{"-scaling-shards", "1,4"}, []string{"worker-x1-k1", "worker-x1-k4"}, []int{1, 1}, []int{1, 4}, nil, []string{"drain"}, false},
		{[]string{"-scaling", "1,2", "-scaling-shards", "4,1", "-quick"}, []string{"worker-x1-k4", "worker-x1-k1", "worker-x2-k4", "worker-x2-k1"},
			[]int{1, 1, 2, 2}, []int{4, 1, 4, 1}, nil, []string{"drain"}, false},
	} {
		stderr.Reset()
		o, err := parseOptions(c.args, &stderr)
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, stderr.String())
		}
		var labels []string
		var reps, shards []int
		for _, v := range o.variants() {
			labels, reps, shards = append(labels, v.label), append(reps, v.replicas), append(shards, v.shards)
		}
		if !slices.Equal(labels, c.variants) || !slices.Equal(reps, c.replicas) || !slices.Equal(shards, c.shards) {
			t.Errorf("%v: variants %v, replicas %v, shards %v; want %v, %v, %v", c.args, labels, reps, shards, c.variants, c.replicas, c.shards)
		}
		if !slices.Equal(o.contenders, c.contenders) || !slices.Equal(o.modes, c.modes) || o.rssCheck != c.rssCheck {
			t.Errorf("%v: contenders %v, modes %v, rss check %v; want %v, %v, %v", c.args, o.contenders, o.modes, o.rssCheck, c.contenders, c.modes, c.rssCheck)
		}
		if line := o.scaleOptions.reportLine(); !strings.Contains(line, "\nscaling run: worker drain of "+c.variants[0]+" (") {
			t.Errorf("%v: report line %q", c.args, line)
		}
	}
	for _, bad := range [][]string{
		{"-scaling", ""}, {"-scaling", "0"}, {"-scaling", "1,1"}, {"-scaling", "1,,2"}, {"-scaling", "two"}, {"-scaling", "17"},
		{"-scaling-shards", "65"}, {"-scaling-shards", "4,4"}, {"-scaling-shards", "0"},
	} {
		stderr.Reset()
		if _, err := parseOptions(bad, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("%v: err %v, want a usage error", bad, err)
		}
		if !strings.Contains(stderr.String(), bad[0]) {
			t.Errorf("%v: the message should name the flag:\n%s", bad, stderr.String())
		}
	}
}

func TestScaleKinds(t *testing.T) {
	for _, c := range []struct {
		kind             string
		replicas, shards int
	}{
		{"worker-x1", 1, 0}, {"worker-x4", 4, 0}, {"worker-x16-k64", 16, 64}, {"worker-x2-k1", 2, 1},
	} {
		v, ok := parseScaleKind(c.kind)
		if !ok || v.replicas != c.replicas || v.shards != c.shards || v.label != c.kind {
			t.Errorf("%s: %+v %v", c.kind, v, ok)
		}
		if scaleKind(c.replicas, c.shards) != c.kind {
			t.Errorf("scaleKind(%d, %d) = %s", c.replicas, c.shards, scaleKind(c.replicas, c.shards))
		}
		if contenderClass(c.kind) != cWorker {
			t.Errorf("%s: class %s", c.kind, contenderClass(c.kind))
		}
	}
	for _, bad := range []string{"worker", "worker2", "worker-x", "worker-x0", "worker-x01", "worker-xa", "worker-x2-k", "worker-x2-k0", "worker-x2-k04", "floor"} {
		if v, ok := parseScaleKind(bad); ok {
			t.Errorf("%s parsed as %+v", bad, v)
		}
	}
	for kind, class := range map[string]string{cWorker: cWorker, cWorker2: cWorker, cFloor: cFloor, cNaive: cNaive, cNative: cNative} {
		if contenderClass(kind) != class {
			t.Errorf("%s: class %s, want %s", kind, contenderClass(kind), class)
		}
	}
	b := &bench{opts: options{scaleOptions: scaleOptions{shards: 4}, maxInFlight: 512}, workerBin: "/bin/w"}
	for kind, want := range map[string][2]int{cWorker: {1, 4}, cWorker2: {2, 4}, "worker-x4": {4, 4}, "worker-x2-k1": {2, 1}, cFloor: {0, 4}} {
		v := b.variant(kind)
		if v.replicas != want[0] || v.shards != want[1] {
			t.Errorf("%s: %d replicas, %d shards; want %v", kind, v.replicas, v.shards, want)
		}
		if want[0] == 0 {
			continue
		}
		spec := b.workerSpec(kind)
		if spec.replicas != want[0] || spec.shards != want[1] || spec.bin != "/bin/w" || spec.maxInFlight != 512 {
			t.Errorf("%s: spec %+v", kind, spec)
		}
	}
}

func TestRoundOrder(t *testing.T) {
	vs := []int{1, 2, 4}
	want := [][]int{{1, 2, 4}, {2, 4, 1}, {4, 1, 2}, {1, 2, 4}}
	first := map[int]int{}
	for r, w := range want {
		got := roundOrder(vs, r)
		if !slices.Equal(got, w) {
			t.Errorf("round %d: %v, want %v", r, got, w)
		}
		if r < 3 {
			first[got[0]]++
		}
	}
	for _, v := range vs {
		if first[v] != 1 {
			t.Errorf("over 3 rounds %d went first %d times", v, first[v])
		}
	}
}

// TestSteadyRate: the rate from the first ack is unknown (0) when there is no first ack or it leaves less than three
// quarters of the run after it; medianOf is the lower middle of an even count.
func TestSteadyRate(t *testing.T) {
	if got := medianOf([]float64{3, 1, 2, 4}); got != 2 {
		t.Errorf("medianOf: %v", got)
	}
	for _, r := range []*Result{{Envelopes: 10, Seconds: 1}, {Envelopes: 10, Seconds: 1, FirstAck: 2}, {Envelopes: 10, Seconds: 0.06, FirstAck: 0.06},
		{Envelopes: 10, Seconds: 1, FirstAck: 0.26}} {
		if got := steadyRate(r); got != 0 {
			t.Errorf("steadyRate(%+v) = %v, want 0 (unknown)", r, got)
		}
	}
	if got := steadyRate(&Result{Envelopes: 100, Seconds: 1.2, FirstAck: 0.2}); got != 100 {
		t.Errorf("steadyRate: %v, want 100", got)
	}
}
