package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const claimHistogram = "dedupeworker_claim_duration_seconds"

// scChunkResult is what one chunk measured, right after it drained.
type scChunkResult struct {
	keys                  uint64 // window keys after the chunk
	envelopes             int
	seconds               float64 // first publish to the last envelope acknowledged
	claimP50, claimP99    time.Duration
	heap, rss             int64 // server, right after the drain
	kvBytes, kvMsgs       uint64
	diskBytes             int64 // the server's whole store directory
	workerRSS             int64
	outputs, expected     int // cumulative DEDUPED messages, and what a correct worker has published
	dead                  int // dead letters so far
	windowKeysWant        int // the unique events so far: every one holds a key
	heapPerKey, rssPerKey float64
}

func (c scChunkResult) exact() bool {
	return c.outputs == c.expected && c.dead == 0 && c.keys == uint64(c.windowKeysWant)
}

// runChunk publishes chunk i while the worker drains it, waits until every envelope is acknowledged and measures.
func (r *scRun) runChunk(ctx context.Context, i int) error {
	c := r.w.chunks[i]
	before, err := r.worker.metrics()
	if err != nil {
		return fmt.Errorf("scale: worker metrics: %w", err)
	}
	t0 := time.Now()
	last, err := publishEvents(ctx, r.js, r.w, c.events)
	if err != nil {
		return err
	}
	published := time.Since(t0)
	if err := r.waitDrained(ctx, last, r.o.chunkTimeout); err != nil {
		return fmt.Errorf("scale: chunk %d: %w", i+1, err)
	}
	res := scChunkResult{envelopes: len(c.events), seconds: time.Since(t0).Seconds()}
	r.expected += c.unique
	res.expected = r.expected
	res.windowKeysWant = r.expected
	after, err := r.worker.metrics()
	if err != nil {
		return fmt.Errorf("scale: worker metrics: %w", err)
	}
	h := parseHistogram(after, claimHistogram).since(parseHistogram(before, claimHistogram))
	res.claimP50, res.claimP99 = h.quantile(0.50), h.quantile(0.99)
	if err := r.measure(ctx, &res); err != nil {
		return err
	}
	r.report.chunks = append(r.report.chunks, res)
	r.logf("chunk %d/%d: %d envelopes in %.1fs (published in %.1fs), %d keys, outputs %d of %d, claim p50 %s p99 %s, "+
		"server heap %d B/key, RSS %d B/key, KV %d B/key, worker RSS %s",
		i+1, len(r.w.chunks), res.envelopes, res.seconds, published.Seconds(), res.keys, res.outputs, res.expected,
		res.claimP50, res.claimP99, int(res.heapPerKey), int(res.rssPerKey), int(res.kvPerKey()), mib(res.workerRSS))
	return nil
}

func (c scChunkResult) kvPerKey() float64 {
	if c.keys == 0 {
		return 0
	}
	return float64(c.kvBytes) / float64(c.keys)
}

// measure fills in the server, window and worker figures of res.
func (r *scRun) measure(ctx context.Context, res *scChunkResult) error {
	var err error
	if res.heap, err = r.srv.heap(); err != nil {
		return fmt.Errorf("scale: server heap: %w", err)
	}
	res.rss = r.srv.rss()
	if res.keys, res.kvMsgs, res.kvBytes, err = r.windowState(ctx); err != nil {
		return err
	}
	if res.keys > 0 {
		res.heapPerKey = float64(res.heap-r.baseHeap) / float64(res.keys)
		res.rssPerKey = float64(res.rss-r.baseRSS) / float64(res.keys)
	}
	for _, name := range r.windowStreams() {
		res.diskBytes += scDiskUsage(filepath.Join(r.srv.dir, "jetstream", "$G", "streams", name))
	}
	res.workerRSS = r.worker.rss()
	res.outputs, _ = streamMsgs(ctx, r.js, outputStream)
	res.dead, _ = streamMsgs(ctx, r.js, dlqStream)
	return nil
}

// waitDrained polls the worker's consumer until every envelope up to lastSeq is delivered and acknowledged. The
// worker publishes an event before it acknowledges its envelope, so the outputs are final then.
func (r *scRun) waitDrained(ctx context.Context, lastSeq uint64, timeout time.Duration) error {
	t0 := time.Now()
	for {
		c, err := r.js.Consumer(ctx, inputStream, consumerName)
		if err == nil {
			ci := c.CachedInfo()
			if ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Stream >= lastSeq {
				return nil
			}
			if time.Since(t0) > timeout {
				return fmt.Errorf("not drained after %s: ack floor %d of %d, %d pending, %d awaiting ack",
					timeout, ci.AckFloor.Stream, lastSeq, ci.NumPending, ci.NumAckPending)
			}
		} else if time.Since(t0) > timeout {
			return fmt.Errorf("not drained after %s: %w", timeout, err)
		}
		if ok, werr := r.worker.proc.Exited(); ok {
			return fmt.Errorf("the worker exited (%v): %s", werr, r.worker.proc.log.String())
		}
		if err := scPause(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// scDiskUsage is what du says the directory takes (allocated blocks), 0 when it cannot tell.
func scDiskUsage(dir string) int64 {
	out, err := exec.Command("du", "-s", "--block-size=1", dir).Output()
	if err != nil {
		return 0
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n
}

// settle idles until the server's caches have expired and records the settled heap and the RSS then; with
// settleDup, again once the output stream's duplicate window has expired the run's message ids.
func (r *scRun) settle(ctx context.Context) error {
	r.logf("settling %s for the server's heap", r.o.settle)
	t0 := time.Now()
	h, err := r.srv.settledHeap(ctx, r.o.settle)
	if err != nil {
		return err
	}
	r.report.settledHeap, r.report.settledRSS = h, r.srv.rss()
	if r.o.settleDup <= r.o.settle {
		return nil
	}
	r.logf("settling until %s after the drain, past the output stream's duplicate window", r.o.settleDup)
	if err := scPause(ctx, r.o.settleDup-time.Since(t0)); err != nil {
		return err
	}
	if r.report.dupHeap, err = r.srv.settledHeap(ctx, 5*time.Second); err != nil {
		return err
	}
	r.report.dupRSS = r.srv.rss()
	return nil
}
