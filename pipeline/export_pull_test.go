package pipeline

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// PullShape is what the pull requests ask for under a consumer's limits, for the table tests.
type PullShape struct {
	Batch             int
	Expiry, Heartbeat time.Duration
	Single            bool
	Clamped           string
}

// ShapePull shapes the pull requests of a pipeline of maxInFlight workers and ackWait for consumer c's limits.
func ShapePull(maxInFlight int, ackWait time.Duration, c jetstream.ConsumerConfig) PullShape {
	s, clamped := shapePull(maxInFlight, ackWait, limitsOf(c))
	return PullShape{s.batch, s.expiry, s.heartbeat, s.single, clamped}
}

// LimitFromRefusal is the consumer configuration c with the limit a refusal's description names; ok says it named one.
func LimitFromRefusal(descr string, c jetstream.ConsumerConfig) (jetstream.ConsumerConfig, bool) {
	l, ok := limitFromRefusal(descr, limitsOf(c))
	c.MaxRequestBatch, c.MaxRequestExpires, c.MaxWaiting = l.maxBatch, l.maxExpires, l.maxWaiting
	return c, ok
}

// PullsStuck decides whether pulls that last had a sign of acceptance at answered are stuck at now; refusedAt < 0:
// no refusal.
func PullsStuck(now, answered time.Duration, busy bool, refusedAt time.Duration, bound time.Duration, maxWaiting int) error {
	var r *failure
	if refusedAt >= 0 {
		r = &failure{err: errRefusedForTest, at: refusedAt}
	}
	return pullsStuck(now, answered, busy, r, bound, consumerLimits{maxWaiting: maxWaiting})
}

var errRefusedForTest = errorString("409 Consumer is push based")

type errorString string

func (e errorString) Error() string { return string(e) }

// PullStuckAfter is how long pulls may go without a sign of acceptance for heartbeat.
func PullStuckAfter(heartbeat time.Duration) time.Duration { return pullStuckAfter(heartbeat) }

// LeaderCutOff says why a leader describing its replicas as ci has lost its quorum ("" when it has not).
func LeaderCutOff(ci *jetstream.ClusterInfo) string { return leaderCutOff(ci) }
