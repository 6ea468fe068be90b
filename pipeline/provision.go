package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrIncompatible is wrapped by Provision's errors about an existing stream or consumer that cannot serve the
// pipeline (a stream that does not capture the subjects, a consumer without explicit acks). Provision never
// changes what exists: fix it, or delete it and let Provision create it.
var ErrIncompatible = errors.New("pipeline: existing stream or consumer is incompatible")

// Provision creates what the pipeline needs and is missing: the input, output and dead-letter streams (file
// storage, cfg.Replicas) and the durable pull consumer on the input stream. Existing streams and consumers are
// never changed: one that cannot work is an error wrapping ErrIncompatible, one that works but differs from what
// Provision would create (a shorter duplicate window, another ack wait, a delivery limit) is logged at warn.
//
// What it creates:
//   - InputStream: subjects "<InputPrefix>.>".
//   - OutputStream: subjects "<OutputPrefix>.>" (and "<DuplicatesPrefix>.>" when set), duplicate window
//     max(2m, 4×AckWait), so that republishing one claim collapses into one message.
//   - DLQStream: subjects "<DLQPrefix>.>".
//   - Consumer: durable, pull, explicit ack, MaxDeliver unlimited, AckWait, MaxAckPending max(1000,
//     4×MaxInFlight), filter "<InputPrefix>.>", deliver all.
func Provision(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	if js != nil {
		cfg.JetStream = js
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := cfg.Logger
	outSubjects := []string{cfg.OutputPrefix + ".>"}
	outNeeds := []string{cfg.OutputPrefix + ".*.*"}
	if cfg.DuplicatesPrefix != "" {
		outSubjects = append(outSubjects, cfg.DuplicatesPrefix+".>")
		outNeeds = append(outNeeds, cfg.DuplicatesPrefix+".*.*")
	}
	streams := []struct {
		cfg   jetstream.StreamConfig
		needs []string
	}{
		{jetstream.StreamConfig{
			Name:        cfg.InputStream,
			Description: "dedupeworker: raw webhook deliveries",
			Subjects:    []string{cfg.InputPrefix + ".>"},
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
		}, []string{cfg.InputPrefix + ".*.*"}},
		{jetstream.StreamConfig{
			Name:        cfg.OutputStream,
			Description: "dedupeworker: unique events",
			Subjects:    outSubjects,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			Duplicates:  duplicateWindow(cfg.AckWait),
		}, outNeeds},
		{jetstream.StreamConfig{
			Name:        cfg.DLQStream,
			Description: "dedupeworker: envelopes that can never be processed",
			Subjects:    []string{cfg.DLQPrefix + ".>"},
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
		}, []string{cfg.DLQPrefix + ".*"}},
	}
	for _, s := range streams {
		info, err := ensureStream(ctx, js, log, s.cfg)
		if err != nil {
			return err
		}
		for _, need := range s.needs {
			if !coveredBy(need, info.Config.Subjects) {
				return fmt.Errorf("%w: stream %s has subjects %q, which do not capture %s",
					ErrIncompatible, info.Config.Name, info.Config.Subjects, need)
			}
		}
		if info.Config.Name == cfg.OutputStream && info.Config.Duplicates < cfg.AckWait {
			log.Warn("pipeline: output stream's duplicate window is shorter than the ack wait: a republish after a lost ack may not collapse",
				"stream", info.Config.Name, "duplicates", info.Config.Duplicates, "ack_wait", cfg.AckWait)
		}
	}
	return ensureConsumer(ctx, js, cfg)
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
			return nil, fmt.Errorf("pipeline: create stream %s: %w", want.Name, err)
		}
		s, err = js.Stream(ctx, want.Name) // another replica created it first
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: stream %s: %w", want.Name, err)
	}
	return s.CachedInfo(), nil
}

func ensureConsumer(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	want := jetstream.ConsumerConfig{
		Durable:       cfg.Consumer,
		Description:   "dedupeworker: consume, key, claim, republish, ack",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: maxAckPending(cfg.MaxInFlight),
		FilterSubject: cfg.InputPrefix + ".>",
		Replicas:      cfg.Replicas,
	}
	c, err := js.Consumer(ctx, cfg.InputStream, cfg.Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		c, err = js.CreateConsumer(ctx, cfg.InputStream, want)
		if err == nil {
			cfg.Logger.Info("pipeline: created consumer", "stream", cfg.InputStream, "consumer", cfg.Consumer,
				"ack_wait", want.AckWait, "max_ack_pending", want.MaxAckPending)
			return nil
		}
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			return fmt.Errorf("pipeline: create consumer %s > %s: %w", cfg.InputStream, cfg.Consumer, err)
		}
		c, err = js.Consumer(ctx, cfg.InputStream, cfg.Consumer)
	}
	if err != nil {
		return fmt.Errorf("pipeline: consumer %s > %s: %w", cfg.InputStream, cfg.Consumer, err)
	}
	got := c.CachedInfo().Config
	if got.DeliverSubject != "" {
		return fmt.Errorf("%w: consumer %s > %s is a push consumer; it must be a pull consumer",
			ErrIncompatible, cfg.InputStream, cfg.Consumer)
	}
	if got.AckPolicy != jetstream.AckExplicitPolicy {
		return fmt.Errorf("%w: consumer %s > %s has ack policy %s; it must be explicit",
			ErrIncompatible, cfg.InputStream, cfg.Consumer, got.AckPolicy)
	}
	warn := func(msg string, args ...any) {
		cfg.Logger.Warn("pipeline: consumer "+msg, append([]any{"stream", cfg.InputStream, "consumer", cfg.Consumer}, args...)...)
	}
	if got.MaxDeliver > 0 {
		warn("has a delivery limit: an envelope redelivered that often (e.g. through a long window outage) is dropped",
			"max_deliver", got.MaxDeliver)
	}
	if got.AckWait != cfg.AckWait {
		warn("ack wait differs from the configured one", "ack_wait", got.AckWait, "configured", cfg.AckWait)
	}
	if got.MaxAckPending > 0 && got.MaxAckPending < cfg.MaxInFlight {
		warn("MaxAckPending is below MaxInFlight: fewer envelopes will be in flight",
			"max_ack_pending", got.MaxAckPending, "max_in_flight", cfg.MaxInFlight)
	}
	return nil
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
