package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func streamMsgs(ctx context.Context, js jetstream.JetStream, name string) (int, bool) {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return 0, false
	}
	return int(st.CachedInfo().State.Msgs), true
}

// waitDrained polls the shared consumer until every envelope up to lastSeq is delivered and acknowledged.
func (b *bench) waitDrained(ctx context.Context, js jetstream.JetStream, lastSeq uint64, check func() error, firstAck *time.Time) (time.Time, error) {
	deadline := time.Now().Add(b.opts.timeout)
	var floor uint64
	lastProgress := time.Now()
	for {
		if err := check(); err != nil {
			return time.Time{}, err
		}
		c, err := js.Consumer(ctx, inputStream, consumerName)
		if err == nil {
			ci := c.CachedInfo()
			if firstAck.IsZero() && ci.AckFloor.Stream > 0 {
				*firstAck = time.Now()
			}
			if ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Stream >= lastSeq {
				return time.Now(), nil
			}
			if ci.AckFloor.Stream != floor || ci.Delivered.Stream == 0 {
				floor = ci.AckFloor.Stream
				lastProgress = time.Now()
			}
			if time.Since(lastProgress) > b.opts.stall {
				return time.Time{}, fmt.Errorf("no progress for %s: ack floor %d of %d, %d pending, %d awaiting ack, %d redelivered",
					b.opts.stall, ci.AckFloor.Stream, lastSeq, ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
			}
		} else if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("not drained after %s", b.opts.timeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// drainOpts are the extras of one drain run.
type drainOpts struct {
	heap bool // measure the server's heap before and (settled) after
}

// drain runs one contender against a fresh server preloaded with the workload (native: publishes it) and
// measures the time to empty it.
func (b *bench) drain(ctx context.Context, label, kind string, w *Workload, o drainOpts) (*Result, error) {
	heap := o.heap
	n := len(w.Envelopes)
	res := &Result{Contender: label, Mode: "drain", Envelopes: n, Expected: w.Expected()}
	srv, err := startServer(b.ps, b.serverBin, b.tmp)
	if err != nil {
		return nil, err
	}
	keepServer := false
	defer func() {
		if !keepServer {
			srv.Stop()
		}
	}()
	nc, js, err := connect(srv.URL, "bench-control")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	native := kind == cNative
	inProc := kind == cFloor || kind == cNaive
	var dupWindow time.Duration
	if native {
		dupWindow = windowTTL
	}
	if err := createInput(ctx, js, dupWindow, b.opts.inputRetention); err != nil {
		return nil, err
	}
	if inProc {
		if err := createClientSide(ctx, js, max(b.opts.floorFlight*2, 1000), b.opts.shards.k()); err != nil {
			return nil, err
		}
	}
	if heap {
		if res.HeapBefore, err = srv.Heap(); err != nil {
			return nil, fmt.Errorf("server heap: %w", err)
		}
	}
	if !native {
		t := time.Now()
		if _, err := publishAll(ctx, js, w, 0, n, nil); err != nil {
			return nil, fmt.Errorf("preload: %w", err)
		}
		d := time.Since(t)
		b.logf("%s drain: preloaded %d envelopes in %.1fs (%.0f/s)", label, n, d.Seconds(), float64(n)/d.Seconds())
	}
	var floorProf *clientProfile // nil unless this is the first floor drain with -cpuprofile
	if kind == cFloor && label == cFloor && b.opts.cpuprofile != "" && !b.floorProfiled {
		b.floorProfiled = true
		floorProf = b.startFloorProfile()
		defer floorProf.abort()
	}
	srvS := startSampler(srv.Pid(), 100*time.Millisecond)
	selfS := startSampler(os.Getpid(), 250*time.Millisecond)
	t0 := time.Now()
	var end time.Time
	var inst *instance
	var profDone chan struct{}
	var srvProfDone chan struct{}
	if b.opts.serverProf != "" {
		srvProfDone = make(chan struct{})
		go func() {
			defer close(srvProfDone)
			out := fmt.Sprintf("%s.%s.pprof", b.opts.serverProf, strings.NewReplacer("+", "-", "@", "-").Replace(label))
			if err := srv.CPUProfile(out, b.opts.profileSeconds); err != nil {
				b.note("server-cpuprofile: %s: %v", label, err)
			}
		}()
	}
	if native {
		dups, err := publishAll(ctx, js, w, 0, n, w.IdempotencyKey)
		if err != nil {
			srvS.Stop()
			selfS.Stop()
			return nil, err
		}
		end = time.Now()
		b.logf("%s drain: %d of %d publishes acknowledged as duplicates", label, dups, n)
	} else {
		floorProf.withFloorLabel(ctx, func(ctx context.Context) { inst, err = b.startContender(ctx, kind, srv.URL, w) })
		if err != nil {
			srvS.Stop()
			selfS.Stop()
			return nil, err
		}
		defer inst.stop()
		if kind == cWorker && label == cWorker && b.opts.cpuprofile != "" && !b.profiled {
			b.profiled = true
			profDone = make(chan struct{})
			go func() { defer close(profDone); b.profileWorker(ctx, inst.workers[0].http, label) }()
		}
		var firstAck time.Time
		end, err = b.waitDrained(ctx, js, uint64(n), inst.check, &firstAck)
		if !firstAck.IsZero() {
			res.FirstAck = firstAck.Sub(t0).Seconds()
		}
		if err != nil {
			srvS.Stop()
			selfS.Stop()
			return nil, fmt.Errorf("%s drain: %w", label, err)
		}
	}
	res.Seconds = end.Sub(t0).Seconds()
	res.ServerRSS, _, res.ServerCPU = srvS.Stop()
	_, _, clientCPU := selfS.Stop()
	if floorProf != nil {
		b.finishFloorProfile(floorProf) // after the samplers: its GC and writing are not the floor's CPU
	}
	if inProc || native {
		res.ClientCPU = clientCPU
	}
	if inst != nil {
		for _, r := range inst.workers {
			st, _ := readProcStat(r.proc.Pid())
			res.WorkerRSS = append(res.WorkerRSS, st.HWM)
			res.WorkerCPU = append(res.WorkerCPU, st.CPU)
		}
	}
	if native {
		res.Outputs, _ = streamMsgs(ctx, js, inputStream)
		res.WindowKeys = w.KeyedUnique()
	} else {
		time.Sleep(100 * time.Millisecond) // a late duplicate output would show up now
		res.Outputs, _ = streamMsgs(ctx, js, outputStream)
		if res.WindowKeys, err = b.windowKeys(ctx, js, kind); err != nil {
			return nil, fmt.Errorf("%s drain: %w", label, err)
		}
		if dlq, ok := streamMsgs(ctx, js, dlqStream); ok && dlq > 0 {
			res.DLQ = dlq
			b.note("%s drain: %d dead letters in %s", label, dlq, dlqStream)
		}
	}
	if profDone != nil {
		<-profDone
	}
	if srvProfDone != nil {
		<-srvProfDone
	}
	if inst != nil {
		for _, r := range inst.workers {
			if got, err := workerRetries(r.http); err != nil {
				b.note("%s drain: %s: retry counters not read: %v", label, r.proc.Name, err)
			} else if got != "" {
				b.note("%s drain: %s: %s", label, r.proc.Name, got)
			}
		}
		if err := inst.stop(); err != nil {
			b.note("%s drain: stopping: %v", label, err)
		}
		for _, r := range inst.workers {
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(r.proc.log.String()), "\n") {
				// The one warning every run has: the unkeyed source is declared without dedupe on purpose.
				if l != "" && !strings.Contains(l, "source declares no dedupe") {
					lines = append(lines, l)
				}
			}
			if len(lines) > 0 {
				b.note("%s drain: %s logged %d line(s) at warn or above; last: %s", label, r.proc.Name, len(lines), lines[len(lines)-1])
			}
		}
	}
	b.logf("%s drain: %d envelopes in %.2fs (%.0f/s), %d outputs (expected %d)", label, n, res.Seconds, res.Rate(), res.Outputs, res.Expected)
	if heap {
		keepServer = true
		b.deferred.Add(1)
		go func() {
			defer b.deferred.Done()
			defer srv.Stop()
			select {
			case <-ctx.Done():
				return
			case <-time.After(b.opts.settle):
			}
			h, err := srv.SettledHeap(ctx, time.Second)
			if err != nil {
				b.note("%s drain: server heap after: %v", label, err)
				return
			}
			res.HeapAfter = h
		}()
	}
	return res, nil
}

// profileWorker fetches a CPU profile of -profile-seconds, then the allocation profile, from the /debug/pprof/
// a worker started with DEDUPE_PPROF=true serves on its DEDUPE_HTTP_ADDR (base: http://host:port).
func (b *bench) profileWorker(ctx context.Context, base, label string) {
	secs := b.opts.profileSeconds
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(base + "/debug/pprof/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			b.note("cpuprofile: %s: GET %s/debug/pprof/: %s (a worker without DEDUPE_PPROF?)", label, base, resp.Status)
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.note("cpuprofile: %s: no HTTP server at %s: %v", label, base, err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	get := func(path, out string, timeout time.Duration) error {
		return download(base+path, out, timeout)
	}
	path := b.opts.cpuprofile
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.note("cpuprofile: %v", err)
		return
	}
	if err := get(fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), path, time.Duration(secs+30)*time.Second); err != nil {
		b.note("cpuprofile: %s: %v", label, err)
		return
	}
	if err := get("/debug/pprof/allocs", path+".allocs", 30*time.Second); err != nil {
		b.note("cpuprofile: %s: allocs: %v", label, err)
		return
	}
	b.note("cpuprofile: %s: worker CPU profile (%ds from the start of its first drain) in %s, allocation profile in %s.allocs", label, secs, path, path)
}
