package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The scale run's workload: one github source (the key is X-GitHub-Delivery), bodies of a fixed size, a share
// of provider retries that repeat an event of the same chunk byte for byte, and three kinds of scope for the
// window commands: eight tenants that share every chunk; scSparseTenant, whose few keys are the very last ones of
// the run, behind millions of other tenants' keys; and scSpreadTenant, with one key per chunk (the chunk's first
// event), so that the server scans a chunk's worth of other keys between two of its claims.
const (
	scSource       = "gh"
	scSourcesYAML  = "sources:\n  gh: {dedupe: github}\n"
	scSparseTenant = "zeta"
	scSparseKeys   = 10
	scSpreadTenant = "yolo"
)

var scTenants = [...]string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka"}

// scChunk is one chunk of the run: its envelopes in publish order, each the index of the event it delivers.
type scChunk struct {
	events []int32
	unique int // events delivered for the first time in this chunk: what the worker must publish
}

// scWorkload plans every chunk up front, so that the sparse tenant's events (the last ones) are known before the
// first publish. The plan is a function of its arguments only (a PCG seeded with the chunk number).
type scWorkload struct {
	chunks    []scChunk
	events    int          // unique events over the run
	sparse    int          // the first event of scSparseTenant
	spread    map[int]bool // the events of scSpreadTenant
	bodySize  int
	retryRate float64
}

func planScale(n, chunk, bodySize int, retryRate float64, seed uint64) *scWorkload {
	w := &scWorkload{bodySize: bodySize, retryRate: retryRate, spread: map[int]bool{}}
	for from := 0; from < n; from += chunk {
		size := min(chunk, n-from)
		r := rand.New(rand.NewPCG(seed, uint64(len(w.chunks))))
		c := scChunk{events: make([]int32, size)}
		first := w.events
		w.spread[first] = true
		for j := range size {
			if c.unique > 0 && r.Float64() < retryRate {
				c.events[j] = int32(first + r.IntN(c.unique))
				continue
			}
			c.events[j] = int32(w.events)
			w.events++
			c.unique++
		}
		w.chunks = append(w.chunks, c)
	}
	w.sparse = max(0, w.events-scSparseKeys)
	return w
}

func (w *scWorkload) tenant(e int) string {
	// Events past the plan (the restarts' new events) go to the shared tenants.
	switch {
	case e >= w.sparse && e < w.events:
		return scSparseTenant
	case w.spread[e]:
		return scSpreadTenant
	}
	return scTenants[e%len(scTenants)]
}

// scDeliveryID is the event's X-GitHub-Delivery, shaped like GitHub's (a UUID), and so its event key.
func scDeliveryID(e int) string {
	x := uint64(e)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(x>>32), uint16(x>>16), uint16(x)&0xfff, e&0xfff, uint64(e))
}

// kvKey is the event's key in the window: <tenant>.gh.<unpadded base64url of the delivery id>.
func (w *scWorkload) kvKey(e int) string {
	return w.tenant(e) + "." + scSource + "." + base64.RawURLEncoding.EncodeToString([]byte(scDeliveryID(e)))
}

// msg is a delivery of event e: a retry carries the same headers and body as the first delivery.
func (w *scWorkload) msg(e int) *nats.Msg {
	body := make([]byte, 0, w.bodySize)
	body = append(body, `{"action":"opened","number":`...)
	body = strconv.AppendInt(body, int64(e), 10)
	body = append(body, `,"pad":"`...)
	for len(body) < w.bodySize-2 {
		body = append(body, 'x')
	}
	body = append(body, `"}`...)
	h := nats.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-GitHub-Event", "pull_request")
	h.Set("X-GitHub-Delivery", scDeliveryID(e))
	return &nats.Msg{Subject: inputPrefix + "." + w.tenant(e) + "." + scSource, Header: h, Data: body}
}

// publishEvents publishes a delivery of each event in order (async, every ack awaited) and returns the input
// stream sequence of the last one.
func publishEvents(ctx context.Context, js jetstream.JetStream, w *scWorkload, events []int32) (uint64, error) {
	futures := make([]jetstream.PubAckFuture, 0, 4096)
	var last uint64
	wait := func() error {
		for _, f := range futures {
			select {
			case ack := <-f.Ok():
				last = max(last, ack.Sequence)
			case err := <-f.Err():
				return fmt.Errorf("scale: publish: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futures = futures[:0]
		return nil
	}
	for _, e := range events {
		f, err := js.PublishMsgAsync(w.msg(int(e)))
		if err != nil {
			return last, fmt.Errorf("scale: publish: %w", err)
		}
		if futures = append(futures, f); len(futures) == cap(futures) {
			if err := wait(); err != nil {
				return last, err
			}
		}
	}
	return last, wait()
}
