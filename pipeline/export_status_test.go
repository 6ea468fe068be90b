package pipeline

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamRead is one status poll's read of a stream, ended At (p.clock): answered with the leader's verdict CutOff
// (Err nil), or failed with Err (Offline: the connection's failure).
type StreamRead struct {
	At      time.Duration
	CutOff  string
	Err     error
	Offline bool
}

// WatchReads runs watchStream over reads, in order, and returns what readiness reports after the last one: the
// leader cut off as the last answer described it, and the stream not answering ("" for none).
func WatchReads(reads []StreamRead) (cutOff, silent string) {
	var w watch
	var now time.Duration
	for _, r := range reads {
		w, now = watchStream(w, r.CutOff, r.Err, r.Offline, r.At), r.At
	}
	if w.cutOff != "" {
		cutOff = w.describeCutOff(now)
	}
	return cutOff, w.silence(now)
}

// Leaderless is leaderless: whether an answer about a replicated stream names no leader.
func Leaderless(ci *jetstream.ClusterInfo) bool { return leaderless(ci) }

// RefreshStatus runs one status poll.
func RefreshStatus(p *Pipeline, ctx context.Context) { p.refreshStatus(ctx) }

// LinkChanged is what the status loop does when the connection's status changes to st.
func LinkChanged(p *Pipeline, st nats.Status) { p.linkChanged(st) }
