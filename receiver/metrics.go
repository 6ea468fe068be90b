package receiver

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values of dedupeworker_ingest_requests_total{outcome}: what a hook request was answered.
const (
	OutcomeAccepted         = "accepted"             // 202: verified (or verify: none) and stored
	OutcomeForwarded        = "forwarded_unverified" // 202: did not verify, stored with Ingest-Verified: false (on_invalid: forward)
	OutcomeRejected         = "rejected"             // 401: did not verify (on_invalid: reject)
	OutcomeNotFound         = "not_found"            // 404: not a hook path, an undeclared source, a tenant not served
	OutcomeMethodNotAllowed = "method_not_allowed"   // 405
	OutcomeTooLarge         = "too_large"            // 413: body over MaxBody, or refused for its size by NATS or the stream
	OutcomeHeadersTooLarge  = "headers_too_large"    // 431
	OutcomeBadRequest       = "bad_request"          // 400: the body could not be read (the client went away, a timeout)
	OutcomeUnavailable      = "unavailable"          // 503: JetStream did not store the envelope
	OutcomeOverloaded       = "overloaded"           // 503: MaxInFlight requests were being handled
)

const (
	otherSource  = "other" // the source label of an undeclared source
	metricPrefix = "dedupeworker_ingest_"
)

// Outcomes lists every outcome label value.
func Outcomes() []string {
	return []string{OutcomeAccepted, OutcomeForwarded, OutcomeRejected, OutcomeNotFound, OutcomeMethodNotAllowed,
		OutcomeTooLarge, OutcomeHeadersTooLarge, OutcomeBadRequest, OutcomeUnavailable, OutcomeOverloaded}
}

// Metrics holds the receiver's Prometheus collectors, all prefixed dedupeworker_ingest_:
//
//	dedupeworker_ingest_requests_total{source,outcome}        counter    hook requests by answer (Outcomes)
//	dedupeworker_ingest_verify_failures_total{source,reason}  counter    signatures that did not verify, by
//	                                                                     verify.Reason (missing, malformed,
//	                                                                     mismatch, timestamp), rejected or forwarded
//	dedupeworker_ingest_publish_duration_seconds              histogram  publish until JetStream's acknowledgement
//	dedupeworker_ingest_in_flight                             gauge      hook requests being handled
//
// The source label is the source id when the source is declared and "other" otherwise.
type Metrics struct {
	requests        *prometheus.CounterVec
	verifyFailures  *prometheus.CounterVec
	publishDuration prometheus.Histogram
	inFlight        prometheus.Gauge
}

// NewMetrics builds the collectors and registers them with reg (nil: not registered). A collector reg already
// holds (a second receiver in one process) is reused; any other registration error panics, as
// prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "requests_total",
			Help: "Webhook requests answered, by source and outcome (accepted, forwarded_unverified, rejected, not_found, method_not_allowed, too_large, headers_too_large, bad_request, unavailable, overloaded).",
		}, []string{"source", "outcome"})),
		verifyFailures: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "verify_failures_total",
			Help: "Webhook signatures that did not verify, by source and reason (missing, malformed, mismatch, timestamp), whether rejected or forwarded.",
		}, []string{"source", "reason"})),
		publishDuration: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    metricPrefix + "publish_duration_seconds",
			Help:    "Duration of publishes to the input stream until JetStream acknowledged them (or failed).",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 15), // 250µs .. ~4s
		})),
		inFlight: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricPrefix + "in_flight",
			Help: "Webhook requests being handled (reading the body, verifying, publishing).",
		})),
	}
}

// initSources creates the series of every outcome of each label, so that dashboards show zeros from the start.
func (m *Metrics) initSources(labels []string) {
	for _, l := range labels {
		for _, o := range Outcomes() {
			m.requests.WithLabelValues(l, o)
		}
	}
}

func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
