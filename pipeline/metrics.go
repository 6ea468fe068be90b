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

// Label values of dedupeworker_envelopes_total{outcome} and dedupeworker_naks_total{reason}.
const (
	OutcomeUnique     = "unique"
	OutcomeDuplicate  = "duplicate"
	OutcomeUnkeyed    = "unkeyed"
	OutcomeDeadLetter = "dead-letter"

	NakWindow          = "window-unavailable" // the window could not decide
	NakPublish         = "publish"            // the output stream did not take the event (full, unavailable, timeout)
	NakDeadLetter      = "dead-letter"        // the dead-letter stream did not take the dead letter
	NakShutdown        = "shutdown"           // pulled but not finished before shutdown
	NakHeld            = "held-too-long"      // held past the hold bound: publishing now could outlive the output's duplicate window
	NakHolderUndecided = "holder-undecided"   // a copy of an event whose claim holder has not published yet
	NakRecord          = "record-failed"      // published, but the publish could not be recorded in the claim

	AckRefused     = "refused"     // the server refused the ack (a permissions violation on $JS.ACK.>)
	AckError       = "error"       // the client could not send the ack (connection closed or lost)
	AckNoConsumer  = "no-consumer" // no consumer served the ack subject: the consumer (or its stream) was deleted
	AckUnconfirmed = "unconfirmed" // the server did not answer the ack in time (refused, lost, a slow leader)
)

// NewMetrics builds the collectors and registers them with reg (nil: not registered). A collector that reg already
// holds (a second pipeline in the same process) is reused; any other registration error panics, like
// prometheus.MustRegister.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := prometheus.ExponentialBuckets(0.00025, 2, 17) // 250µs .. ~16s: past the default 10s publish timeout
	return &Metrics{
		envelopes: promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedupeworker_envelopes_total",
			Help: "Envelopes finished (acknowledged), by source and outcome (unique, duplicate, unkeyed, dead-letter).",
		}, []string{"source", "outcome"})),
		unkeyed: promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedupeworker_unkeyed_total",
			Help: "Envelopes forwarded without a key, by source and reason.",
		}, []string{"source", "reason"})),
		claimDuration: promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dedupeworker_claim_duration_seconds",
			Help:    "Duration of window claims.",
			Buckets: buckets,
		})),
		publishDuration: promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dedupeworker_publish_duration_seconds",
			Help:    "Duration of publishes until JetStream acknowledged them.",
			Buckets: buckets,
		})),
		inFlight: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedupeworker_in_flight",
			Help: "Envelopes being processed.",
		})),
		windowErrors: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dedupeworker_window_errors_total",
			Help: "Claims that failed because the window could not be reached.",
		})),
		naks: promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedupeworker_naks_total",
			Help: "Envelopes handed back for redelivery, by reason.",
		}, []string{"reason"})),
		sourcesWithoutDedupe: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedupeworker_sources_without_dedupe",
			Help: "Declared sources whose deliveries are never deduplicated.",
		})),
		consumerPending: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedupeworker_consumer_pending",
			Help: "Envelopes in the input stream not yet delivered to the consumer.",
		})),
		ready: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedupeworker_ready",
			Help: "1 when the pipeline is connected, bound to its consumer, the window is reachable and publishes and acks succeed.",
		})),
		ackFailures: promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedupeworker_ack_failures_total",
			Help: "Acknowledgements that did not reach the consumer, by reason (refused: a permissions violation; error: not sent). Each such envelope is redelivered after the ack wait.",
		}, []string{"reason"})),
		stale: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dedupeworker_stale_deliveries_total",
			Help: "Deliveries skipped because a later delivery of the same envelope holds its claim (a replica that was paused or lost its pull).",
		})),
		streamMessages: promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedupeworker_stream_messages",
			Help: "Messages held by the input, output and dead-letter streams (refreshed by the status poll).",
		}, []string{"stream"})),
		possibleDuplicates: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dedupeworker_possible_duplicates_total",
			Help: "Events published as a possible second copy (header Dedupe-Possible-Duplicate: true): an earlier delivery of the envelope may have stored the event longer ago than the output's duplicate window.",
		})),
		dupWindow: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedupeworker_output_duplicate_window_seconds",
			Help: "The output stream's duplicate window, as read by the status poll.",
		})),
		dupWindowShort: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedupeworker_output_duplicate_window_short",
			Help: "1 when the ack wait and the hold bound do not fit inside the output stream's duplicate window.",
		})),
		inputDropped: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dedupeworker_input_dropped_total",
			Help: "Envelopes the input stream no longer holds that its consumer never delivered (its limits, or an operator's purge or consumer reset), as the status poll saw them (a lower bound; each replica counts what it sees; a replica started while others pull leaves a gap it finds to them).",
		})),
		streamBytes: promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedupeworker_stream_bytes",
			Help: "Bytes held by the input, output and dead-letter streams (refreshed by the status poll).",
		}, []string{"stream"})),
	}
}
