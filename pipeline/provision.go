package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/jserr"
)

// ErrIncompatible is wrapped by provisioning's errors (Config.Provision) about an existing stream or consumer that
// cannot serve the pipeline (checkConsumer). Provisioning changes nothing that exists but a consumer's MaxAckPending
// when Config sets one: fix it, or delete it and let provisioning create it. A running pipeline refuses to bind
// such a consumer too, and is not ready.
var ErrIncompatible = errors.New("pipeline: existing stream or consumer is incompatible")

// ErrConsumerStart is wrapped by provisioning's error when the consumer is missing and the input stream keeps
// processed envelopes (not work-queue): creating it would deliver them again and republish every event whose claim
// is still live. Config.ConsumerStart says where to start, only when the pipeline starts (decideStart): a consumer
// deleted under a running pipeline leaves it unready with this error until a restart with the setting up to date.
var ErrConsumerStart = errors.New("pipeline: consumer start needed")

// provision creates what the pipeline needs and is missing: the input, output and dead-letter streams (file
// storage, cfg.Replicas) and the durable pull consumer on the input stream. Existing streams and consumers are
// never changed but for a consumer's MaxAckPending when cfg sets it: one that cannot work is an error wrapping
// ErrIncompatible, one that works but differs from what it would create is logged at warn. cfg is valid, with its
// defaults (New); recreate says the running worker found something missing (decideStart). It returns the creation
// time of the consumer it checked or created.
//
// What it creates:
//   - InputStream: subjects "<InputPrefix>.>", work-queue retention: the stream never keeps what was processed, and
//     a consumer created again delivers only what was not.
//   - OutputStream: subjects "<OutputPrefix>.>" (and "<DuplicatesPrefix>.>" when set), duplicate window
//     OutputDuplicates, so that republishing one envelope collapses into one message; age limit OutputMaxAge.
//   - DLQStream: subjects "<DLQPrefix>.>", the output's duplicate window (at most DLQMaxAge), so that the dead
//     letter of a redelivery collapses into the first as the event does; age limit DLQMaxAge.
//   - Consumer: durable, pull, explicit ack, MaxDeliver unlimited, AckWait, ConsumerMaxAckPending, filtered only
//     when the stream stores subjects outside "<InputPrefix>.>", starting as decideStart says.
func provision(ctx context.Context, cfg Config, recreate bool) (provisioned, error) {
	js := cfg.JetStream
	input, output, err := ensureStreams(ctx, js, cfg)
	if err != nil {
		return provisioned{}, err
	}
	consumer, err := ensureConsumer(ctx, js, cfg, input, recreate)
	return provisioned{consumer: consumer, output: output.Created}, err
}

// provisioned is when what provision found or created was created: the consumer (its warnings are logged) and the
// output stream (a new one has forgotten the Nats-Msg-Ids of the one before: dupWindowReach).
type provisioned struct{ consumer, output time.Time }

// ensureStreams creates the missing input, output and dead-letter streams and checks those that exist; it returns
// the input and output streams' info.
func ensureStreams(ctx context.Context, js jetstream.JetStream, cfg Config) (input, output *jetstream.StreamInfo, err error) {
	log := cfg.Logger
	outSubjects := []string{contract.All(cfg.OutputPrefix)}
	outNeeds := []string{cfg.OutputPrefix + ".*.*"}
	if cfg.DuplicatesPrefix != "" {
		outSubjects = append(outSubjects, contract.All(cfg.DuplicatesPrefix))
		outNeeds = append(outNeeds, cfg.DuplicatesPrefix+".*.*")
	}
	streams := []struct {
		cfg   jetstream.StreamConfig
		needs []string
		short string // the warning when its duplicate window is shorter than the ack wait ("": none)
	}{
		{jetstream.StreamConfig{
			Name:        cfg.InputStream,
			Description: "dedupeworker: raw webhook deliveries",
			Subjects:    []string{contract.All(cfg.InputPrefix)},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
		}, []string{cfg.InputPrefix + ".*.*"}, ""},
		{jetstream.StreamConfig{
			Name:        cfg.OutputStream,
			Description: "dedupeworker: unique events",
			Subjects:    outSubjects,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			Duplicates:  cfg.OutputDuplicates,
			MaxAge:      cfg.OutputMaxAge,
		}, outNeeds, "pipeline: output stream's duplicate window is shorter than the ack wait: a republish after a lost " +
			"ack may not collapse"},
		{jetstream.StreamConfig{
			Name:        cfg.DLQStream,
			Description: "dedupeworker: envelopes that can never be processed",
			Subjects:    []string{contract.All(cfg.DLQPrefix)},
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			Duplicates:  min(cfg.OutputDuplicates, cfg.DLQMaxAge), // the server refuses a window over the age limit
			MaxAge:      cfg.DLQMaxAge,
		}, []string{cfg.DLQPrefix + ".*"}, "pipeline: dead-letter stream's duplicate window is shorter than the ack " +
			"wait: the redelivery of an envelope whose ack was lost after its dead letter may store a second dead letter " +
			"(nats stream edit " + cfg.DLQStream + " --dupe-window=…)"},
	}
	for _, s := range streams {
		info, err := ensureStream(ctx, js, log, s.cfg)
		if err != nil {
			return nil, nil, err
		}
		switch info.Config.Name {
		case cfg.InputStream:
			input = info
		case cfg.OutputStream:
			output = info
		}
		for _, need := range s.needs {
			if !coveredBy(need, info.Config.Subjects) {
				return nil, nil, fmt.Errorf("%w: stream %s has subjects %q, which do not capture %s",
					ErrIncompatible, info.Config.Name, info.Config.Subjects, need)
			}
		}
		if s.short != "" && info.Config.Duplicates < cfg.AckWait {
			log.Warn(s.short, "stream", info.Config.Name, "duplicates", info.Config.Duplicates, "ack_wait", cfg.AckWait)
		}
	}
	return input, output, nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, log *slog.Logger, want jetstream.StreamConfig) (*jetstream.StreamInfo, error) {
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, want)
		if err == nil {
			log.Info("pipeline: created stream", "stream", want.Name, "subjects", want.Subjects, "replicas", want.Replicas)
			return s.CachedInfo(), nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			if jserr.NoPlacement(err) {
				err = &jserr.PlacementError{What: "stream " + want.Name, Replicas: want.Replicas, Err: err}
			}
			return nil, fmt.Errorf("pipeline: create stream %s: %w", want.Name, err)
		}
		s, err = js.Stream(ctx, want.Name) // another replica created it first
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: stream %s: %w", want.Name, err)
	}
	return s.CachedInfo(), nil
}

func ensureConsumer(ctx context.Context, js jetstream.JetStream, cfg Config, input *jetstream.StreamInfo, recreate bool) (time.Time, error) {
	want := jetstream.ConsumerConfig{
		Durable:       cfg.Consumer,
		Description:   "dedupeworker: consume, key, claim, republish, ack",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: ConsumerMaxAckPending(cfg),
		Replicas:      cfg.Replicas,
	}
	// A filter equal to the stream's own subjects adds nothing, and nats-server 2.15.2's filtered consumers never
	// deliver some subjects the stream stores (a token holding byte 0x7f): such envelopes would be stuck.
	if subj := input.Config.Subjects; len(subj) != 1 || subj[0] != contract.All(cfg.InputPrefix) {
		want.FilterSubject = contract.All(cfg.InputPrefix)
	}
	c, err := js.Consumer(ctx, cfg.InputStream, cfg.Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		if err := startFrom(&want, cfg, input, recreate); err != nil {
			return time.Time{}, err
		}
		c, err = js.CreateConsumer(ctx, cfg.InputStream, want)
		if err == nil {
			cfg.Logger.Info("pipeline: created consumer", "stream", cfg.InputStream, "consumer", cfg.Consumer,
				"ack_wait", want.AckWait, "max_ack_pending", want.MaxAckPending, "deliver", want.DeliverPolicy.String(),
				"filter", want.FilterSubject)
			return c.CachedInfo().Created, nil
		}
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			if jserr.WorkQueueTaken(err) {
				return time.Time{}, workQueueConflict(ctx, js, cfg, err)
			}
			if jserr.NoPlacement(err) {
				err = &jserr.PlacementError{What: "consumer " + cfg.InputStream + " > " + cfg.Consumer,
					Replicas: want.Replicas, Err: err}
			}
			return time.Time{}, fmt.Errorf("pipeline: create consumer %s > %s: %w", cfg.InputStream, cfg.Consumer, err)
		}
		c, err = js.Consumer(ctx, cfg.InputStream, cfg.Consumer)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("pipeline: consumer %s > %s: %w", cfg.InputStream, cfg.Consumer, err)
	}
	info := c.CachedInfo()
	got := info.Config
	if _, err := checkConsumer(cfg, got); err != nil {
		return time.Time{}, err
	}
	if old := got.MaxAckPending; cfg.MaxAckPending > 0 && old != cfg.MaxAckPending {
		// The one field the worker changes on an existing consumer, when told to: a fleet that grew needs it.
		got.MaxAckPending = cfg.MaxAckPending
		if _, err := js.UpdateConsumer(ctx, cfg.InputStream, got); err != nil {
			return time.Time{}, fmt.Errorf("pipeline: consumer %s > %s: update MaxAckPending %d -> %d: %w",
				cfg.InputStream, cfg.Consumer, old, cfg.MaxAckPending, err)
		}
		cfg.Logger.Info("pipeline: consumer MaxAckPending updated", "stream", cfg.InputStream, "consumer", cfg.Consumer,
			"from", old, "to", cfg.MaxAckPending)
	}
	warns, _ := checkConsumer(cfg, got)
	if input.Config.Retention != jetstream.WorkQueuePolicy {
		warns = append(warns, consumerWarning{"is on a stream that keeps processed envelopes: should the consumer ever be deleted, " +
			"creating it again needs DEDUPE_CONSUMER_START and a restart", []any{"retention", input.Config.Retention.String()}})
	}
	logConsumerWarnings(cfg, warns)
	return info.Created, nil
}

// consumerWarning is something about an existing consumer that works but deserves an operator's attention.
type consumerWarning struct {
	msg  string
	args []any
}

func logConsumerWarnings(cfg Config, warns []consumerWarning) {
	for _, w := range warns {
		cfg.Logger.Warn("pipeline: consumer "+w.msg, append([]any{"stream", cfg.InputStream, "consumer", cfg.Consumer}, w.args...)...)
	}
}

// checkConsumer decides whether an existing consumer (got) can serve the pipeline — err, wrapping ErrIncompatible,
// for a push consumer, acks other than explicit, headers only, or a filter leaving out some tenants or sources —
// and what works but is worth a warning. Provision checks the consumer it finds, the consume loop every one it binds.
func checkConsumer(cfg Config, got jetstream.ConsumerConfig) ([]consumerWarning, error) {
	where := cfg.InputStream + " > " + cfg.Consumer
	if got.DeliverSubject != "" {
		return nil, fmt.Errorf("%w: consumer %s is a push consumer; it must be a pull consumer", ErrIncompatible, where)
	}
	if got.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("%w: consumer %s has ack policy %s; it must be explicit", ErrIncompatible, where, got.AckPolicy)
	}
	if got.HeadersOnly {
		return nil, fmt.Errorf("%w: consumer %s delivers headers only: the envelopes' bodies would be lost (events "+
			"published empty, the envelopes acknowledged and gone); unset it (nats consumer edit) or delete the consumer and "+
			"let the worker create it (DEDUPE_PROVISION=true)", ErrIncompatible, where)
	}
	filters := filtersOf(got)
	if need := cfg.InputPrefix + ".*.*"; len(filters) > 0 && !coveredBy(need, filters) {
		return nil, fmt.Errorf("%w: consumer %s filters on %s, which does not cover %s: envelopes of the other tenants or "+
			"sources would never be delivered and, in a work-queue stream, would stay there for ever; remove the filter "+
			"(nats consumer edit %s %s) or delete the consumer and let the worker create it (DEDUPE_PROVISION=true)",
			ErrIncompatible, where, quoteAll(filters), need, cfg.InputStream, cfg.Consumer)
	}
	var warns []consumerWarning
	warn := func(msg string, args ...any) { warns = append(warns, consumerWarning{msg, args}) }
	if len(filters) > 0 && (got.FilterSubject != contract.All(cfg.InputPrefix) || len(got.FilterSubjects) > 0) {
		// The filter Provision creates ("<InputPrefix>.>", only when the stream stores subjects outside it) cannot be
		// done without: no warning. Any other adds nothing the worker needs and costs envelopes.
		warn("filters on "+strings.Join(filters, ", ")+": nats-server 2.15.2 never delivers to a filtered consumer some subjects "+
			"the stream stores (a token with byte 0x7f), which stay there unprocessed; unless the stream stores subjects "+
			"outside "+contract.All(cfg.InputPrefix)+", remove the filter (nats consumer edit) or re-create the consumer",
			"filters", filters)
	}
	if got.MaxDeliver > 0 {
		warn("has a delivery limit: an envelope delivered that often (every NAK counts: a window outage of seconds "+
			"reaches a few) is never delivered again and stays in the input stream unprocessed, even once the limit is "+
			"raised; remove it (nats consumer edit --max-deliver=-1), and delete the consumer to have the worker create "+
			"it again and deliver what is left",
			"max_deliver", got.MaxDeliver)
	}
	if got.AckWait != cfg.AckWait {
		warn("ack wait differs from the configured one", "ack_wait", got.AckWait, "configured", cfg.AckWait)
	}
	// The worker cuts its pull requests down to the consumer's request limits, at a cost in throughput worth knowing.
	if _, clamped := shapePull(cfg.MaxInFlight, cfg.AckWait, limitsOf(got)); clamped != "" {
		warn("limits pull requests; the worker's are cut down to them: "+clamped+"; raise them (nats consumer edit) for full throughput",
			"max_request_batch", got.MaxRequestBatch, "max_request_expires", got.MaxRequestExpires, "max_waiting", got.MaxWaiting)
	}
	if got.MaxWaiting > 1 && got.MaxWaiting < 2*DefaultFleet {
		warn("lets few pull requests wait: each replica keeps up to two waiting, and the server silently drops the requests of "+
			"replicas beyond MaxWaiting/2, which then report not ready; MaxWaiting cannot be edited, re-create the consumer to raise it",
			"max_waiting", got.MaxWaiting)
	}
	if got.MaxAckPending > 0 && got.MaxAckPending < cfg.MaxInFlight {
		warn("MaxAckPending is below MaxInFlight: fewer envelopes will be in flight",
			"max_ack_pending", got.MaxAckPending, "max_in_flight", cfg.MaxInFlight)
	}
	return warns, nil
}

// conflictError is an error whose text explains it all, wrapping ErrIncompatible (never retried) and the cause.
type conflictError struct {
	msg   string
	cause error
}

func (e *conflictError) Error() string   { return e.msg }
func (e *conflictError) Unwrap() []error { return []error{ErrIncompatible, e.cause} }

// workQueueConflict explains the server's refusal to create the consumer on a work-queue input stream that another
// consumer already reads (DEDUPE_CONSUMER changed), naming the consumers there as far as they can be listed.
func workQueueConflict(ctx context.Context, js jetstream.JetStream, cfg Config, cause error) error {
	var names []string
	if s, err := js.Stream(ctx, cfg.InputStream); err == nil {
		lister := s.ConsumerNames(ctx)
		for name := range lister.Name() {
			if name != cfg.Consumer {
				names = append(names, name)
			}
		}
		if lister.Err() != nil {
			names = nil
		}
	}
	slices.Sort(names)
	who, old, set := "another consumer already reads it (nats consumer ls "+cfg.InputStream+")", "NAME", "DEDUPE_CONSUMER to its name"
	switch len(names) {
	case 0:
	case 1:
		who, old, set = fmt.Sprintf("consumer %q already reads it", names[0]), names[0], "DEDUPE_CONSUMER="+names[0]
	default:
		who = "consumers " + quoteAll(names) + " already read it"
	}
	return &conflictError{cause: cause, msg: fmt.Sprintf("pipeline: consumer %q: %s is a work-queue stream and %s; a work-queue "+
		"stream allows one consumer per subject — delete the old one (nats consumer rm %s %s) or set %s",
		cfg.Consumer, cfg.InputStream, who, cfg.InputStream, old, set)}
}

// quoteAll is ss quoted, joined by commas.
func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// startDecision is where a consumer created now starts (decideStart).
type startDecision int

const (
	startFirst        startDecision = iota // at the first envelope the stream holds
	startAsSet                             // where ConsumerStart says
	startFirstIgnored                      // at the first envelope, ConsumerStart ignored: the stream keeps nothing processed
	startNeedsSetting                      // refused (ErrConsumerStart): ConsumerStart must say where
	startNeedsRestart                      // refused (ErrConsumerStart): ConsumerStart is for the worker's start only
)

// decideStart decides where a missing consumer is created to start. A work-queue stream holds only unprocessed
// envelopes: the consumer starts at the first, whatever ConsumerStart says. A stream that keeps processed envelopes
// needs ConsumerStart unless it is empty, and only when the worker starts (recreate false): a setting left in
// place from an earlier start would replay what was processed since (or skip what was not).
func decideStart(set, workQueue, empty, recreate bool) startDecision {
	switch {
	case workQueue && set:
		return startFirstIgnored
	case workQueue:
		return startFirst
	case set && !recreate:
		return startAsSet
	case empty:
		return startFirst
	case set:
		return startNeedsRestart
	}
	return startNeedsSetting
}

// startFrom sets where a new consumer starts (decideStart), or says why it cannot be created.
func startFrom(want *jetstream.ConsumerConfig, cfg Config, input *jetstream.StreamInfo, recreate bool) error {
	start, _ := parseConsumerStart(cfg.ConsumerStart)
	st := input.State
	workQueue := input.Config.Retention == jetstream.WorkQueuePolicy
	keeps := fmt.Sprintf("stream %s keeps processed envelopes (retention %s; %d messages, sequences %d-%d)",
		cfg.InputStream, input.Config.Retention, st.Msgs, st.FirstSeq, st.LastSeq)
	const where = "seq:<first sequence not yet processed> (the last output's Dedupe-Input-Seq + 1 is an upper bound), " +
		"time:<RFC 3339>, new, or all (nothing was processed yet)"
	switch decideStart(start != nil, workQueue, st.Msgs == 0, recreate) {
	case startFirst:
	case startFirstIgnored:
		cfg.Logger.Warn("pipeline: DEDUPE_CONSUMER_START ignored: the input stream is a work-queue stream, which holds only "+
			"unprocessed envelopes; the consumer starts at the first of them (unset DEDUPE_CONSUMER_START)",
			"stream", cfg.InputStream, "consumer", cfg.Consumer, "consumer_start", cfg.ConsumerStart)
	case startAsSet:
		want.DeliverPolicy, want.OptStartSeq, want.OptStartTime = start.DeliverPolicy, start.OptStartSeq, start.OptStartTime
	case startNeedsSetting:
		return fmt.Errorf("%w: consumer %s > %s is missing and %s: creating it from the start would deliver them again "+
			"and republish every event whose claim is still live. Set DEDUPE_CONSUMER_START to "+where,
			ErrConsumerStart, cfg.InputStream, cfg.Consumer, keeps)
	case startNeedsRestart:
		return fmt.Errorf("%w: consumer %s > %s was deleted under the running worker and %s: DEDUPE_CONSUMER_START (%q) "+
			"is used only when the worker starts, and reused now it would deliver again what was processed since (or skip "+
			"what was not). Restart the worker with DEDUPE_CONSUMER_START set to "+where,
			ErrConsumerStart, cfg.InputStream, cfg.Consumer, keeps, cfg.ConsumerStart)
	}
	return nil
}

// parseConsumerStart reads Config.ConsumerStart: nil for "", else the deliver policy to create the consumer with.
func parseConsumerStart(s string) (*jetstream.ConsumerConfig, error) {
	bad := func(why string) error {
		return fmt.Errorf("pipeline: ConsumerStart: %s, got %q (want all, new, seq:<n> or time:<RFC 3339>)", why, s)
	}
	switch {
	case s == "":
		return nil, nil
	case s == "all":
		return &jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}, nil
	case s == "new":
		return &jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}, nil
	case strings.HasPrefix(s, "seq:"):
		n, err := strconv.ParseUint(s[4:], 10, 64)
		if err != nil || n == 0 {
			return nil, bad("the sequence must be a positive integer")
		}
		return &jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: n}, nil
	case strings.HasPrefix(s, "time:"):
		t, err := time.Parse(time.RFC3339Nano, s[5:])
		if err != nil {
			return nil, bad("the time must be RFC 3339")
		}
		return &jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t}, nil
	}
	return nil, bad("unknown form")
}

// filtersOf is a consumer's filter subjects, whichever field holds them (none: every subject).
func filtersOf(c jetstream.ConsumerConfig) []string {
	if c.FilterSubject != "" {
		return append([]string{c.FilterSubject}, c.FilterSubjects...)
	}
	return c.FilterSubjects
}

// coveredBy reports whether every subject matching pattern also matches one of filters.
func coveredBy(pattern string, filters []string) bool {
	return slices.ContainsFunc(filters, func(f string) bool { return subsetOf(pattern, f) })
}

// subsetOf reports whether every subject matching pattern p also matches filter f.
func subsetOf(p, f string) bool {
	pt, ft := strings.Split(p, "."), strings.Split(f, ".")
	for i, t := range ft {
		if t == ">" {
			return len(pt) > i
		}
		if i >= len(pt) {
			return false
		}
		switch {
		case pt[i] == ">":
			return false
		case t == "*":
		case t != pt[i]:
			return false
		}
	}
	return len(pt) == len(ft)
}
