package pipeline

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// consumerLimits are what the consumer accepts of one pull request (0: no limit); a request over one is refused
// (409) every time it is sent.
type consumerLimits struct {
	maxBatch   int           // MaxRequestBatch: deliveries one request may ask for
	maxExpires time.Duration // MaxRequestExpires: how long one request may wait
	maxWaiting int           // MaxWaiting: pull requests waiting at once, from every client of the consumer
}

func limitsOf(c jetstream.ConsumerConfig) consumerLimits {
	return consumerLimits{maxBatch: max(c.MaxRequestBatch, 0), maxExpires: max(c.MaxRequestExpires, 0), maxWaiting: max(c.MaxWaiting, 0)}
}

type pullShape struct {
	batch     int           // deliveries requested at most at once
	expiry    time.Duration // how long one request waits
	heartbeat time.Duration // the server's idle heartbeat on a waiting request
	single    bool          // one request waiting at a time (the consumer lets only one wait)
}

// shapePull decides the pull requests for a pipeline of maxInFlight workers and the ack wait, cut down to what the
// consumer accepts. clamped names each limit that cut them down ("" when none did), for the log.
func shapePull(maxInFlight int, ackWait time.Duration, l consumerLimits) (s pullShape, clamped string) {
	s.expiry, s.heartbeat = pullTimes(ackWait)
	s.batch = max(maxInFlight, 1)
	var cut []string
	if l.maxBatch > 0 && s.batch > l.maxBatch {
		cut = append(cut, fmt.Sprintf("batch %d → %d (MaxRequestBatch)", s.batch, l.maxBatch))
		s.batch = l.maxBatch
	}
	if l.maxExpires > 0 && s.expiry > l.maxExpires {
		cut = append(cut, fmt.Sprintf("expiry %s → %s (MaxRequestExpires)", s.expiry, l.maxExpires))
		s.expiry = l.maxExpires
	}
	// The server refuses a heartbeat longer than half the expiry.
	if hb := s.expiry / 2; s.heartbeat > hb {
		s.heartbeat = hb
	}
	// Each replica keeps up to two requests waiting (a new one once half the batch arrived); a consumer that lets
	// one wait gets one.
	if l.maxWaiting == 1 {
		cut = append(cut, "one request at a time (MaxWaiting 1)")
		s.single = true
	}
	return s, strings.Join(cut, ", ")
}

// limitFromRefusal reads the limit a 409 refusal names ("Exceeded MaxRequestBatch of 10", "Exceeded
// MaxRequestExpires of 1s") into l; ok is false when the description names none of them.
func limitFromRefusal(descr string, l consumerLimits) (consumerLimits, bool) {
	d := strings.ToLower(strings.TrimSpace(descr))
	if v, ok := strings.CutPrefix(d, "exceeded maxrequestbatch of "); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			return l, false
		}
		l.maxBatch = n
		return l, true
	}
	if v, ok := strings.CutPrefix(d, "exceeded maxrequestexpires of "); ok {
		e, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || e <= 0 {
			return l, false
		}
		l.maxExpires = e
		return l, true
	}
	return l, false
}

// pullStuckAfter is how long the consumer may leave the pull requests without a sign of acceptance before
// readiness reports the pulls stuck: four heartbeats (a dropped request is sent again after two heartbeats of
// silence, and its first heartbeat comes one later), at least 5s.
func pullStuckAfter(heartbeat time.Duration) time.Duration { return max(4*heartbeat, 5*time.Second) }

// pullsStuck decides whether the pulls are stuck (nil: not): no sign of acceptance for longer than bound since
// answered, while the handler is not busy. refusal is the last refusal (nil: none).
func pullsStuck(now, answered time.Duration, busy bool, refusal *failure, bound time.Duration, l consumerLimits) error {
	if busy || now-answered <= bound {
		return nil
	}
	silent := (now - answered).Round(100 * time.Millisecond)
	if refusal != nil && refusal.at >= answered {
		return fmt.Errorf("pull requests refused for %s: %w", silent, refusal.err)
	}
	why := "its leader is unreachable or the server drops them"
	if l.maxWaiting > 0 {
		why = fmt.Sprintf("the server drops them once %d requests wait (MaxWaiting: other clients' pulls), or its leader is unreachable", l.maxWaiting)
	}
	return fmt.Errorf("pull requests unanswered for %s (no delivery, heartbeat or expiry): %s", silent, why)
}
