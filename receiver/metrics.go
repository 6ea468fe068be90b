package receiver

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/internal/promreg"
)

// Label values of dedupeworker_ingest_requests_total{outcome}: what a hook request was answered.
const (
	OutcomeAccepted         = "accepted"             // 202: verified (or verify: none) and stored
	OutcomeForwarded        = "forwarded_unverified" // 202: did not verify, stored with Ingest-Verified: false (on_invalid: forward)
	OutcomeRejected         = "rejected"             // 401: did not verify (on_invalid: reject)
	OutcomeNotFound         = "not_found"            // 404: not a hook path, an undeclared source, a tenant not served
	OutcomeMethodNotAllowed = "method_not_allowed"   // 405
	OutcomeTooLarge         = "too_large"            // 413: body over MaxBody, or refused for its size by NATS or the stream
	OutcomeHeadersTooLarge  = "headers_too_large"    // 431: over MaxHeaderBytes, net/http's own 431, or JetStream's 10097
	OutcomeBadRequest       = "bad_request"          // 400: invalid headers, or the body could not be read (the client went away)
	OutcomeIDConflict       = "id_conflict"          // 400: verified, but a header carries another id than the verified one
	OutcomeReplay           = "replay"               // 202, not published: a signed body already accepted under another id (replay guard)
	OutcomeBodyTimeout      = "body_timeout"         // 408: the body did not arrive within BodyTimeout
	OutcomeUnavailable      = "unavailable"          // 503: JetStream did not store the envelope (NATS down, no stream, refused)
	OutcomeUnconfirmed      = "unconfirmed"          // 503: no acknowledgement within PublishTimeout: it may have been stored
	OutcomeOverloaded       = "overloaded"           // 503: MaxInFlight deliveries were being published, or MaxBufferedBytes were held
)

const (
	otherSource  = "other" // the source label of an undeclared source
	metricPrefix = "dedupeworker_ingest_"
)

// Outcomes lists every outcome label value.
func Outcomes() []string {
	return []string{OutcomeAccepted, OutcomeForwarded, OutcomeRejected, OutcomeNotFound, OutcomeMethodNotAllowed,
		OutcomeTooLarge, OutcomeHeadersTooLarge, OutcomeBadRequest, OutcomeIDConflict, OutcomeReplay, OutcomeBodyTimeout,
		OutcomeUnavailable, OutcomeUnconfirmed, OutcomeOverloaded}
}

// Metrics holds the receiver's Prometheus collectors, all prefixed dedupeworker_ingest_; docs/receiver.md lists
// them, and each one's Help says what it counts. The source label is the source id when the source is declared
// and "other" otherwise (and for net/http's own 431, whose path is never read).
type Metrics struct {
	requests           *prometheus.CounterVec
	verifyFailures     *prometheus.CounterVec
	replays            *prometheus.CounterVec
	guardDuration      prometheus.Histogram
	guardUp            *prometheus.GaugeVec
	requestDuration    *prometheus.HistogramVec
	publishDuration    prometheus.Histogram
	inFlight           prometheus.Gauge
	inFlightLimit      prometheus.Gauge
	reading            prometheus.Gauge
	bufferedBytes      prometheus.Gauge
	bufferedBytesLimit prometheus.Gauge
}

// NewMetrics builds the collectors and registers them with reg (nil: not registered). A collector reg already
// holds (a second receiver in one process) is reused; any other registration error panics, as
// prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	gauge := func(name, help string) prometheus.Gauge {
		return promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: metricPrefix + name, Help: help}))
	}
	counters := func(name, help string, labels ...string) *prometheus.CounterVec {
		return promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricPrefix + name, Help: help}, labels))
	}
	// 250µs .. ~4s
	histogram := func(name, help string) prometheus.Histogram {
		return promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: metricPrefix + name, Help: help,
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 15)}))
	}
	return &Metrics{
		requests: counters("requests_total",
			"Webhook requests answered, by source and outcome ("+strings.Join(Outcomes(), ", ")+").", "source", "outcome"),
		verifyFailures: counters("verify_failures_total",
			"Webhook signatures that did not verify, by source and reason (missing, malformed, mismatch, timestamp), whether rejected or forwarded.", "source", "reason"),
		replays: counters("replays_total",
			"Verified webhook deliveries not published by the replay guard: a signed body already accepted under another id within the source's TTL.", "source"),
		guardDuration: histogram("replay_guard_duration_seconds", "Duration of the replay guard's claim of a signed body in the window (or its failure)."),
		guardUp: promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricPrefix + "replay_guard_up",
			Help: "1 when the replay guard's bucket answered the receiver's last readiness lookup and is the one it bound to, 0 when not (deliveries of guarded sources are answered 503). Only on a receiver with a guarded source.",
		}, []string{"bucket"})),
		requestDuration: promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricPrefix + "request_duration_seconds",
			Help:    "Duration of webhook requests from their headers to the answer (reading the body, verifying, publishing), by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 17), // 250µs .. ~16s
		}, []string{"outcome"})),
		publishDuration:    histogram("publish_duration_seconds", "Duration of publishes to the input stream until JetStream acknowledged them (or failed)."),
		inFlight:           gauge("in_flight", "Webhook deliveries being verified and published (their body is in)."),
		inFlightLimit:      gauge("in_flight_limit", "The most deliveries verified and published at once (DEDUPE_INGEST_MAX_IN_FLIGHT); more are answered 503."),
		reading:            gauge("reading", "Webhook requests reading their body."),
		bufferedBytes:      gauge("buffered_bytes", "Body bytes held by webhook requests, being read or published."),
		bufferedBytesLimit: gauge("buffered_bytes_limit", "The most body bytes held at once (DEDUPE_INGEST_MAX_BUFFERED_BYTES); a request past it is answered 503."),
	}
}

// initSources creates the series of every outcome of each label, so that dashboards show zeros from the start.
func (m *Metrics) initSources(labels []string) {
	for _, l := range labels {
		for _, o := range Outcomes() {
			m.requests.WithLabelValues(l, o)
		}
		m.replays.WithLabelValues(l)
	}
}
