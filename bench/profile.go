package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/google/pprof/profile"
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
	before              []byte // the allocation profile at the floor's start, parsed only once the drain is over
	start               time.Time
	timer               *time.Timer
	once                sync.Once
	ran                 time.Duration // how long the CPU profile ran, once stopped
	cpuErr              error
}

// startFloorProfile starts the bench's CPU profile for the first floor drain, or notes why it cannot (nil).
// The baseline's GC and writing run here, ahead of the drain's clock and the CPU profile.
func (b *bench) startFloorProfile() *clientProfile {
	cpu, allocs := floorProfilePaths(b.opts.cpuprofile)
	if err := os.MkdirAll(filepath.Dir(cpu), 0o755); err != nil {
		b.note("cpuprofile: floor: %v", err)
		return nil
	}
	before, err := allocsSnapshot() // the baseline is the preload's end
	if err != nil {
		b.note("cpuprofile: floor: allocs: %v", err)
		return nil
	}
	f, err := os.Create(cpu)
	if err != nil {
		b.note("cpuprofile: floor: %v", err)
		return nil
	}
	p := &clientProfile{cpuPath: cpu, allocsPath: allocs, secs: time.Duration(b.opts.profileSeconds) * time.Second,
		f: f, before: before}
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
	after, err := allocsSnapshot()
	if err == nil {
		err = writeAllocDelta(p.allocsPath, p.before, after)
	}
	if err != nil {
		b.note("cpuprofile: floor: allocs: %v", err)
		return
	}
	b.note("cpuprofile: floor: bench CPU profile of the first floor drain (%.1fs from the floor's start) in %s, "+
		"allocations from the floor's start to the drain's end in %s; the floor's goroutines carry %s=%s "+
		"(go tool pprof -tagfocus %s=%s)", p.ran.Seconds(), p.cpuPath, p.allocsPath, floorLabel, cFloor, floorLabel, cFloor)
}

// allocsSnapshot is the process's allocation profile (gzipped profile.proto, symbolized) since its start.
func allocsSnapshot() ([]byte, error) {
	runtime.GC() // the heap profile counts an allocation only once a GC cycle has completed after it
	var buf bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&buf, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeAllocDelta writes, gzipped, what after allocated beyond before, two allocsSnapshots of this process:
// runtime/pprof has no way to write a delta. Stacks with no change in any value are left out (Merge drops
// them); the alloc_* values are the allocations between the two, the inuse_* ones the change in the live heap,
// negative where the drain freed what was live at the baseline.
func writeAllocDelta(out string, before, after []byte) error {
	b, err := profile.ParseData(before)
	if err != nil {
		return err
	}
	a, err := profile.ParseData(after)
	if err != nil {
		return err
	}
	b.Scale(-1)
	d, err := profile.Merge([]*profile.Profile{a, b}) // a first: its mapping and default sample type lead
	if err != nil {
		return err
	}
	d.DurationNanos = a.TimeNanos - b.TimeNanos // Merge sums the two writes' own durations
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	return errors.Join(d.Write(f), f.Close())
}
