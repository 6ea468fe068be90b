package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// Names and settings the bench shares with a worker that has no DEDUPE_* settings: the worker's own defaults, so
// that floor and naive work on what the worker provisions and claim keys for as long as it does.
const (
	inputStream  = pipeline.DefaultInputStream
	inputPrefix  = pipeline.DefaultInputPrefix
	outputPrefix = pipeline.DefaultOutputPrefix
	outputStream = pipeline.DefaultOutputStream
	dlqStream    = pipeline.DefaultDLQStream
	bucket       = kvwindow.DefaultBucket
	consumerName = pipeline.DefaultConsumer
	windowTTL    = keys.DefaultTTL

	hdrIndex  = "Bench-Index"   // envelope index in the workload
	hdrSentAt = "Bench-Sent-At" // unix nanoseconds at publish (live mode)
)

// outputDupWindow is DEDUPED's duplicate window as the worker provisions it by default; floor and naive create
// DEDUPED with the same.
var outputDupWindow = pipeline.DefaultConfig().OutputDuplicates

// Contender names.
const (
	cFloor   = "floor"
	cNaive   = "naive"
	cNative  = "native"
	cWorker  = "worker"  // one replica
	cWorker2 = "worker2" // two replicas
)

// inProcess is a contender that runs as a client inside the bench until ctx ends.
type inProcess func(ctx context.Context, url string, w *Workload) error

// workerSpec says how to start worker replicas.
type workerSpec struct {
	bin         string
	replicas    int
	maxInFlight int  // 0: the worker's default
	pprof       bool // DEDUPE_PPROF=true: serve /debug/pprof/ on DEDUPE_HTTP_ADDR
	// consumerStart is DEDUPE_CONSUMER_START ("": unset); see inputRetention.workerConsumerStart.
	consumerStart string
	shards        int // DEDUPE_WINDOW_SHARDS when above 1 (see shards.go)
}

// createInput creates INGEST the way ingest would: every ingest.> subject, file storage, the retention of
// -input-retention. dupWindow > 0 turns on JetStream's own dedupe (the native contender).
func createInput(ctx context.Context, js jetstream.JetStream, dupWindow time.Duration, ret inputRetention) error {
	cfg := jetstream.StreamConfig{
		Name: inputStream, Subjects: []string{inputPrefix + ".>"}, Storage: jetstream.FileStorage,
		Duplicates: dupWindow,
	}
	ret.apply(&cfg)
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		return fmt.Errorf("create %s (retention %s): %w", inputStream, ret, err)
	}
	return nil
}

// createClientSide creates what the worker would provision for itself, for the in-process contenders: DEDUPED,
// the window's shards buckets (per-key TTLs; see createWindowBuckets) and the shared durable consumer.
func createClientSide(ctx context.Context, js jetstream.JetStream, maxAckPending, shards int) error {
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: outputStream, Subjects: []string{outputPrefix + ".>"}, Storage: jetstream.FileStorage, Duplicates: outputDupWindow,
	}); err != nil {
		return fmt.Errorf("create %s: %w", outputStream, err)
	}
	if err := createWindowBuckets(ctx, js, shards); err != nil {
		return err
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, inputStream, jetstream.ConsumerConfig{
		Durable: consumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: pipeline.DefaultAckWait,
		MaxAckPending: maxAckPending, DeliverPolicy: jetstream.DeliverAllPolicy, MaxDeliver: -1, FilterSubject: inputPrefix + ".>",
	}); err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	return nil
}

// publishAll publishes envelopes [from, to) with async publishes and waits for every ack. msgID, when set,
// gives each envelope's Nats-Msg-Id ("" for none). It returns how many acks said "duplicate".
func publishAll(ctx context.Context, js jetstream.JetStream, w *Workload, from, to int, msgID func(i int) string) (dups int, err error) {
	futures := make([]jetstream.PubAckFuture, 0, 1024)
	drain := func() error {
		for _, f := range futures {
			select {
			case ack := <-f.Ok():
				if ack.Duplicate {
					dups++
				}
			case err := <-f.Err():
				return fmt.Errorf("publish: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futures = futures[:0]
		return nil
	}
	for i := from; i < to; i++ {
		m := w.Msg(i)
		if msgID != nil {
			if id := msgID(i); id != "" {
				m.Header.Set(jetstream.MsgIDHeader, id)
			}
		}
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return dups, fmt.Errorf("publish: %w", err)
		}
		futures = append(futures, f)
		if len(futures) == cap(futures) {
			if err := drain(); err != nil {
				return dups, err
			}
		}
	}
	return dups, drain()
}

// connect opens a client connection for the bench.
func connect(url, name string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192), jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// outputMsg is the republished copy of an inbound envelope, as the worker makes it: headers carried over, plus
// Nats-Msg-Id (the idempotency key; the inbound sequence for an unkeyed envelope) and Idempotency-Key.
func outputMsg(w *Workload, i int, in jetstream.Msg) *nats.Msg {
	e := &w.Events[w.Envelopes[i].Event]
	h := make(nats.Header, len(in.Headers())+2)
	for k, v := range in.Headers() {
		h[k] = v
	}
	if id := w.IdempotencyKey(i); id != "" {
		h.Set(jetstream.MsgIDHeader, id)
		h.Set(contract.HeaderIdempotencyKey, id)
	} else if md, err := in.Metadata(); err == nil {
		h.Set(jetstream.MsgIDHeader, "ingest:"+strconv.FormatUint(md.Sequence.Stream, 10))
	}
	return &nats.Msg{Subject: outputPrefix + "." + e.Tenant + "." + e.Source, Header: h, Data: in.Data()}
}

func envelopeIndex(m jetstream.Msg, w *Workload) (int, error) {
	i, err := strconv.Atoi(m.Headers().Get(hdrIndex))
	if err != nil || i < 0 || i >= len(w.Envelopes) {
		return 0, fmt.Errorf("envelope without a valid %s header", hdrIndex)
	}
	return i, nil
}

// floorContender is the least work per envelope the design needs, as pipelined as a client can make it: batched
// pulls, up to inFlight envelopes at once, each one async create of its key with a TTL (precomputed key) in its
// bucket of a window of shards buckets, then an async publish of the output with Nats-Msg-Id, then an ack.
func floorContender(inFlight, shards int) inProcess {
	return func(ctx context.Context, url string, w *Workload) error {
		nc, js, err := connect(url, "bench-floor")
		if err != nil {
			return err
		}
		defer nc.Close()
		cons, err := js.Consumer(ctx, inputStream, consumerName)
		if err != nil {
			return err
		}
		ttl := windowTTL.String()
		value := []byte("claimed")
		sem := make(chan struct{}, inFlight)
		var errMu sync.Mutex
		var firstErr error
		fail := func(err error) {
			errMu.Lock()
			defer errMu.Unlock()
			if firstErr == nil {
				firstErr = err
			}
		}
		await := func(f jetstream.PubAckFuture) error {
			select {
			case <-f.Ok():
				return nil
			case err := <-f.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var wg sync.WaitGroup
		handle := func(m jetstream.Msg) {
			defer func() { <-sem; wg.Done() }()
			i, err := envelopeIndex(m, w)
			if err != nil {
				fail(err)
				_ = m.Term()
				return
			}
			if key := w.KVKey(i); key != "" {
				claim := &nats.Msg{Subject: "$KV." + windowBucketOf(key, shards) + "." + key, Header: nats.Header{}, Data: value}
				claim.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
				claim.Header.Set(jetstream.MsgTTLHeader, ttl)
				f, err := js.PublishMsgAsync(claim)
				if err == nil {
					err = await(f)
				}
				if _, claimed := jserr.WrongLastSeq(err); claimed { // claimed already: a duplicate
					_ = m.Ack()
					return
				}
				if err != nil {
					_ = m.Nak()
					return
				}
			}
			f, err := js.PublishMsgAsync(outputMsg(w, i, m))
			if err == nil {
				err = await(f)
			}
			if err != nil {
				_ = m.Nak()
				return
			}
			_ = m.Ack()
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go handle(m)
		}, jetstream.PullMaxMessages(min(inFlight, 1000)))
		if err != nil {
			return err
		}
		<-ctx.Done()
		cc.Stop()
		wg.Wait()
		errMu.Lock()
		defer errMu.Unlock()
		return firstErr
	}
}

// naiveContender is what most people write first: one envelope at a time, every call synchronous; each key goes
// to its bucket of a window of shards buckets.
func naiveContender(shards int) inProcess {
	return func(ctx context.Context, url string, w *Workload) error { return naive(ctx, url, w, max(shards, 1)) }
}

func naive(ctx context.Context, url string, w *Workload, shards int) error {
	nc, js, err := connect(url, "bench-naive")
	if err != nil {
		return err
	}
	defer nc.Close()
	cons, err := js.Consumer(ctx, inputStream, consumerName)
	if err != nil {
		return err
	}
	kvs := make([]jetstream.KeyValue, shards)
	for i := range kvs {
		if kvs[i], err = js.KeyValue(ctx, windowBucket(shards, i)); err != nil {
			return err
		}
	}
	for ctx.Err() == nil {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for m := range batch.Messages() {
			i, err := envelopeIndex(m, w)
			if err != nil {
				return err
			}
			if key := w.KVKey(i); key != "" {
				if _, err := kvs[shardIndex(key, shards)].Create(ctx, key, []byte("claimed"), jetstream.KeyTTL(windowTTL)); err != nil {
					if errors.Is(err, jetstream.ErrKeyExists) {
						if err := m.DoubleAck(ctx); err != nil && ctx.Err() == nil {
							return err
						}
						continue
					}
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
			}
			if _, err := js.PublishMsg(ctx, outputMsg(w, i, m)); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			if err := m.DoubleAck(ctx); err != nil && ctx.Err() == nil {
				return err
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// workerEnv is the environment of one worker replica: the bench's own, less any DEDUPE_* it has, plus the
// worker's settings.
func workerEnv(url string, httpPort int, spec workerSpec) []string {
	env := append(environWithoutSettings(),
		"DEDUPE_NATS_URL="+url,
		"DEDUPE_SOURCES="+sourcesYAML,
		"DEDUPE_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(httpPort),
		"DEDUPE_LOG_LEVEL=warn",
		"DEDUPE_LOG_FORMAT=json",
	)
	if spec.maxInFlight > 0 {
		env = append(env, "DEDUPE_MAX_IN_FLIGHT="+strconv.Itoa(spec.maxInFlight))
	}
	if spec.pprof {
		env = append(env, "DEDUPE_PPROF=true")
	}
	if spec.consumerStart != "" {
		env = append(env, "DEDUPE_CONSUMER_START="+spec.consumerStart)
	}
	if spec.shards > 1 {
		env = append(env, "DEDUPE_WINDOW_SHARDS="+strconv.Itoa(spec.shards))
	}
	return env
}

// workerReplica is one running worker process.
type workerReplica struct {
	proc *Proc
	http string // http://127.0.0.1:<port>
}

func startWorkers(ps *procs, spec workerSpec, url string) ([]*workerReplica, error) {
	var out []*workerReplica
	for r := 0; r < spec.replicas; r++ {
		port, err := freePort()
		if err != nil {
			return out, err
		}
		p, err := ps.start(fmt.Sprintf("dedupeworker-%d", r+1), spec.bin, []string{"run"}, workerEnv(url, port, spec))
		if err != nil {
			return out, err
		}
		out = append(out, &workerReplica{proc: p, http: fmt.Sprintf("http://127.0.0.1:%d", port)})
	}
	return out, nil
}

// waitReady polls /readyz of every replica until each answers 200 (or one exits).
func waitReady(ctx context.Context, reps []*workerReplica, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for _, r := range reps {
		for {
			if ok, err := r.proc.Exited(); ok {
				return fmt.Errorf("%s exited (%v):\n%s", r.proc.Name, err, r.proc.log.String())
			}
			resp, err := hc.Get(r.http + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not ready after %s:\n%s", r.proc.Name, timeout, r.proc.log.String())
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// environWithoutSettings is this process's environment without any DEDUPE_ setting: a child gets only the
// settings the bench gives it.
func environWithoutSettings() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEDUPE_") {
			env = append(env, kv)
		}
	}
	return env
}
