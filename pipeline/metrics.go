package pipeline

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/internal/promreg"
)

// Metrics holds the pipeline's Prometheus collectors (names in docs/reference.md, all prefixed dedupeworker_).
type Metrics struct {
	envelopes            *prometheus.CounterVec
	unkeyed              *prometheus.CounterVec
	claimDuration        prometheus.Histogram
	publishDuration      prometheus.Histogram
	inFlight             prometheus.Gauge
	windowErrors         prometheus.Counter
	naks                 *prometheus.CounterVec
	sourcesWithoutDedupe prometheus.Gauge
	consumerPending      prometheus.Gauge
	ready                prometheus.Gauge
	ackFailures          *prometheus.CounterVec
	stale                prometheus.Counter
	streamMessages       *prometheus.GaugeVec
	streamBytes          *prometheus.GaugeVec
	possibleDuplicates   prometheus.Counter
	dupWindow            prometheus.Gauge
	dupWindowShort       prometheus.Gauge
	inputDropped         prometheus.Counter
}

// Label values of dedupeworker_ack_failures_total{reason}; those of dedupeworker_envelopes_total{outcome} and
// dedupeworker_naks_total{reason} are the names of protocol.Count and protocol.NakReason.
const (
	AckRefused     = "refused"     // the server refused the ack (a permissions violation on $JS.ACK.>)
	AckError       = "error"       // the client could not send the ack (connection closed or lost)
	AckNoConsumer  = "no-consumer" // no consumer served the ack subject: the consumer (or its stream) was deleted
	AckUnconfirmed = "unconfirmed" // the server did not answer the ack in time (refused, lost, a slow leader)
)

// NewMetrics builds the collectors and registers them with reg (nil: not registered). A collector that reg already
// holds (a second pipeline in the same process) is reused; any other registration error panics, like
// prometheus.MustRegister.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
	}
	gauge := func(name, help string) prometheus.Gauge {
		return promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
	}
	gaugeVec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
	}
	histogram := func(name, help string) prometheus.Histogram {
		return promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help,
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 17)})) // 250µs .. ~16s: past the default 10s publish timeout
	}
	return &Metrics{
		envelopes: counterVec("dedupeworker_envelopes_total",
			"Envelopes finished (acknowledged), by source and outcome (unique, duplicate, unkeyed, dead-letter).", "source", "outcome"),
		unkeyed:         counterVec("dedupeworker_unkeyed_total", "Envelopes forwarded without a key, by source and reason.", "source", "reason"),
		claimDuration:   histogram("dedupeworker_claim_duration_seconds", "Duration of window claims."),
		publishDuration: histogram("dedupeworker_publish_duration_seconds", "Duration of publishes until JetStream acknowledged them."),
		inFlight:        gauge("dedupeworker_in_flight", "Envelopes being processed."),
		windowErrors:    counter("dedupeworker_window_errors_total", "Claims that failed because the window could not be reached."),
		naks:            counterVec("dedupeworker_naks_total", "Envelopes handed back for redelivery, by reason.", "reason"),
		sourcesWithoutDedupe: gauge("dedupeworker_sources_without_dedupe",
			"Declared sources whose deliveries are never deduplicated."),
		consumerPending: gauge("dedupeworker_consumer_pending", "Envelopes in the input stream not yet delivered to the consumer."),
		ready: gauge("dedupeworker_ready",
			"1 when the pipeline is connected, bound to its consumer, the window is reachable and publishes and acks succeed."),
		ackFailures: counterVec("dedupeworker_ack_failures_total",
			"Acknowledgements that did not reach the consumer, by reason (refused: a permissions violation; error: not sent). Each such envelope is redelivered after the ack wait.",
			"reason"),
		stale: counter("dedupeworker_stale_deliveries_total",
			"Deliveries skipped because a later delivery of the same envelope holds its claim (a replica that was paused or lost its pull)."),
		streamMessages: gaugeVec("dedupeworker_stream_messages",
			"Messages held by the input, output and dead-letter streams (refreshed by the status poll).", "stream"),
		possibleDuplicates: counter("dedupeworker_possible_duplicates_total",
			"Events published as a possible second copy (header Dedupe-Possible-Duplicate: true): an earlier delivery of the envelope may have stored the event longer ago than the output's duplicate window."),
		dupWindow: gauge("dedupeworker_output_duplicate_window_seconds", "The output stream's duplicate window, as read by the status poll."),
		dupWindowShort: gauge("dedupeworker_output_duplicate_window_short",
			"1 when the ack wait and the hold bound do not fit inside the output stream's duplicate window."),
		inputDropped: counter("dedupeworker_input_dropped_total",
			"Envelopes the input stream no longer holds that its consumer never delivered (its limits, or an operator's purge or consumer reset), as the status poll saw them (a lower bound; each replica counts what it sees; a replica started while others pull leaves a gap it finds to them)."),
		streamBytes: gaugeVec("dedupeworker_stream_bytes",
			"Bytes held by the input, output and dead-letter streams (refreshed by the status poll).", "stream"),
	}
}
