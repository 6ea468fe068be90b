package main

import (
	"cmp"
	"compress/gzip"
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"
)

// floorLabel marks the floor's goroutines in its CPU profile: the bench process also runs the drain's progress
// polls, the CPU samplers and, from earlier runs, the settled-heap readers, and those stay unlabelled.
const floorLabel = "contender"

// floorProfilePaths names the floor's profiles after the worker's (-cpuprofile PATH, PATH.allocs).
func floorProfilePaths(path string) (cpu, allocs string) {
	return path + ".floor", path + ".floor.allocs"
}

// clientProfile is the bench process's own CPU profile, and a baseline of its allocation profile, taken while
// an in-process contender drains.
type clientProfile struct {
	cpuPath, allocsPath string
	secs                time.Duration
	f                   *os.File
	before              map[memStack]memCounts
	start               time.Time
	timer               *time.Timer
	once                sync.Once
	ran                 time.Duration // how long the CPU profile ran, once stopped
	cpuErr              error
}

// startFloorProfile starts the bench's CPU profile for the first floor drain, or notes why it cannot (nil).
// The GC before the baseline runs here, ahead of the drain's clock.
func (b *bench) startFloorProfile() *clientProfile {
	cpu, allocs := floorProfilePaths(b.opts.cpuprofile)
	if err := os.MkdirAll(filepath.Dir(cpu), 0o755); err != nil {
		b.note("cpuprofile: floor: %v", err)
		return nil
	}
	f, err := os.Create(cpu)
	if err != nil {
		b.note("cpuprofile: floor: %v", err)
		return nil
	}
	runtime.GC() // publishes every allocation so far to the heap profile: the baseline is the preload's end
	p := &clientProfile{cpuPath: cpu, allocsPath: allocs, secs: time.Duration(b.opts.profileSeconds) * time.Second,
		f: f, before: memProfile()}
	if err := pprof.StartCPUProfile(f); err != nil { // another profile runs: a go test -cpuprofile, say
		f.Close()
		os.Remove(cpu)
		b.note("cpuprofile: floor: %v", err)
		return nil
	}
	p.start = time.Now()
	p.timer = time.AfterFunc(p.secs, p.stopCPU)
	return p
}

// withFloorLabel runs start, labelling every goroutine it starts (the contender's, nats.go's read loop and
// flusher among them) when p profiles.
func (p *clientProfile) withFloorLabel(ctx context.Context, start func(context.Context)) {
	if p == nil {
		start(ctx)
		return
	}
	pprof.Do(ctx, pprof.Labels(floorLabel, cFloor), start)
}

// stopCPU ends the CPU profile at -profile-seconds or at the drain's end, whichever comes first.
func (p *clientProfile) stopCPU() {
	p.once.Do(func() {
		pprof.StopCPUProfile()
		p.ran = min(time.Since(p.start), p.secs)
		p.cpuErr = p.f.Close()
	})
}

// abort ends a profile whose drain failed.
func (p *clientProfile) abort() {
	if p != nil {
		p.timer.Stop()
		p.stopCPU()
	}
}

// finish ends the CPU profile if it still runs and writes the allocations since the baseline.
func (b *bench) finishFloorProfile(p *clientProfile) {
	p.abort()
	if p.cpuErr != nil {
		b.note("cpuprofile: floor: %v", p.cpuErr)
		return
	}
	runtime.GC()
	samples := allocDelta(p.before, memProfile(), int64(runtime.MemProfileRate))
	if err := writeAllocProfile(p.allocsPath, samples, int64(runtime.MemProfileRate), p.start, time.Since(p.start)); err != nil {
		b.note("cpuprofile: floor: allocs: %v", err)
		return
	}
	b.note("cpuprofile: floor: bench CPU profile of the first floor drain (%.1fs from the floor's start) in %s, "+
		"allocations from the floor's start to the drain's end in %s; the floor's goroutines carry %s=%s "+
		"(go tool pprof -tagfocus %s=%s)", p.ran.Seconds(), p.cpuPath, p.allocsPath, floorLabel, cFloor, floorLabel, cFloor)
}

// memStack is a heap profile record's stack, as the runtime keeps it.
type memStack [32]uintptr

type memCounts struct{ objects, bytes int64 }

// memProfile reads the heap profile's cumulative allocations by stack.
func memProfile() map[memStack]memCounts {
	n, _ := runtime.MemProfile(nil, true)
	var recs []runtime.MemProfileRecord
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			break
		}
	}
	m := make(map[memStack]memCounts, n)
	for _, r := range recs[:n] {
		c := m[r.Stack0]
		c.objects += r.AllocObjects
		c.bytes += r.AllocBytes
		m[r.Stack0] = c
	}
	return m
}

// allocSample is one stack's allocations in the delta, scaled for the sampling as runtime/pprof scales them.
type allocSample struct {
	stack          []uintptr
	objects, bytes int64
}

// allocDelta is what after allocated beyond before, largest first (ties by stack, so the order is fixed).
func allocDelta(before, after map[memStack]memCounts, rate int64) []allocSample {
	var out []allocSample
	for st, a := range after {
		c := memCounts{a.objects - before[st].objects, a.bytes - before[st].bytes}
		if c.objects <= 0 || c.bytes <= 0 {
			continue
		}
		objects, bytes := scaleHeapSample(c.objects, c.bytes, rate)
		n := 0
		for n < len(st) && st[n] != 0 {
			n++
		}
		out = append(out, allocSample{stack: slices.Clone(st[:n]), objects: objects, bytes: bytes})
	}
	slices.SortFunc(out, func(x, y allocSample) int {
		return cmp.Or(cmp.Compare(y.bytes, x.bytes), slices.Compare(x.stack, y.stack))
	})
	return out
}

// scaleHeapSample undoes the heap profile's sampling of one allocation in rate bytes (runtime/pprof's formula).
func scaleHeapSample(count, size, rate int64) (int64, int64) {
	if count == 0 || size == 0 || rate <= 1 {
		return count, size
	}
	scale := 1 / (1 - math.Exp(-float64(size)/float64(count)/float64(rate)))
	return int64(float64(count) * scale), int64(float64(size) * scale)
}

// writeAllocProfile writes samples as a gzipped profile.proto of alloc_objects and alloc_space, symbolized here:
// runtime/pprof has no way to write a delta, and the bench's binary is gone by the time anyone reads it.
func writeAllocProfile(out string, samples []allocSample, rate int64, start time.Time, d time.Duration) error {
	exe, _ := os.Executable()
	data := encodeAllocProfile(samples, rate, start, d, exe, symbolize)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	if _, err := zw.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// frame is one line of a location: a function (inlined ones first) at a line.
type frame struct {
	function, file string
	line           int
}

// symbolize names the frame of one of a heap profile's return addresses: the runtime records one address per
// inlined frame too, so each gives one frame (the loop is for the odd address that gives none or more).
func symbolize(pc uintptr) []frame {
	var out []frame
	frames := runtime.CallersFrames([]uintptr{pc})
	for {
		f, more := frames.Next()
		if f.Function != "" || f.File != "" {
			out = append(out, frame{f.Function, f.File, f.Line})
		}
		if !more {
			return out
		}
	}
}

// encodeAllocProfile encodes profile.proto (github.com/google/pprof/proto/profile.proto): the fields pprof
// needs for an allocation profile with its functions and lines, and one mapping, exe, that says they are there.
func encodeAllocProfile(samples []allocSample, rate int64, start time.Time, d time.Duration, exe string, symbolize func(uintptr) []frame) []byte {
	var p, msg pbuf
	syms := map[uintptr][]frame{}
	sym := func(pc uintptr) []frame {
		fr, ok := syms[pc]
		if !ok {
			fr = symbolize(pc)
			syms[pc] = fr
		}
		return fr
	}
	strs := map[string]int{"": 0}
	table := []string{""}
	str := func(s string) uint64 {
		i, ok := strs[s]
		if !ok {
			i = len(table)
			strs[s] = i
			table = append(table, s)
		}
		return uint64(i)
	}
	valueType := func(field int, typ, unit string) {
		msg = msg[:0]
		msg.uint(1, str(typ))
		msg.uint(2, str(unit))
		p.bytes(field, msg)
	}
	valueType(1, "alloc_objects", "count")
	valueType(1, "alloc_space", "bytes")
	msg = msg[:0]
	msg.uint(1, 1)
	msg.uint(3, math.MaxUint64)
	msg.uint(5, str(exe))
	for field := 7; field <= 10; field++ { // has_functions, has_filenames, has_line_numbers, has_inline_frames
		msg.uint(field, 1)
	}
	p.bytes(3, msg)
	locs := map[uintptr]uint64{}
	funcs := map[frame]uint64{} // by function and file, line 0
	var locMsgs, funcMsgs pbuf
	var ids []uint64
	for _, s := range samples {
		stack := s.stack
		// runtime/pprof drops the allocator's own frames above the first caller outside the runtime.
		for i, pc := range stack {
			if fr := sym(pc); len(fr) == 0 || !isRuntime(fr[len(fr)-1].function) {
				stack = stack[i:]
				break
			}
		}
		ids = ids[:0]
		for _, pc := range stack {
			id, ok := locs[pc]
			if !ok {
				id = uint64(len(locs) + 1)
				locs[pc] = id
				msg = msg[:0]
				msg.uint(1, id)
				msg.uint(2, 1)
				msg.uint(3, uint64(pc))
				for _, fr := range sym(pc) {
					key := frame{fr.function, fr.file, 0}
					fid, ok := funcs[key]
					if !ok {
						fid = uint64(len(funcs) + 1)
						funcs[key] = fid
						var fn pbuf
						fn.uint(1, fid)
						fn.uint(2, str(fr.function))
						fn.uint(3, str(fr.function))
						fn.uint(4, str(fr.file))
						funcMsgs.bytes(5, fn)
					}
					var ln pbuf
					ln.uint(1, fid)
					ln.uint(2, uint64(fr.line))
					msg.bytes(4, ln)
				}
				locMsgs.bytes(4, msg)
			}
			ids = append(ids, id)
		}
		msg = msg[:0]
		msg.packed(1, ids)
		msg.packed(2, []uint64{uint64(s.objects), uint64(s.bytes)})
		p.bytes(2, msg)
	}
	p = append(p, locMsgs...)
	p = append(p, funcMsgs...)
	periodType, period := str("space"), str("bytes")
	defaultType := str("alloc_space")
	for _, s := range table {
		p.bytes(6, []byte(s))
	}
	p.uint(9, uint64(start.UnixNano()))
	p.uint(10, uint64(d.Nanoseconds()))
	msg = msg[:0]
	msg.uint(1, periodType)
	msg.uint(2, period)
	p.bytes(11, msg)
	p.uint(12, uint64(rate))
	p.uint(14, defaultType)
	return p
}

func isRuntime(function string) bool {
	return strings.HasPrefix(function, "runtime.") || strings.HasPrefix(function, "internal/runtime/")
}

// pbuf appends protobuf wire format.
type pbuf []byte

func (b *pbuf) varint(x uint64) {
	for x >= 0x80 {
		*b = append(*b, byte(x)|0x80)
		x >>= 7
	}
	*b = append(*b, byte(x))
}

func (b *pbuf) uint(field int, x uint64) {
	b.varint(uint64(field) << 3)
	b.varint(x)
}

func (b *pbuf) bytes(field int, data []byte) {
	b.varint(uint64(field)<<3 | 2)
	b.varint(uint64(len(data)))
	*b = append(*b, data...)
}

func (b *pbuf) packed(field int, xs []uint64) {
	var body pbuf
	for _, x := range xs {
		body.varint(x)
	}
	b.bytes(field, body)
}
