package main

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// live publishes the workload at a fixed rate with the publish time stamped in Bench-Sent-At, and records when
// each output arrives on a core subscription to deduped.>.
func (b *bench) live(ctx context.Context, kind string, w *Workload) (*Result, error) {
	n := len(w.Envelopes)
	res := &Result{Contender: kind, Mode: "live", Envelopes: n, Expected: w.Expected()}
	srv, err := startServer(b.ps, b.serverBin, b.tmp)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	nc, js, err := connect(srv.URL, "bench-control")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	if err := createInput(ctx, js, 0, b.opts.inputRetention); err != nil {
		return nil, err
	}
	inProc := kind == cFloor || kind == cNaive
	if inProc {
		if err := createClientSide(ctx, js, max(b.opts.floorFlight*2, 1000), b.opts.shards.k()); err != nil {
			return nil, err
		}
	}
	// Receiving side: its own connection, no pending limits (a slow consumer would drop outputs).
	rnc, err := nats.Connect(srv.URL, nats.Name("bench-receive"))
	if err != nil {
		return nil, err
	}
	defer rnc.Close()
	sent := make([]atomic.Int64, n) // fallback when an output lacks Bench-Sent-At: the send time by Bench-Index
	var latMu sync.Mutex
	lat := make([]time.Duration, 0, res.Expected)
	var received, unstamped atomic.Int64
	var lastArrival atomic.Int64
	sub, err := rnc.Subscribe(outputPrefix+".>", func(m *nats.Msg) {
		now := time.Now().UnixNano()
		at, err := strconv.ParseInt(m.Header.Get(hdrSentAt), 10, 64)
		if err != nil {
			if i, ierr := strconv.Atoi(m.Header.Get(hdrIndex)); ierr == nil && i >= 0 && i < n {
				at, err = sent[i].Load(), nil
			}
		}
		if err == nil && at > 0 {
			latMu.Lock()
			lat = append(lat, time.Duration(now-at))
			latMu.Unlock()
		} else {
			unstamped.Add(1)
		}
		lastArrival.Store(now)
		received.Add(1)
	})
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := rnc.Flush(); err != nil {
		return nil, err
	}
	inst, err := b.startContender(ctx, kind, srv.URL, w)
	if err != nil {
		return nil, err
	}
	defer inst.stop()
	if len(inst.workers) > 0 {
		if err := waitReady(ctx, inst.workers, 30*time.Second); err != nil {
			return nil, err
		}
	}
	pnc, pjs, err := connect(srv.URL, "bench-ingest")
	if err != nil {
		return nil, err
	}
	defer pnc.Close()
	srvS := startSampler(srv.Pid(), 100*time.Millisecond)
	selfS := startSampler(os.Getpid(), 250*time.Millisecond)
	period := time.Second / time.Duration(b.opts.rate)
	t0 := time.Now()
	var pubErrs atomic.Int64
	for i := 0; i < n; i++ {
		if d := time.Until(t0.Add(time.Duration(i) * period)); d > 0 {
			time.Sleep(d)
		}
		if i%512 == 0 {
			if err := inst.check(); err != nil {
				srvS.Stop()
				selfS.Stop()
				return nil, err
			}
			if ctx.Err() != nil {
				srvS.Stop()
				selfS.Stop()
				return nil, ctx.Err()
			}
		}
		m := w.Msg(i)
		now := time.Now().UnixNano()
		m.Header.Set(hdrSentAt, strconv.FormatInt(now, 10))
		sent[i].Store(now)
		f, err := pjs.PublishMsgAsync(m)
		if err != nil {
			pubErrs.Add(1)
			continue
		}
		go func() {
			select {
			case <-f.Ok():
			case <-f.Err():
				pubErrs.Add(1)
			}
		}()
	}
	pubEnd := time.Now()
	select {
	case <-pjs.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
	}
	// Wait for every output, or until none arrived for 10s.
	lastCount, lastChange := received.Load(), time.Now()
	for received.Load() < int64(res.Expected) {
		if err := inst.check(); err != nil {
			srvS.Stop()
			selfS.Stop()
			return nil, err
		}
		if c := received.Load(); c != lastCount {
			lastCount, lastChange = c, time.Now()
		}
		if time.Since(lastChange) > 10*time.Second {
			b.note("%s live: outputs stopped at %d of %d expected", kind, lastCount, res.Expected)
			break
		}
		select {
		case <-ctx.Done():
			srvS.Stop()
			selfS.Stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	res.ServerRSS, _, res.ServerCPU = srvS.Stop()
	_, _, clientCPU := selfS.Stop()
	if inProc {
		res.ClientCPU = clientCPU
	}
	for _, r := range inst.workers {
		st, _ := readProcStat(r.proc.Pid())
		res.WorkerRSS = append(res.WorkerRSS, st.HWM)
		res.WorkerCPU = append(res.WorkerCPU, st.CPU)
	}
	end := time.Unix(0, lastArrival.Load())
	if end.Before(pubEnd) {
		end = pubEnd
	}
	res.Seconds = end.Sub(t0).Seconds()
	time.Sleep(100 * time.Millisecond)
	if err := sub.Drain(); err != nil {
		return nil, err
	}
	for sub.IsValid() {
		time.Sleep(10 * time.Millisecond)
	}
	res.Received = int(received.Load())
	latMu.Lock()
	l := summarizeLatency(lat)
	latMu.Unlock()
	res.Latency = &l
	res.Outputs, _ = streamMsgs(ctx, js, outputStream)
	if u := unstamped.Load(); u > 0 {
		b.note("%s live: %d outputs carried neither %s nor %s: no latency for them", kind, u, hdrSentAt, hdrIndex)
	}
	if pe := pubErrs.Load(); pe > 0 {
		b.note("%s live: %d publishes to %s failed", kind, pe, inputStream)
	}
	if res.Received != res.Outputs {
		b.note("%s live: %d outputs seen on deduped.>, %d stored in %s", kind, res.Received, res.Outputs, outputStream)
	}
	if err := inst.stop(); err != nil {
		b.note("%s live: stopping: %v", kind, err)
	}
	b.logf("%s live: %d envelopes at %d/s: p50 %s p99 %s max %s ms, %d outputs (expected %d)", kind, n, b.opts.rate,
		ms(l.P50), ms(l.P99), ms(l.Max), res.Outputs, res.Expected)
	return res, nil
}
