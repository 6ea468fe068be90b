package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/config"
)

// inputRetention is how INGEST keeps envelopes (-input-retention). The zero value is work-queue retention, what
// the worker provisions.
type inputRetention int

const (
	retainWorkQueue inputRetention = iota // work-queue: an envelope is deleted once acknowledged
	retainAge                             // limits retention with an age limit of inputMaxAge
	retainLimits                          // limits retention without any limit: every envelope kept (the old baseline)
)

// inputMaxAge is INGEST's age limit under -input-retention age.
const inputMaxAge = time.Hour

var retentionNames = [...]string{retainWorkQueue: "workqueue", retainAge: "age", retainLimits: "limits"}

// retentionUsage is the help of -input-retention.
var retentionUsage = fmt.Sprintf("retention of the input stream %s, for every contender and mode: `workqueue|age|limits` (default workqueue). "+
	"workqueue: an envelope is deleted once acknowledged (what the worker provisions); "+
	"age: limits retention with MaxAge %s (native: %s, as the server refuses an age limit below its duplicate window); "+
	"limits: limits retention without limit, every envelope kept (the old baseline). "+
	"Under age and limits the workers get DEDUPE_CONSUMER_START=all: without it the worker refuses to create its consumer on a "+
	"preloaded stream that keeps processed envelopes", inputStream, config.FormatDuration(inputMaxAge), config.FormatDuration(windowTTL))

func (r inputRetention) String() string {
	if r >= 0 && int(r) < len(retentionNames) {
		return retentionNames[r]
	}
	return fmt.Sprintf("inputRetention(%d)", int(r))
}

// Set implements flag.Value.
func (r *inputRetention) Set(s string) error {
	v, err := parseInputRetention(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// parseInputRetention reads a -input-retention value (case and surrounding blanks ignored).
func parseInputRetention(s string) (inputRetention, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for i, name := range retentionNames {
		if t == name {
			return inputRetention(i), nil
		}
	}
	return 0, fmt.Errorf("unknown retention %q (want %s)", s, strings.Join(retentionNames[:], ", "))
}

// apply sets cfg's retention and limits. Call it after cfg.Duplicates is set: under age retention the age limit is
// raised to the duplicate window when that is longer (nats-server refuses a duplicate window above MaxAge).
func (r inputRetention) apply(cfg *jetstream.StreamConfig) {
	switch r {
	case retainWorkQueue:
		cfg.Retention = jetstream.WorkQueuePolicy
	case retainAge:
		cfg.Retention = jetstream.LimitsPolicy
		cfg.MaxAge = max(inputMaxAge, cfg.Duplicates)
	default:
		cfg.Retention = jetstream.LimitsPolicy
	}
}

// workerConsumerStart is the DEDUPE_CONSUMER_START the workers get. The worker refuses to create its consumer on
// a non-empty input stream that keeps processed envelopes unless told where to start; the bench's drain preloads
// INGEST before the worker starts, and nothing in it was processed: "all".
func (r inputRetention) workerConsumerStart() string {
	if r == retainWorkQueue {
		return ""
	}
	return "all"
}

// reportLine names the input retention in the report, so that a figure can be quoted with its setting.
func (r inputRetention) reportLine() string {
	what := ""
	switch r {
	case retainWorkQueue:
		what = "work-queue retention, an envelope deleted once acknowledged (what the worker provisions)"
	case retainAge:
		what = fmt.Sprintf("limits retention, MaxAge %s (native: %s, its duplicate window); no envelope of a run gets old enough to expire",
			config.FormatDuration(inputMaxAge), config.FormatDuration(windowTTL))
	default:
		what = "limits retention without limit, every envelope kept (the old baseline)"
	}
	s := fmt.Sprintf("input retention: %s: %s %s", r, inputStream, what)
	if cs := r.workerConsumerStart(); cs != "" {
		s += "; workers run with DEDUPE_CONSUMER_START=" + cs
	}
	return s
}
