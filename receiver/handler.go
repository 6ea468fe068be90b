package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// HookPrefix is the path under which deliveries are received: POST /hooks/<tenant>/<source>.
const HookPrefix = "/hooks/"

// Receiver is the webhook receiver. It is an http.Handler of
//
//	POST /hooks/<tenant>/<source>   a delivery (see the package documentation for the answers)
//	GET  /healthz                   200 while the process runs
//	GET  /readyz                    200 when the input stream can be looked up (Ready), else 503 with the reason
//	GET  /metrics                   Config.Gatherer, when set
//
// and Serve runs it on a listener. It is safe for concurrent use.
type Receiver struct {
	cfg        Config
	log        *slog.Logger
	policy     *Policy
	metrics    *Metrics
	subject    string        // "<InputPrefix>."
	slots      chan struct{} // one per request being handled, MaxInFlight at most
	retryAfter string        // Retry-After of 503 answers, in seconds
	promhttp   http.Handler  // nil without Config.Gatherer
	closing    atomic.Bool   // Serve is shutting down: not ready
	logs       throttle
}

// New validates cfg (after its defaults) and builds the Receiver. Errors start with "receiver: config: " and name
// the field.
func New(cfg Config) (*Receiver, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Receiver{
		cfg:        cfg,
		log:        cfg.Logger,
		policy:     cfg.Policy,
		metrics:    cfg.Metrics,
		subject:    cfg.InputPrefix + ".",
		slots:      make(chan struct{}, cfg.MaxInFlight),
		retryAfter: strconv.FormatInt(int64((cfg.RetryAfter+time.Second-1)/time.Second), 10),
		logs:       throttle{every: 10 * time.Second},
	}
	if cfg.Gatherer != nil {
		r.promhttp = promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})
	}
	r.metrics.initSources(sortedLabels(cfg.Policy.declared))
	return r, nil
}

// ServeHTTP answers one request.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch req.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		r.serveOps(w, req)
	default:
		r.serveHook(w, req)
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
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		if err := r.Ready(ctx); err != nil {
			plain(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		plain(w, http.StatusOK, "ready")
	case "/metrics":
		if r.promhttp == nil {
			plain(w, http.StatusNotFound, "not found")
			return
		}
		r.promhttp.ServeHTTP(w, req)
	}
}

// Ready reports whether deliveries can be stored: the input stream can be looked up (NATS is connected, JetStream
// answers, the stream exists) and Serve is not shutting down.
func (r *Receiver) Ready(ctx context.Context) error {
	if r.closing.Load() {
		return errors.New("receiver: shutting down")
	}
	if _, err := r.cfg.JetStream.Stream(ctx, r.cfg.InputStream); err != nil {
		return fmt.Errorf("receiver: input stream %s: %w", r.cfg.InputStream, err)
	}
	return nil
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

// serveHook handles a delivery. The checks go from the cheapest to the dearest: path and source, method, declared
// sizes, a slot, the body, the signature, the publish.
func (r *Receiver) serveHook(w http.ResponseWriter, req *http.Request) {
	tenant, source, ok := hookPath(req.URL.Path)
	if !ok {
		r.answer(w, otherSource, OutcomeNotFound, http.StatusNotFound, "not found: deliveries go to POST "+HookPrefix+"<tenant>/<source>")
		return
	}
	label := r.policy.label(source)
	sp, verifier := r.policy.lookup(tenant, source)
	if sp == nil {
		r.answer(w, label, OutcomeNotFound, http.StatusNotFound, "not found: no such tenant or source")
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.answer(w, label, OutcomeMethodNotAllowed, http.StatusMethodNotAllowed, "method "+req.Method+" not allowed: POST")
		return
	}
	if req.ContentLength > r.cfg.MaxBody {
		r.answer(w, label, OutcomeTooLarge, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("body of %d bytes is larger than %d bytes", req.ContentLength, r.cfg.MaxBody))
		return
	}
	hdr, size, err := envelopeHeader(req.Header)
	if err != nil {
		r.answer(w, label, OutcomeBadRequest, http.StatusBadRequest, "invalid headers: "+err.Error())
		return
	}
	if size > r.cfg.MaxHeaderBytes {
		r.answer(w, label, OutcomeHeadersTooLarge, http.StatusRequestHeaderFieldsTooLarge,
			fmt.Sprintf("headers of %d bytes are larger than %d bytes", size, r.cfg.MaxHeaderBytes))
		return
	}
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	default:
		r.unavailable(w, label, OutcomeOverloaded, fmt.Sprintf("busy: %d requests are being handled; retry later", r.cfg.MaxInFlight))
		return
	}
	r.metrics.inFlight.Inc()
	defer r.metrics.inFlight.Dec()

	body, err := readBody(w, req, r.cfg.MaxBody)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			r.answer(w, label, OutcomeTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", r.cfg.MaxBody))
			return
		}
		r.answer(w, label, OutcomeBadRequest, http.StatusBadRequest, "could not read the body: "+err.Error())
		return
	}

	verr := verifier.Verify(req.Header, body)
	if verr != nil {
		reason := verify.Reason(verr)
		r.metrics.verifyFailures.WithLabelValues(label, reason).Inc()
		if !sp.forward {
			r.logSometimes(slog.LevelInfo, "rejected:"+label, "delivery rejected: signature does not verify",
				"tenant", tenant, "source", source, "reason", reason, "err", verr, "remote", req.RemoteAddr)
			w.Header().Set("WWW-Authenticate", "Signature")
			r.answer(w, label, OutcomeRejected, http.StatusUnauthorized, "signature does not verify: "+verr.Error())
			return
		}
	}
	setVerified(hdr, verr == nil)

	subject := r.subject + tenant + "." + source
	seq, err := r.publish(req.Context(), subject, hdr, body)
	if err != nil {
		r.publishFailed(w, label, subject, err)
		return
	}
	if verr != nil {
		r.logSometimes(slog.LevelInfo, "forwarded:"+label, "delivery forwarded unverified: signature does not verify (on_invalid: forward)",
			"tenant", tenant, "source", source, "reason", verify.Reason(verr), "err", verr, "remote", req.RemoteAddr, "seq", seq)
		r.answer(w, label, OutcomeForwarded, http.StatusAccepted,
			fmt.Sprintf("accepted unverified: %s seq %d: %v", r.cfg.InputStream, seq, verr))
		return
	}
	r.answer(w, label, OutcomeAccepted, http.StatusAccepted, fmt.Sprintf("accepted: %s seq %d", r.cfg.InputStream, seq))
}

// readBody reads the whole body, at most limit bytes (*http.MaxBytesError past it).
func readBody(w http.ResponseWriter, req *http.Request, limit int64) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	rd := http.MaxBytesReader(w, req.Body, limit)
	if n := req.ContentLength; n >= 0 && n <= 64<<10 {
		// Content-Length says how much there is (net/http never reads past it): one allocation of the right size.
		// A larger one is not trusted with an allocation before its bytes have arrived.
		buf := make([]byte, n)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return io.ReadAll(rd)
}

// answer writes a one-line plain-text answer and counts it.
func (r *Receiver) answer(w http.ResponseWriter, label, outcome string, status int, text string) {
	r.metrics.requests.WithLabelValues(label, outcome).Inc()
	plain(w, status, text)
}

// unavailable answers 503 with Retry-After: nothing was stored, the provider's retry delivers it.
func (r *Receiver) unavailable(w http.ResponseWriter, label, outcome, text string) {
	w.Header().Set("Retry-After", r.retryAfter)
	r.answer(w, label, outcome, http.StatusServiceUnavailable, text)
}

func plain(w http.ResponseWriter, status int, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text+"\n")
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

// sortedLabels is the label set of the metrics: every declared source, and "other".
func sortedLabels(declared map[string]bool) []string {
	out := make([]string, 0, len(declared)+1)
	for id := range declared {
		out = append(out, id)
	}
	sort.Strings(out)
	return append(out, otherSource)
}
