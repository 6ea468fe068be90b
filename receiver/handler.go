package receiver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/keys"
)

// HookPrefix is the path under which deliveries are received: POST /hooks/<tenant>/<source>.
const HookPrefix = "/hooks/"

// Receiver is the webhook receiver. It is an http.Handler of
//
//	POST /hooks/<tenant>/<source>   a delivery (see the package documentation for the answers)
//	GET  /healthz                   200 while the process runs
//	GET  /readyz                    200 when deliveries can be stored (Ready), else 503 with the reason
//	GET  /metrics                   Config.Gatherer, when set
//
// and Serve runs it on a listener. It is safe for concurrent use.
type Receiver struct {
	cfg       Config
	log       *slog.Logger
	policy    *Policy
	metrics   *Metrics
	ownHeader int // what the receiver adds to a header block: Ingest-Verified, Nats-Expected-Stream
	// "<InputStream> seq " of 202 answers
	acceptedPrefix string
	slots          chan struct{} // one per delivery being verified and published, MaxInFlight at most
	buffered       byteBudget    // body bytes held, MaxBufferedBytes at most
	retryAfter     string        // Retry-After of 503 answers, in seconds
	promhttp       http.Handler  // nil without Config.Gatherer
	guarding       bool          // a source is guarded and Config.Window is set: readiness pings the window
	served         int           // sources served
	guarded        []string      // sources guarded
	guardUp        atomic.Bool   // the replay guard's window answered its last ping (it was bound at New)
	closing        atomic.Bool   // Serve is shutting down: not ready
	ready          readiness     // /readyz's last answer
	logs           throttle
}

// New validates cfg (after its defaults) and builds the Receiver. Errors start with "receiver: config: " and name
// the field.
func New(cfg Config) (*Receiver, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Receiver{
		cfg:     cfg,
		log:     cfg.Logger,
		policy:  cfg.Policy,
		metrics: cfg.Metrics,
		// The larger Ingest-Verified value, so that the size is known before the signature is checked.
		ownHeader:      headerBlockSize(contract.HeaderVerified, contract.VerifiedFalse) + headerBlockSize(jetstream.ExpectedStreamHeader, cfg.InputStream),
		acceptedPrefix: cfg.InputStream + " seq ",
		slots:          make(chan struct{}, cfg.MaxInFlight),
		buffered:       byteBudget{limit: cfg.MaxBufferedBytes, gauge: cfg.Metrics.bufferedBytes},
		retryAfter:     strconv.FormatInt(int64((cfg.RetryAfter+time.Second-1)/time.Second), 10),
		logs:           throttle{every: 10 * time.Second},
	}
	if cfg.Gatherer != nil {
		r.promhttp = promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})
	}
	g := cfg.Policy.Guarded()
	r.guarding = len(g) > 0 && cfg.Window != nil
	r.served, r.guarded = len(cfg.Policy.sources), g
	if r.guarding {
		r.guardUp.Store(true)
		r.metrics.guardUp.WithLabelValues(cfg.Window.Bucket()).Set(1)
	}
	if len(g) > 0 && cfg.Window == nil {
		r.log.Warn("replay guard off: no window given (Config.Window); a signed body can be published again under another id", "sources", g)
	}
	r.metrics.initSources(append(sortedKeys(cfg.Policy.declared), otherSource))
	r.metrics.inFlightLimit.Set(float64(cfg.MaxInFlight))
	r.metrics.bufferedBytesLimit.Set(float64(cfg.MaxBufferedBytes))
	return r, nil
}

// ServeHTTP answers one request.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch req.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		r.serveOps(w, req)
	default:
		start := time.Now()
		outcome := r.serveHook(w, req)
		r.metrics.requestDuration.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	}
}

// serveOps answers the operations routes. They are not counted as requests.
func (r *Receiver) serveOps(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		plain(w, http.StatusMethodNotAllowed, "method "+req.Method+" not allowed: GET")
		return
	}
	switch req.URL.Path {
	case "/healthz":
		plain(w, http.StatusOK, "ok")
	case "/readyz":
		err, gerr := r.readyCached(req.Context())
		if err != nil {
			plain(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		if gerr != nil {
			plain(w, http.StatusOK, "ready, but deliveries of guarded sources ("+strings.Join(r.guarded, ", ")+") are answered 503: "+gerr.Error())
			return
		}
		plain(w, http.StatusOK, "ready")
	case "/metrics":
		if r.promhttp == nil {
			plain(w, http.StatusNotFound, "not found")
			return
		}
		if r.guarding {
			// The replay guard's state is as fresh as the last lookup: a scrape makes one when it is over a second
			// old, so that the metric follows the window without a probe.
			_, _ = r.readyCached(req.Context())
		}
		r.promhttp.ServeHTTP(w, req)
	}
}

// hookPath splits /hooks/<tenant>/<source>; ok is false unless both are valid ids and nothing follows.
func hookPath(p string) (tenant, source string, ok bool) {
	rest, ok := strings.CutPrefix(p, HookPrefix)
	if !ok {
		return "", "", false
	}
	tenant, source, ok = strings.Cut(rest, "/")
	if !ok || !keys.ValidID(tenant) || !keys.ValidID(source) {
		return "", "", false
	}
	return tenant, source, true
}

// answer writes a one-line plain-text answer, counts it and returns its outcome.
func (r *Receiver) answer(w http.ResponseWriter, label, outcome string, status int, text string) string {
	r.metrics.requests.WithLabelValues(label, outcome).Inc()
	plain(w, status, text)
	return outcome
}

// answerBytes is answer of a text built in the caller's buffer (the 202 of every delivery: no allocation).
func (r *Receiver) answerBytes(w http.ResponseWriter, label, outcome string, status int, text []byte) string {
	r.metrics.requests.WithLabelValues(label, outcome).Inc()
	writePlain(w, status)
	_, _ = w.Write(append(text, '\n'))
	return outcome
}

// unavailable answers 503 with Retry-After: the provider's retry delivers it.
func (r *Receiver) unavailable(w http.ResponseWriter, label, outcome, text string) string {
	w.Header().Set("Retry-After", r.retryAfter)
	return r.answer(w, label, outcome, http.StatusServiceUnavailable, text)
}

func plain(w http.ResponseWriter, status int, text string) {
	writePlain(w, status)
	_, _ = io.WriteString(w, text)
	_, _ = io.WriteString(w, "\n")
}

// The values of plain answers' headers, shared by every answer (net/http only reads them; an Add would copy).
var (
	plainType    = []string{"text/plain; charset=utf-8"}
	plainNoSniff = []string{"nosniff"}
)

func writePlain(w http.ResponseWriter, status int) {
	h := w.Header()
	h["Content-Type"] = plainType
	h["X-Content-Type-Options"] = plainNoSniff
	w.WriteHeader(status)
}

// logSometimes logs at most one line per kind every 10 s, saying how many were left out since the last.
func (r *Receiver) logSometimes(level slog.Level, kind, msg string, args ...any) {
	ok, skipped := r.logs.allow(kind, time.Now())
	if !ok {
		return
	}
	if skipped > 0 {
		args = append(args, "suppressed", skipped)
	}
	r.log.Log(context.Background(), level, msg, args...)
}
