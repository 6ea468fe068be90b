package main

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/google/pprof/profile"
)

func TestFloorProfilePaths(t *testing.T) {
	for _, tc := range []struct{ path, cpu, allocs string }{
		{"/tmp/fp/w.cpu", "/tmp/fp/w.cpu.floor", "/tmp/fp/w.cpu.floor.allocs"},
		{"worker.cpu", "worker.cpu.floor", "worker.cpu.floor.allocs"},
	} {
		cpu, allocs := floorProfilePaths(tc.path)
		if cpu != tc.cpu || allocs != tc.allocs {
			t.Errorf("floorProfilePaths(%q) = %q, %q; want %q, %q", tc.path, cpu, allocs, tc.cpu, tc.allocs)
		}
	}
}

// deltaBlob fills a size class (4 KiB) exactly, so its samples' size label is its size; only the functions
// below allocate it, so their stacks are the test's alone.
type deltaBlob [4096]byte

//go:noinline
func allocBeforeBaseline(n int) []*deltaBlob { return allocBlobs(n) }

//go:noinline
func allocDuringDrain(n int) []*deltaBlob { return allocBlobs(n) }

//go:noinline
func allocBlobs(n int) []*deltaBlob {
	out := make([]*deltaBlob, n)
	for i := range out {
		out[i] = new(deltaBlob)
	}
	return out
}

// TestWriteAllocDelta takes two real allocation profiles of the test process, as the floor's baseline and end:
// the delta written has what was allocated between them, with its stack, and nothing of what came before.
func TestWriteAllocDelta(t *testing.T) {
	// Every allocation sampled, so the counts are exact rather than estimates; both profiles are written at
	// this rate, so the scaling of what the process allocated at the old one cancels out in the delta.
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	t.Cleanup(func() { runtime.MemProfileRate = old })

	const nBefore, nDuring = 300, 1000
	kept := allocBeforeBaseline(nBefore)
	before, err := allocsSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	during := allocDuringDrain(nDuring)
	after, err := allocsSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(kept) // live at both: no change in any value, so not in the delta at all
	runtime.KeepAlive(during)

	out := filepath.Join(t.TempDir(), "w.cpu.floor.allocs")
	if err := writeAllocDelta(out, before, after); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f) // what go tool pprof reads it with
	if err != nil {
		t.Fatalf("parse %s: %v", out, err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	if p.DefaultSampleType != "alloc_space" {
		t.Errorf("default sample type %q, want alloc_space", p.DefaultSampleType)
	}
	idx := map[string]int{}
	for i, st := range p.SampleType {
		idx[st.Type] = i
	}
	for _, typ := range []string{"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"} {
		if _, ok := idx[typ]; !ok {
			t.Fatalf("no %s in sample types %v", typ, p.SampleType)
		}
	}

	// runtime/pprof labels each sample with its objects' size: the blobs' samples are those of deltaBlob's size
	// on the allocating function's stack (its slice of pointers, and whatever the runtime allocates on the
	// way, are samples of other sizes).
	type sum struct{ samples, objects, bytes int64 }
	sums := map[string]*sum{funcName(allocBeforeBaseline): {}, funcName(allocDuringDrain): {}}
	for _, s := range p.Sample {
		if !slices.ContainsFunc(s.Value, func(v int64) bool { return v != 0 }) {
			t.Errorf("sample with every value zero: %v", s.Value)
		}
		for name, c := range sums {
			if onStack(s, name) && slices.Equal(s.NumLabel["bytes"], []int64{int64(unsafe.Sizeof(deltaBlob{}))}) {
				c.samples++
				c.objects += s.Value[idx["alloc_objects"]]
				c.bytes += s.Value[idx["alloc_space"]]
			}
		}
	}
	for _, tc := range []struct {
		name             string
		samples, objects int64
	}{
		{funcName(allocBeforeBaseline), 0, 0},
		{funcName(allocDuringDrain), 1, nDuring},
	} {
		c, bytes := sums[tc.name], tc.objects*int64(unsafe.Sizeof(deltaBlob{}))
		if c.samples != tc.samples || c.objects != tc.objects || c.bytes != bytes {
			t.Errorf("%s: %d samples, %d objects, %d bytes in the delta; want %d, %d, %d",
				tc.name, c.samples, c.objects, c.bytes, tc.samples, tc.objects, bytes)
		}
	}
}

// funcName is fn's name as the profile has it: its package's import path, not "main".
func funcName(fn func(int) []*deltaBlob) string {
	return runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
}

// onStack tells whether fn is one of s's frames, inlined ones included.
func onStack(s *profile.Sample, fn string) bool {
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil && ln.Function.Name == fn {
				return true
			}
		}
	}
	return false
}
