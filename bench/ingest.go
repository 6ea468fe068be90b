package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// modeIngest is the receiver comparison (-modes ingest, or -ingest): signed POSTs through `dedupeworker ingest`
// beside the same POSTs through a bare publishing handler (bare.go) and the same envelopes published straight to
// INGEST (ingestrun.go).
const modeIngest = "ingest"

// The receiver's settings in the ingest mode: one source, github, whose deliveries are checked with the GitHub
// scheme under ingestSecret. Its replay guard is off: every request of a run signs one body under its own id (a
// replay, to the guard); receiver's BenchmarkReplayGuard measures the guard.
const (
	ingestSource      = "github"
	ingestSecret      = "dedupebench: It's a Secret to Everybody"
	ingestSourcesYAML = "sources:\n  " + ingestSource + ": {dedupe: github, verify: {scheme: github, replay_guard: off}}\n"
)

// ingestSecretVar is the variable the receiver reads the source's secret from.
var ingestSecretVar = receiver.SecretEnv(ingestSource)

// Defaults of the ingest flags.
const (
	ingestDefaultN       = 20_000
	ingestQuickN         = 5_000
	ingestDefaultClients = 32
	maxIngestN           = 10_000_000
	maxIngestClients     = 4096
)

// The sides of the ingest comparison (and sideBare, bare.go).
const (
	sideReceiver = "receiver" // signed POSTs through dedupeworker ingest
	sideDirect   = "direct"   // synchronous JetStream publishes straight to INGEST
)

var ingestSides = []string{sideReceiver, sideBare, sideDirect}

// ingestOptions are the receiver comparison's flags: -ingest, -ingest-n, -ingest-clients.
type ingestOptions struct {
	ingest        bool
	ingestN       int
	ingestClients int
}

// register declares the ingest flags.
func (o *ingestOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.ingest, "ingest", false, "also run the receiver comparison, as if ingest were listed in -modes (without changing which other modes run): "+
		"signed POSTs through a dedupeworker ingest process beside the same envelopes published straight to INGEST, interleaved over -repeat rounds")
	fs.IntVar(&o.ingestN, "ingest-n", 0, fmt.Sprintf("ingest mode: requests (and direct publishes) per run (default %d; quick: %d)", ingestDefaultN, ingestQuickN))
	fs.IntVar(&o.ingestClients, "ingest-clients", ingestDefaultClients, fmt.Sprintf("ingest mode: concurrent HTTP clients (keep-alive, one connection each) "+
		"and concurrent synchronous publishers on the direct side (1-%d)", maxIngestClients))
}

// ingestDefaults completes the ingest options after parsing: -ingest adds the mode, -ingest-n gets its default
// (smaller with -quick), and both counts are checked. It reports a usage problem on stderr.
func (o *options) ingestDefaults(set map[string]bool, stderr io.Writer) error {
	if o.ingest && !slices.Contains(o.modes, modeIngest) {
		o.modes = append(o.modes, modeIngest)
	}
	if !set["ingest-n"] {
		o.ingestN = ingestDefaultN
		if o.quick {
			o.ingestN = ingestQuickN
		}
	}
	if o.ingestN < 1 || o.ingestN > maxIngestN {
		fmt.Fprintf(stderr, "dedupebench: -ingest-n: want 1 to %d requests, got %d\n", maxIngestN, o.ingestN)
		return errUsage
	}
	if o.ingestClients < 1 || o.ingestClients > maxIngestClients {
		fmt.Fprintf(stderr, "dedupebench: -ingest-clients: want 1 to %d clients, got %d\n", maxIngestClients, o.ingestClients)
		return errUsage
	}
	return nil
}

// githubSignature is the X-Hub-Signature-256 value GitHub sends with body: "sha256=" and the hex HMAC-SHA256 of
// the body under the webhook's secret.
func githubSignature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// deliveryID is the X-GitHub-Delivery of request i of run: GUID-shaped (36 characters, like GitHub's) and unique
// over every run of a bench, warm-ups included.
func deliveryID(run uint32, i int) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", run, uint64(i)&0xffffffffffff)
}

// ingestRequest is one delivery of the ingest mode, built before any timer starts: the body, its signature (GitHub
// signs the body only, so it does not depend on the delivery id) and the tenant and event it goes to.
type ingestRequest struct {
	tenant, event string
	body          []byte
	signature     string
}

// maxIngestBodies bounds the distinct deliveries built in advance (about 250 MiB of bodies and signatures for the
// corpus's 12 KiB average); longer runs cycle through them, each request still with a delivery id of its own.
const maxIngestBodies = 20_000

// ingestRequests builds the deliveries of a run of n requests from the workload's envelopes in order: the first
// min(n, envelopes, maxIngestBodies) of them, each one's tenant and body, all to the github source, signed under
// secret. Request i of a run is element i modulo their number.
func ingestRequests(w *Workload, n int, secret string) []ingestRequest {
	out := make([]ingestRequest, min(n, len(w.Envelopes), maxIngestBodies))
	for i := range out {
		e := &w.Events[w.Envelopes[i].Event]
		body := w.Body(i)
		out[i] = ingestRequest{tenant: e.Tenant, event: w.corpus.Names[e.Corpus], body: body, signature: githubSignature(secret, body)}
	}
	return out
}

// path is the request's hook route.
func (r *ingestRequest) path() string { return receiver.HookPrefix + r.tenant + "/" + ingestSource }

// subject is where the receiver publishes the request, and where the direct side publishes it.
func (r *ingestRequest) subject() string { return inputPrefix + "." + r.tenant + "." + ingestSource }

// httpHeader is the request's headers as GitHub sends them (less the legacy SHA-1 X-Hub-Signature; Go's client adds
// Content-Length and, with compression off, nothing else), with delivery id.
func (r *ingestRequest) httpHeader(delivery string) http.Header {
	h := make(http.Header, 9)
	h.Set("Accept", "*/*")
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/2b3f4c1")
	h.Set("X-GitHub-Event", r.event)
	h.Set("X-GitHub-Delivery", delivery)
	h.Set("X-GitHub-Hook-ID", "371299123")
	h.Set("X-GitHub-Hook-Installation-Target-ID", "79929171")
	h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
	h.Set("X-Hub-Signature-256", r.signature)
	return h
}

// natsHeader is what the receiver publishes for the request: its HTTP headers as the server sees them
// (Content-Length included) and Ingest-Verified: true. The direct side publishes exactly this, so that both sides
// store envelopes of the same size.
func (r *ingestRequest) natsHeader(delivery string) nats.Header {
	h := nats.Header(r.httpHeader(delivery))
	h.Set("Content-Length", strconv.Itoa(len(r.body)))
	h.Set(contract.HeaderVerified, "true")
	return h
}

// ingestEnv is the environment of the `dedupeworker ingest` process: the bench's own, less any DEDUPE_* it has,
// plus the receiver's settings. Its /metrics, /healthz and /readyz are on the ingest address; the worker's
// DEDUPE_HTTP_ADDR is left empty. With more clients than the receiver's default in-flight bound, the bound is
// raised to the client count, so that none is answered 503 for it.
func ingestEnv(url string, port, clients int) []string {
	env := append(environWithoutSettings(),
		"DEDUPE_NATS_URL="+url,
		"DEDUPE_INGEST_ADDR=127.0.0.1:"+strconv.Itoa(port),
		"DEDUPE_SOURCES="+ingestSourcesYAML,
		ingestSecretVar+"="+ingestSecret,
		"DEDUPE_HTTP_ADDR=",
		"DEDUPE_LOG_LEVEL=warn",
		"DEDUPE_LOG_FORMAT=json",
	)
	if clients > receiver.DefaultMaxInFlight {
		env = append(env, "DEDUPE_INGEST_MAX_IN_FLIGHT="+strconv.Itoa(clients))
	}
	return env
}

// ingestRun is one timed run of one side.
type ingestRun struct {
	side     string
	round    int // from 0
	requests int
	seconds  float64
	lat      Latency
	accepted int            // 202 answers (receiver) or acknowledged publishes (direct)
	errors   map[string]int // by kind: "503 Service Unavailable", "transport: …", "publish: …"

	stored      int    // INGEST's messages after the run
	storedBytes uint64 // and their bytes
	checkErr    string // what was wrong with the stored envelopes ("" when right)

	srvCPU, ingestCPU, benchCPU float64 // CPU seconds during the run: server, the side's HTTP process (none for direct), bench
}

// rate is requests per second.
func (r *ingestRun) rate() float64 {
	if r.seconds <= 0 {
		return 0
	}
	return float64(r.requests) / r.seconds
}

// failures is the number of requests that were not answered 202 (receiver) or acknowledged (direct).
func (r *ingestRun) failures() int {
	n := 0
	for _, c := range r.errors {
		n += c
	}
	return n
}

// problem says what is wrong with the run ("" when nothing): requests that failed, a stored count other than
// the requests, or a wrong stored envelope.
func (r *ingestRun) problem() string {
	var p []string
	if f := r.failures(); f > 0 {
		p = append(p, fmt.Sprintf("%d of %d requests failed (%s)", f, r.requests, formatCounts(r.errors)))
	}
	if r.stored != r.requests {
		p = append(p, fmt.Sprintf("%s holds %d envelopes after the run, expected %d (%d accepted)", inputStream, r.stored, r.requests, r.accepted))
	}
	if r.checkErr != "" {
		p = append(p, r.checkErr)
	}
	return strings.Join(p, "; ")
}

// formatCounts prints counts by kind, largest first: "503 Service Unavailable ×12, transport: EOF ×1".
func formatCounts(m map[string]int) string {
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(a, b int) bool {
		if m[kinds[a]] != m[kinds[b]] {
			return m[kinds[a]] > m[kinds[b]]
		}
		return kinds[a] < kinds[b]
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// ingestState is the ingest mode's progress and what its report needs.
type ingestState struct {
	runs       map[string][]*ingestRun // by side, in round order
	orders     [][]string              // sides in the order each round ran them
	runSeq     uint32                  // runs started (delivery ids), warm-ups included
	dials      int64                   // HTTP connections the receiver's clients opened, warm-up included
	ingestRSS  int64                   // the ingest process's peak RSS
	loadBefore string
	loadAfter  string
}

// ingestReport is what writeIngestReport prints.
type ingestReport struct {
	n, clients  int
	retention   inputRetention
	runs        map[string][]*ingestRun
	orders      [][]string
	dials       int64
	ingestRSS   int64
	load        string
	warmup      int
	maxInFlight int
}

// writeIngest prints the ingest mode's report (nothing when it did not run) and returns an error when a run
// failed a request or left INGEST with another count than its requests.
func (b *bench) writeIngest(out io.Writer) error {
	if len(b.ingest.runs) == 0 {
		return nil
	}
	s := &b.ingest
	return writeIngestReport(out, ingestReport{
		n: b.opts.ingestN, clients: b.opts.ingestClients, retention: b.opts.inputRetention, runs: s.runs, orders: s.orders,
		dials: s.dials, ingestRSS: s.ingestRSS, load: fmt.Sprintf("%s before, %s after", s.loadBefore, s.loadAfter),
		warmup: ingestWarmup(b.opts.ingestN, b.opts.ingestClients), maxInFlight: max(receiver.DefaultMaxInFlight, b.opts.ingestClients),
	})
}

// writeIngestReport prints, for each side, the median rate, every round's rate, the medians of the rounds' p50,
// p99 and max latency, the requests that failed, what INGEST held after each run, and the CPU per request of the
// server, the ingest process and the bench; then the receiver/direct ratios and any problem.
func writeIngestReport(out io.Writer, r ingestReport) error {
	fmt.Fprintln(out)
	fmt.Fprintf(out, "ingest: %s = signed POSTs (GitHub scheme, X-Hub-Signature-256) to a `dedupeworker ingest` process, each answered 202 once %s stored it; "+
		"%s = the same POSTs to a minimal net/http handler in its own process that reads the body and publishes it with the request's headers, "+
		"waiting for the PubAck (no verification, no filtering); "+
		"%s = the same bodies and headers (plus Ingest-Verified: true, as the receiver publishes them) as synchronous JetStream publishes straight to %s, "+
		"from the bench, on one connection\n", sideReceiver, inputStream, sideBare, sideDirect, inputStream)
	var ord []string
	for i, o := range r.orders {
		ord = append(ord, fmt.Sprintf("%d: %s", i+1, strings.Join(o, " ")))
	}
	rounds := len(r.runs[sideReceiver])
	fmt.Fprintf(out, "ingest: %d requests per run, %d concurrent HTTP clients (keep-alive; %d connections opened in all) / %d concurrent publishers; "+
		"receiver DEDUPE_INGEST_MAX_IN_FLIGHT %d; %d round(s), order by round: %s; an untimed warm-up of %d per side first; "+
		"%s: %s retention, purged after every run; load average %s\n",
		r.n, r.clients, r.dials, r.clients, r.maxInFlight, rounds, strings.Join(ord, "; "), r.warmup, inputStream, r.retention, r.load)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "path\trequests\tmedian req/s\treq/s by round\tp50 ms\tp99 ms\tmax ms\tfailed\tstored by round\tB/envelope\tsrv CPU µs/req\thandler CPU µs/req\tbench CPU µs/req\t\n")
	med := map[string]map[string]float64{}
	for _, side := range ingestSides {
		runs := r.runs[side]
		if len(runs) == 0 {
			continue
		}
		var rates, p50, p99, mx, srv, ing, bch, bpe []float64
		var rateTxt, stored []string
		failed := 0
		for _, x := range runs {
			rates = append(rates, x.rate())
			rateTxt = append(rateTxt, fmt.Sprintf("%.0f", x.rate()))
			p50 = append(p50, msf(x.lat.P50))
			p99 = append(p99, msf(x.lat.P99))
			mx = append(mx, msf(x.lat.Max))
			per := 1e6 / float64(max(x.requests, 1))
			srv, ing, bch = append(srv, x.srvCPU*per), append(ing, x.ingestCPU*per), append(bch, x.benchCPU*per)
			if x.stored > 0 {
				bpe = append(bpe, float64(x.storedBytes)/float64(x.stored))
			}
			stored = append(stored, strconv.Itoa(x.stored))
			failed += x.failures()
		}
		m := map[string]float64{"rate": medianOf(rates), "p50": medianOf(p50), "p99": medianOf(p99), "max": medianOf(mx),
			"srv": medianOf(srv), "handler": medianOf(ing)}
		med[side] = m
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%.2f\t%.2f\t%.2f\t%d\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t\n", side, r.n, m["rate"], strings.Join(rateTxt, ", "),
			m["p50"], m["p99"], m["max"], failed, strings.Join(stored, ", "), medianOf(bpe), medianOf(srv), medianOf(ing), medianOf(bch))
	}
	_ = tw.Flush()
	ratio := func(a, b string) (float64, string) {
		var rs []string
		for i, x := range r.runs[a] {
			if d := r.runs[b]; i < len(d) && d[i].rate() > 0 {
				rs = append(rs, fmt.Sprintf("%.2f", x.rate()/d[i].rate()))
			}
		}
		return med[a]["rate"] / med[b]["rate"], strings.Join(rs, ", ")
	}
	if rc, dc := med[sideReceiver], med[sideDirect]; rc != nil && dc != nil && dc["rate"] > 0 {
		q, by := ratio(sideReceiver, sideDirect)
		fmt.Fprintf(out, "ingest: receiver/direct throughput %.2f (round by round: %s); latency p50 %.2f vs %.2f ms (%+.2f), p99 %.2f vs %.2f ms (%+.2f)",
			q, by, rc["p50"], dc["p50"], rc["p50"]-dc["p50"], rc["p99"], dc["p99"], rc["p99"]-dc["p99"])
		if r.ingestRSS > 0 {
			fmt.Fprintf(out, "; ingest process peak RSS %s MiB", mib(r.ingestRSS))
		}
		fmt.Fprintln(out)
	}
	if rc, bc := med[sideReceiver], med[sideBare]; rc != nil && bc != nil && bc["rate"] > 0 {
		q, by := ratio(sideReceiver, sideBare)
		fmt.Fprintf(out, "ingest: receiver/bare throughput %.2f (round by round: %s; target >= 0.80); latency p50 %.2f vs %.2f ms (%+.2f), p99 %.2f vs %.2f ms (%+.2f); "+
			"handler CPU µs/req receiver %.0f vs bare %.0f (%+.0f), server %.0f vs %.0f\n",
			q, by, rc["p50"], bc["p50"], rc["p50"]-bc["p50"], rc["p99"], bc["p99"], rc["p99"]-bc["p99"],
			rc["handler"], bc["handler"], rc["handler"]-bc["handler"], rc["srv"], bc["srv"])
	}
	var problems []string
	for _, side := range ingestSides {
		for _, x := range r.runs[side] {
			if p := x.problem(); p != "" {
				problems = append(problems, fmt.Sprintf("MISMATCH: ingest %s round %d: %s", side, x.round+1, p))
			}
		}
	}
	for _, p := range problems {
		fmt.Fprintln(out, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d ingest run(s) failed requests or stored the wrong number of envelopes", len(problems))
	}
	return nil
}

// msf is a duration in milliseconds.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
