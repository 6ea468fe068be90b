package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
)

// ingestWarmup is the number of untimed requests each side gets before the first round: enough to open every
// client connection and warm both processes up.
func ingestWarmup(n, clients int) int { return min(n, max(4*clients, 200)) }

// ingestLoad is what runLoad measured.
type ingestLoad struct {
	elapsed time.Duration
	lat     []time.Duration // of every request made, in request order
	ok      int
	errors  map[string]int
}

// runLoad makes requests 0..n-1 with do from c goroutines, each taking the next index until none is left, and
// times each call and the whole. do returns "" for a success, else the kind of failure. The goroutines are started
// before the clock: the elapsed time is from the first request to the end of the last.
func runLoad(ctx context.Context, n, c int, do func(ctx context.Context, i int) string) ingestLoad {
	lat := make([]time.Duration, n)
	done := make([]bool, n)
	errs := make([]map[string]int, c)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t := time.Now()
				kind := do(ctx, i)
				lat[i], done[i] = time.Since(t), true
				if kind != "" {
					if errs[g] == nil {
						errs[g] = map[string]int{}
					}
					errs[g][kind]++
				}
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	res := ingestLoad{elapsed: time.Since(t0), lat: make([]time.Duration, 0, n), errors: map[string]int{}}
	for i, d := range lat {
		if done[i] {
			res.lat = append(res.lat, d)
		}
	}
	for _, m := range errs {
		for k, v := range m {
			res.errors[k] += v
		}
	}
	failed := 0
	for _, v := range res.errors {
		failed += v
	}
	res.ok = len(res.lat) - failed
	return res
}

// shortErr is an error's text cut to a size fit for a count by kind.
func shortErr(err error) string {
	s := err.Error()
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

// ingestHTTPClient is the HTTP sides' client: keep-alive, at most one connection per concurrent client and host, no
// compression (Go would add Accept-Encoding, which GitHub does not send). dials counts the connections opened.
func ingestHTTPClient(clients int, dials *atomic.Int64) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return d.DialContext(ctx, network, addr)
			},
			// Idle connections for both HTTP sides (receiver and bare), so that switching sides reopens none.
			MaxIdleConns: 2 * clients, MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients,
			IdleConnTimeout: 90 * time.Second, DisableCompression: true,
		},
	}
}

// postSigned sends request i of run to the receiver at base: "" when answered 202, else the status or the error.
func postSigned(ctx context.Context, hc *http.Client, base string, rq *ingestRequest, delivery string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+rq.path(), bytes.NewReader(rq.body))
	if err != nil {
		return "request: " + shortErr(err)
	}
	req.Header = rq.httpHeader(delivery)
	resp, err := hc.Do(req)
	if err != nil {
		return "transport: " + shortErr(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return resp.Status
	}
	return ""
}

// publishDirect publishes request i of run straight to INGEST, as the receiver would: one synchronous publish,
// expecting the input stream.
func publishDirect(ctx context.Context, js jetstream.JetStream, rq *ingestRequest, delivery string) string {
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m := &nats.Msg{Subject: rq.subject(), Header: rq.natsHeader(delivery), Data: rq.body}
	if _, err := js.PublishMsg(pctx, m, jetstream.WithExpectStream(inputStream)); err != nil {
		return "publish: " + shortErr(err)
	}
	return ""
}

// ingestPhase runs the receiver comparison: a fresh nats-server with INGEST as the worker creates it, a
// `dedupeworker ingest` process in front of it, then -repeat rounds of both sides in an order rotated each round.
// After every run INGEST must hold exactly the run's requests (checked, with the last envelope's subject and
// headers), and is purged.
func (b *bench) ingestPhase(ctx context.Context, w *Workload) error {
	n, c := b.opts.ingestN, b.opts.ingestClients
	s := &b.ingest
	s.runs = map[string][]*ingestRun{}
	reqs := ingestRequests(w, n, ingestSecret)
	srv, err := startServer(b.ps, b.serverBin, b.tmp)
	if err != nil {
		return err
	}
	defer srv.Stop()
	nc, js, err := connect(srv.URL, "bench-control")
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := createInput(ctx, js, 0, b.opts.inputRetention); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	p, err := b.ps.start("dedupeworker-ingest", b.workerBin, []string{"ingest"}, ingestEnv(srv.URL, port, c))
	if err != nil {
		return err
	}
	rep := &workerReplica{proc: p, http: "http://127.0.0.1:" + strconv.Itoa(port)}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := p.Stop(30 * time.Second); err != nil {
			b.note("ingest: stopping: %v", err)
		}
		if ok, werr := p.Exited(); ok && werr != nil {
			b.note("ingest: %s exited: %v", p.Name, werr)
		}
	}
	defer stop()
	if err := waitReady(ctx, []*workerReplica{rep}, 30*time.Second); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	bare, bareURL, err := b.startBare(ctx, srv.URL)
	if err != nil {
		return err
	}
	defer func() {
		if err := bare.Stop(10 * time.Second); err != nil {
			b.note("ingest: stopping the bare handler: %v", err)
		}
	}()
	dnc, djs, err := connect(srv.URL, "bench-direct")
	if err != nil {
		return err
	}
	defer dnc.Close()
	var dials atomic.Int64
	hc := ingestHTTPClient(c, &dials)
	defer hc.CloseIdleConnections()

	one := func(side string, round, count int) (*ingestRun, error) {
		s.runSeq++
		run := s.runSeq
		base, handler := rep.http, p.Pid()
		if side == sideBare {
			base, handler = bareURL, bare.Pid()
		}
		do := func(ctx context.Context, i int) string {
			return postSigned(ctx, hc, base, &reqs[i%len(reqs)], deliveryID(run, i))
		}
		if side == sideDirect {
			do = func(ctx context.Context, i int) string {
				return publishDirect(ctx, djs, &reqs[i%len(reqs)], deliveryID(run, i))
			}
		}
		srv0, _ := readProcStat(srv.Pid())
		ing0, _ := readProcStat(handler)
		self0, _ := readProcStat(os.Getpid())
		l := runLoad(ctx, count, c, do)
		srv1, _ := readProcStat(srv.Pid())
		ing1, _ := readProcStat(handler)
		self1, _ := readProcStat(os.Getpid())
		hcpu := ing1.CPU - ing0.CPU
		if side == sideDirect {
			hcpu = 0 // no HTTP process in the path (the idle receiver's CPU is not the direct side's)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if ok, werr := p.Exited(); ok {
			return nil, fmt.Errorf("ingest: %s exited (%v):\n%s", p.Name, werr, p.log.String())
		}
		r := &ingestRun{side: side, round: round, requests: count, seconds: l.elapsed.Seconds(), lat: summarizeLatency(l.lat),
			accepted: l.ok, errors: l.errors, srvCPU: srv1.CPU - srv0.CPU, ingestCPU: hcpu, benchCPU: self1.CPU - self0.CPU}
		if err := checkIngested(ctx, js, r, run); err != nil {
			return nil, err
		}
		return r, nil
	}
	warm := ingestWarmup(n, c)
	for _, side := range ingestSides {
		r, err := one(side, -1, warm)
		if err != nil {
			return fmt.Errorf("ingest warm-up: %w", err)
		}
		if pr := r.problem(); pr != "" {
			return fmt.Errorf("ingest warm-up, %s: %s", side, pr)
		}
	}
	s.loadBefore = loadAverage()
	for round := 0; round < b.opts.repeat; round++ {
		order := roundOrder(ingestSides, round)
		s.orders = append(s.orders, order)
		for _, side := range order {
			r, err := one(side, round, n)
			if err != nil {
				return err
			}
			s.runs[side] = append(s.runs[side], r)
			b.logf("ingest %s round %d: %d requests in %.2fs (%.0f/s), p50 %s p99 %s max %s ms, %d failed, %d stored",
				side, round+1, n, r.seconds, r.rate(), ms(r.lat.P50), ms(r.lat.P99), ms(r.lat.Max), r.failures(), r.stored)
		}
	}
	s.loadAfter = loadAverage()
	s.dials = dials.Load()
	if st, err := readProcStat(p.Pid()); err == nil {
		s.ingestRSS = st.HWM
	}
	stop()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(p.log.String()), "\n") {
		// Expected on a nats-server with the default max_payload (1 MiB): bodies above it would be answered 413.
		if l != "" && !strings.Contains(l, "max_payload") && !strings.Contains(l, "DEDUPE_MAX_JSON_BYTES") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 0 {
		b.note("ingest: %s logged %d line(s) at warn or above; last: %s", p.Name, len(lines), lines[len(lines)-1])
	}
	return nil
}

// startBare starts the bare handler's process (the bench's own binary with bareEnv) on a free loopback port and
// waits until it answers; url is its base URL.
func (b *bench) startBare(ctx context.Context, natsURL string) (*Proc, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("ingest: bare handler: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := append(os.Environ(), bareEnv+"="+addr+" "+natsURL)
	p, err := b.ps.start("dedupebench-bare", exe, nil, env)
	if err != nil {
		return nil, "", err
	}
	rep := &workerReplica{proc: p, http: "http://" + addr}
	if err := waitReady(ctx, []*workerReplica{rep}, 30*time.Second); err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, "", fmt.Errorf("ingest: bare handler: %w", err)
	}
	return p, rep.http, nil
}

// checkIngested reads what INGEST holds after run r (number run of the bench) into r, checks the last envelope
// (its subject is ingest.<tenant>.github, it carries Ingest-Verified: true exactly once and a delivery id of this
// run), and purges the stream.
func checkIngested(ctx context.Context, js jetstream.JetStream, r *ingestRun, run uint32) error {
	st, err := js.Stream(ctx, inputStream)
	if err != nil {
		return fmt.Errorf("ingest: %s: %w", inputStream, err)
	}
	state := st.CachedInfo().State
	r.stored, r.storedBytes = int(state.Msgs), state.Bytes
	if state.Msgs > 0 {
		m, err := st.GetMsg(ctx, state.LastSeq)
		if err != nil {
			return fmt.Errorf("ingest: reading the last envelope: %w", err)
		}
		r.checkErr = checkEnvelope(m.Subject, m.Header, run)
	}
	if err := st.Purge(ctx); err != nil {
		return fmt.Errorf("ingest: purging %s: %w", inputStream, err)
	}
	return nil
}

// checkEnvelope says what is wrong with a stored envelope of run ("" when nothing).
func checkEnvelope(subject string, h nats.Header, run uint32) string {
	var bad []string
	if !strings.HasPrefix(subject, inputPrefix+".") || !strings.HasSuffix(subject, "."+ingestSource) {
		bad = append(bad, "subject "+subject)
	}
	if v := headerValues(h, contract.HeaderVerified); len(v) != 1 || v[0] != "true" {
		bad = append(bad, fmt.Sprintf("%s %q", contract.HeaderVerified, v))
	}
	if id := headerValues(h, "X-GitHub-Delivery"); len(id) != 1 || !strings.HasPrefix(id[0], fmt.Sprintf("%08x-", run)) {
		bad = append(bad, fmt.Sprintf("X-GitHub-Delivery %q is not of this run", id))
	}
	if len(headerValues(h, "X-Hub-Signature-256")) == 0 {
		bad = append(bad, "no X-Hub-Signature-256")
	}
	if len(bad) == 0 {
		return ""
	}
	return "last envelope: " + strings.Join(bad, ", ")
}

// headerValues is every value of a NATS header under any letter case of its name (NATS headers are case-sensitive;
// the receiver publishes Go's canonical names, X-Github-Delivery).
func headerValues(h nats.Header, name string) []string {
	var out []string
	for k, v := range h {
		if strings.EqualFold(k, name) {
			out = append(out, v...)
		}
	}
	return out
}
