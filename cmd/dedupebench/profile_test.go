package main

import (
	"slices"
	"testing"
	"time"
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

func TestAllocDelta(t *testing.T) {
	a, b, c := memStack{1, 2}, memStack{3}, memStack{4, 5, 6}
	before := map[memStack]memCounts{a: {10, 1000}, b: {5, 500}}
	after := map[memStack]memCounts{
		a: {12, 1200}, // 2 more
		b: {5, 500},   // nothing since the baseline: dropped
		c: {1, 4096},  // new
	}
	for _, tc := range []struct {
		name string
		rate int64
		want []allocSample
	}{
		{"unsampled", 1, []allocSample{{[]uintptr{4, 5, 6}, 1, 4096}, {[]uintptr{1, 2}, 2, 200}}},
		// rate 512: 100-byte objects are sampled with probability 1-e^(-100/512), 4096-byte ones almost always.
		{"sampled", 512, []allocSample{{[]uintptr{4, 5, 6}, 1, 4097}, {[]uintptr{1, 2}, 11, 1127}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := allocDelta(before, after, tc.rate)
			eq := func(x, y allocSample) bool {
				return slices.Equal(x.stack, y.stack) && x.objects == y.objects && x.bytes == y.bytes
			}
			if !slices.EqualFunc(got, tc.want, eq) {
				t.Fatalf("allocDelta = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEncodeAllocProfile walks the top level of the encoded profile: two sample types, a sample per stack,
// a mapping, a location per address below the allocator's frames, a function per name, and a string table opening with "".
func TestEncodeAllocProfile(t *testing.T) {
	names := map[uintptr]string{1: "runtime.makeslice", 2: "main.handle", 3: "main.loop", 4: "main.loop"}
	sym := func(pc uintptr) []frame { return []frame{{names[pc], "x.go", int(pc)}} }
	samples := []allocSample{{[]uintptr{1, 2, 3}, 4, 400}, {[]uintptr{4, 3}, 1, 64}}
	data := encodeAllocProfile(samples, 512, time.Unix(1, 0), time.Second, "dedupebench", sym)
	fields := map[uint64]int{}
	var strs []string
	for len(data) > 0 {
		key, n := uvarint(t, data)
		data = data[n:]
		field, wire := key>>3, key&7
		fields[field]++
		switch wire {
		case 0:
			_, n = uvarint(t, data)
			data = data[n:]
		case 2:
			l, n := uvarint(t, data)
			if field == 6 {
				strs = append(strs, string(data[n:n+int(l)]))
			}
			data = data[n+int(l):]
		default:
			t.Fatalf("field %d: wire type %d", field, wire)
		}
	}
	// Locations: 2, 3, 4 (1 is the allocator's); functions: main.handle, main.loop.
	want := map[uint64]int{1: 2, 2: 2, 3: 1, 4: 3, 5: 2, 6: len(strs), 9: 1, 10: 1, 11: 1, 12: 1, 14: 1}
	for f, n := range want {
		if fields[f] != n {
			t.Errorf("field %d: %d times, want %d", f, fields[f], n)
		}
	}
	if len(strs) == 0 || strs[0] != "" || !slices.Contains(strs, "main.loop") || slices.Contains(strs, "runtime.makeslice") {
		t.Errorf("string table %q", strs)
	}
}

func uvarint(t *testing.T, b []byte) (uint64, int) {
	t.Helper()
	var x uint64
	for i, c := range b {
		if i == 10 {
			break
		}
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, i + 1
		}
	}
	t.Fatalf("bad varint % x", b[:min(len(b), 10)])
	return 0, 0
}
