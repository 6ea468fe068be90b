package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// link is what the status loop saw of the NATS connection's outages, for readiness to say how long and why.
type link struct {
	downSince  atomic.Int64 // p.clock() when the connection was lost (0: connected)
	backAt     atomic.Int64 // p.clock() of the last reconnect (0: none since Run started)
	reconnects atomic.Int64 // reconnects since Run started
	recovering atomic.Int64 // the reconnect (reconnects' count) since which no ping sent has been answered; 0: none
}

// statusLoop refreshes the status every StatusInterval, and at once after a reconnect. The connection's changes
// are followed apart from the polls, which can wait seconds for a server that is stopping.
func (p *Pipeline) statusLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.StatusInterval)
	defer t.Stop()
	conn := p.nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING)
	defer p.nc.RemoveStatusListener(conn)
	back := make(chan struct{}, 1)
	go func() {
		for st := range conn { // closed by RemoveStatusListener
			p.linkChanged(st)
			if st == nats.CONNECTED {
				select {
				case back <- struct{}{}:
				default:
				}
			}
		}
	}()
	for {
		p.refreshStatus(ctx)
		select {
		case <-ctx.Done():
			return
		case <-back:
		case <-t.C:
		}
	}
}

func (p *Pipeline) linkChanged(st nats.Status) {
	now := int64(max(p.clock(), 1))
	if st != nats.CONNECTED {
		p.link.downSince.CompareAndSwap(0, now)
		p.updateReady()
		return
	}
	if p.link.downSince.Swap(0) != 0 {
		p.link.backAt.Store(now)
		p.link.recovering.Store(p.link.reconnects.Add(1))
	}
	p.pulls.restart(time.Duration(now)) // the pull requests are sent again on the new connection
	p.updateReady()                     // the gauge follows at once, not at the refresh the reconnect triggers (it may find nothing to do)
}

// offline reports whether err is the connection's, not the server's (jserr.Offline): readiness reports the
// connection itself, and such an error must not outlive the outage in what it says.
func (p *Pipeline) offline(err error) bool { return jserr.Offline(p.nc, err) }

func (p *Pipeline) refreshStatus(ctx context.Context) {
	if !p.nc.IsConnected() {
		return // every request would fail in the client; readiness says the connection is down
	}
	timeout := min(max(p.cfg.StatusInterval, time.Second), 5*time.Second)
	// Whether the pipeline was bound when the reads were sent, not when they are answered: a read sent while Run was
	// still creating what it needs may answer "not found" after the bind, of a stream or consumer created since.
	bound := p.bound.Load()
	// The window's ping runs beside the consumer's and the streams' reads: a bucket out of reach keeps it waiting
	// for its whole timeout.
	pinged := &windowPing{done: make(chan struct{})}
	// A ping sent before a reconnect and answered after it says nothing of the window since: it ends only the
	// recovering of the reconnects before it was sent.
	sentAfter := p.link.reconnects.Load()
	go func() {
		defer close(pinged.done)
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if w, ok := p.cfg.Window.(bucketPinger); ok {
			pinged.buckets, pinged.err = w.PingEach(wctx)
		} else {
			pinged.err = p.cfg.Window.Ping(wctx)
		}
	}()
	defer func() { <-pinged.done }()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	c, err := p.js.Consumer(cctx, p.cfg.InputStream, p.cfg.Consumer)
	cancel()
	if ctx.Err() != nil {
		return
	}
	var cutOff []string
	if err != nil {
		if !p.offline(err) {
			p.consumerErr.Store(&err)
			if bound && consumerGone(err) {
				p.rebind.Store(true) // deleted, perhaps while disconnected (the pulls then only get "no responders")
			}
		}
	} else {
		p.consumerErr.Store(nil)
		info := c.CachedInfo()
		if why := leaderCutOff(info.Cluster); why != "" {
			cutOff = append(cutOff, "consumer "+p.cfg.InputStream+" > "+p.cfg.Consumer+": "+why)
			p.quorumChanged(cutOff) // at once: the streams' reads may wait seconds for a server out of reach
		}
		p.m.consumerPending.Set(float64(info.NumPending))
		p.observeConsumer(info.Created, info.Delivered)     // read before the input stream: checkInputLimits' pre-filter
		p.consumerAckWait.Store(int64(info.Config.AckWait)) // the duplicate window's check follows an edit
		created := info.Created.UnixNano()
		warns, unusable := checkConsumer(p.cfg, info.Config)
		if bound && (created != p.consumerCreated.Load() || unusable != nil) {
			p.rebind.Store(true) // deleted and created again since it was bound, or edited into one the bind refuses
		} else if sub := p.pullSub.Load(); sub != nil {
			sub.setLimits(limitsOf(info.Config), "") // an operator may edit the limits at any time
			p.consumerEdited(created, warns)
		}
	}
	streamsCut, silent := p.refreshStreams(ctx, pinged, bound)
	if ctx.Err() != nil {
		return
	}
	p.quorumChanged(append(cutOff, streamsCut...))
	p.silenceChanged(silent)
	<-pinged.done
	if err := pinged.err; err != nil {
		if ctx.Err() != nil || p.offline(err) {
			return
		}
		if p.windowErr.Swap(&err) == nil {
			p.updateReady()
			p.log.Warn("pipeline: window ping failed", "err", err)
		}
	} else {
		p.link.recovering.CompareAndSwap(sentAfter, 0)
		p.windowUp()
	}
	p.updateReady()
}

// windowPing is the status poll's ping of the window, done once done is closed.
type windowPing struct {
	done    chan struct{}
	buckets []kvwindow.BucketPing
	err     error
}

// bucketPinger is a window that pings bucket by bucket (*kvwindow.Window): the poll learns the buckets' leaders
// from the ping's own reads.
type bucketPinger interface {
	PingEach(ctx context.Context) ([]kvwindow.BucketPing, error)
}

// refreshStreams reads the three streams for the size gauges and the output's limits (maximum message size,
// duplicate window), and with the buckets' streams as the window's ping read them (pinged, nil for none) returns
// what readiness reports of their leaders: cut off from their replicas (leaderCutOff), silent for streamSilence
// (watch.silence), or missing: deleted under the running worker only when it was bound before the reads were sent.
func (p *Pipeline) refreshStreams(ctx context.Context, pinged *windowPing, bound bool) (cutOff, silent []string) {
	// The reads run at once: a stream whose leader is out of reach keeps its read waiting for the whole timeout,
	// and the poll should not wait for each in turn.
	names := []string{p.cfg.InputStream, p.cfg.OutputStream, p.cfg.DLQStream}
	infos := make([]*jetstream.StreamInfo, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			st, err := p.js.Stream(cctx, name)
			if err != nil {
				errs[i] = err
				return
			}
			infos[i] = st.CachedInfo()
		})
	}
	wg.Wait()
	var buckets []string
	if pinged != nil {
		<-pinged.done
		for _, b := range pinged.buckets {
			buckets = append(buckets, b.Bucket)
			names = append(names, "KV_"+b.Bucket)
			infos = append(infos, b.Info)
			errs = append(errs, b.ReadErr)
		}
	}
	if ctx.Err() != nil {
		return nil, nil // cancelled, not unanswered: what the last answers said stands
	}
	now := p.clock()
	for i, name := range names {
		info := infos[i]
		what := "stream " + name
		if i >= 3 {
			what = "bucket " + buckets[i-3] + " (stream " + name + ")"
		}
		if errors.Is(errs[i], jetstream.ErrStreamNotFound) {
			// Deleted under the worker: no leader will answer for it, and what its leader said is of another stream.
			p.streams.forget(name)
			if !bound {
				// Not bound yet (Run is still creating or binding what it needs, and says so itself): a stream not
				// created yet is not one deleted under the running worker.
				continue
			}
			if i < 3 && p.cfg.Provision {
				p.missing.Store(true) // the consume loop creates it again, as after a publish that found it missing
			}
			if name != p.cfg.DLQStream {
				silent = append(silent, what+": "+missingReason(i < 3, p.cfg.Provision))
			}
			continue
		}
		if name != p.cfg.DLQStream { // a dead letter is rare: the DLQ's leader does not decide readiness
			var why string
			err := errs[i]
			if info != nil {
				why = leaderCutOff(info.Cluster)
				if leaderless(info.Cluster) {
					err = errNoLeader // what it says of its replicas is no leader's
				}
			}
			w := p.streams.next(name, why, err, err != nil && p.offline(err), now)
			if w.cutOff != "" {
				cutOff = append(cutOff, what+": "+w.describeCutOff(now))
			}
			if why := w.silence(now); why != "" {
				silent = append(silent, what+": "+why)
			}
		}
		if info == nil || i >= 3 {
			continue
		}
		// The limits are stored before the gauges: a scrape showing this poll's figures proves they are acted on.
		if name == p.cfg.InputStream {
			p.inputKeeps.Store(info.Config.Retention != jetstream.WorkQueuePolicy)
			p.checkInputLimits(ctx, info)
		}
		if name == p.cfg.OutputStream {
			p.outMaxMsgSize.Store(int64(max(info.Config.MaxMsgSize, 0)))
			p.maxHold.Store(int64(p.holdBound(info.Config.Duplicates)))
			p.checkDupWindow(info.Config.Duplicates)
			p.outputCreated(info.Created)
		}
		p.m.streamMessages.WithLabelValues(name).Set(float64(info.State.Msgs))
		p.m.streamBytes.WithLabelValues(name).Set(float64(info.State.Bytes))
	}
	return cutOff, silent
}

// streamSilence is how long a stream's reads must have gone unanswered by its leader for readiness to report it:
// the read's own timeout, so that one slow read or a step-down within a poll is not reported, while the election
// after a leader crashed (some 4–9s) is: the stream stores nothing meanwhile.
const streamSilence = 2 * time.Second

// watch is what the status polls know of one stream's leader: the verdict of the last read its leader answered,
// and the reads that failed since (unanswered, or answered without a leader: errNoLeader).
type watch struct {
	cutOff     string        // leaderCutOff of the last answer ("": it had its quorum, or no answer yet)
	answeredAt time.Duration // p.clock() of the last answer (0: none)
	failedAt   time.Duration // p.clock() of the first read that failed since the last answer (0: none failed)
	err        error         // the last failure since the last answer
}

// watchStream decides what the polls know of a stream after a read that ended at now: answered with the leader's
// verdict cutOff (err nil), or failed with err (offline: the connection's, saying nothing of the stream). Only a
// leader's answer changes the verdict: a leader cut off from its replicas steps down after some 10s and its server
// then answers without a leader (describing unheard replicas as heard), or nothing at all.
func watchStream(prev watch, cutOff string, err error, offline bool, now time.Duration) watch {
	switch {
	case err == nil:
		return watch{cutOff: cutOff, answeredAt: now}
	case offline:
		return prev
	}
	if prev.failedAt == 0 {
		prev.failedAt = max(now, 1)
	}
	prev.err = err
	return prev
}

// silence says why readiness reports the stream as not answering ("" while it does not): its reads have failed
// for streamSilence, with no answer between.
func (w watch) silence(now time.Duration) string {
	if w.failedAt == 0 || now-w.failedAt < streamSilence {
		return ""
	}
	return fmt.Sprintf("no answer from its leader for %s (its leader out of reach, or none elected; the worker "+
		"resumes by itself): %v", (now - w.failedAt).Round(100*time.Millisecond), w.err)
}

// describeCutOff is the verdict of the last answer, saying so when the stream has not answered since.
func (w watch) describeCutOff(now time.Duration) string {
	if w.failedAt == 0 {
		return w.cutOff
	}
	return fmt.Sprintf("%s (its leader's last answer, %s ago; none since: %v)", w.cutOff,
		(now - w.answeredAt).Round(100*time.Millisecond), w.err)
}

// watches holds what the status polls know of each stream they read (watchStream); the poll and Run's first read
// may update it at once.
type watches struct {
	mu sync.Mutex
	m  map[string]watch
}

func (ws *watches) next(name, cutOff string, err error, offline bool, now time.Duration) watch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = map[string]watch{}
	}
	w := watchStream(ws.m[name], cutOff, err, offline, now)
	ws.m[name] = w
	return w
}

func (ws *watches) forget(name string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.m, name)
}

// missingReason says why readiness reports a stream the status poll found missing: ours (Provision creates it
// again) or a window's bucket.
func missingReason(ours, provision bool) string {
	switch {
	case !ours:
		return "missing (deleted under the running worker)"
	case provision:
		return "missing (deleted under the running worker); the worker creates it again (DEDUPE_PROVISION=true)"
	}
	return "missing (deleted under the running worker): create it again, or restart a worker with DEDUPE_PROVISION=true"
}

// quorumSeen is how recently a replicated leader must have heard from a replica for it to count towards its
// quorum: three one-second heartbeats. A leader cut off from its replicas goes on answering for some 10s before it
// steps down; what it says of its replicas tells it at once.
const quorumSeen = 3 * time.Second

// leaderCutOff says why a replicated leader, as its answer describes its replicas, has no quorum ("" when it has).
func leaderCutOff(ci *jetstream.ClusterInfo) string {
	if ci == nil || len(ci.Replicas) == 0 {
		return ""
	}
	need := (len(ci.Replicas)+1)/2 + 1
	heard := 1 // the leader itself
	var lost []string
	for _, r := range ci.Replicas {
		switch {
		case r == nil:
		case r.Offline:
			lost = append(lost, r.Name+" offline")
		case r.Active > quorumSeen:
			lost = append(lost, fmt.Sprintf("%s last heard %s ago", r.Name, r.Active.Round(100*time.Millisecond)))
		default:
			heard++
		}
	}
	if heard >= need {
		return ""
	}
	return fmt.Sprintf("its leader %s has lost its quorum (%s; %d of %d needed)", ci.Leader, strings.Join(lost, ", "), need, len(ci.Replicas)+1)
}

// errNoLeader is a read of a replicated stream answered by a server that knows no leader of it.
var errNoLeader = errors.New("the stream has no leader")

// leaderless reports whether the answer about a replicated stream names no leader (an election under way, or
// none possible): what it says of the replicas is no leader's view.
func leaderless(ci *jetstream.ClusterInfo) bool {
	return ci != nil && ci.Leader == "" && len(ci.Replicas) > 0
}

// quorumChanged records the leaders the status poll found cut off from their replicas (nil: none).
func (p *Pipeline) quorumChanged(cutOff []string) {
	p.pollFound(&p.quorumErr, cutOff, "pipeline: the NATS server this worker uses is cut off from its cluster's majority (a "+
		"network partition, or the other servers down); nothing it leads can make progress until it rejoins them: ",
		"pipeline: lost quorum", "pipeline: the consumer's and streams' leaders have their quorum again")
}

// silenceChanged records the streams the status poll found without a leader's answer (watch.silence; nil: none).
func (p *Pipeline) silenceChanged(silent []string) {
	p.pollFound(&p.silentErr, silent, "pipeline: ", "pipeline: no answer from a stream's leader",
		"pipeline: the streams' leaders answer again")
}

// pollFound makes the problems a status poll found (nil: none) the standing error in last, prefixed, logging down
// when they appear and up when they are gone. The ready gauge follows before the line is logged, as wherever a
// reason changes: a scrape that read the gauge in between would see ready while Ready says why not.
func (p *Pipeline) pollFound(last *atomic.Pointer[error], problems []string, prefix, down, up string) {
	if len(problems) == 0 {
		if last.Swap(nil) != nil {
			p.updateReady()
			p.log.Info(up)
		}
		return
	}
	err := errors.New(prefix + strings.Join(problems, "; "))
	if last.Swap(&err) == nil {
		p.updateReady()
		p.log.Warn(down, "err", err)
	}
}

// dupWindowReach is how far back a publish made now can be collapsed with an earlier one under the same
// Nats-Msg-Id: the output's duplicate window dup, but never before the stream's creation, outputAge ago (0:
// unknown), since a stream deleted and created again has forgotten every id of the one before. protocol.Decide marks
// a takeover whose first claim's age plus the publish timeout plus a second (clocks of replicas) reaches the window:
// both are added back to the age, so that a takeover is marked for the stream's creation exactly when its first claim
// was made no later than the creation, measured at the same instant (a first claim made after it may have stored
// the event in this stream only, under the same id). No slack for clocks is needed there: a publish that reached the
// deleted stream was claimed before its deletion, which comes before the creation by the operator's own time. dup <=
// 0 (unknown, or none) is kept.
func dupWindowReach(dup, outputAge, publishTimeout time.Duration) time.Duration {
	if dup <= 0 || outputAge <= 0 {
		return dup
	}
	return min(dup, outputAge+publishTimeout+time.Second)
}

// outputAge is the time at now since the output stream was created, as last read (0: not read yet).
func (p *Pipeline) outputAge(now time.Time) time.Duration {
	c := p.outCreated.Load()
	if c == 0 {
		return 0
	}
	return max(now.Sub(time.Unix(0, c)), time.Nanosecond)
}

// outputCreated records the output stream's creation time as read at t: the latest one seen, since an answer read
// before the stream was deleted and created again may arrive after the new one's.
func (p *Pipeline) outputCreated(t time.Time) {
	c := t.UnixNano()
	for {
		old := p.outCreated.Load()
		if c <= old || p.outCreated.CompareAndSwap(old, c) {
			return
		}
	}
}

// dupWindowShort decides whether the output's duplicate window dup no longer covers a redelivery: the server
// redelivers after the consumer's ack wait (consumerAckWait, as an operator may have edited it; 0: not read yet),
// the worker's timings follow DEDUPE_ACK_WAIT (ackWait), and a delivery may be held up to the hold bound before it
// publishes. An unkeyed event republished later than the window is stored again.
func dupWindowShort(dup, ackWait, consumerAckWait, hold time.Duration) bool {
	return dup < max(ackWait, consumerAckWait)+hold
}

// checkDupWindow records the output stream's duplicate window and warns, once per change of the window or of the
// verdict, when it no longer covers the ack wait plus the hold bound: an unkeyed event republished then is stored
// again.
func (p *Pipeline) checkDupWindow(dup time.Duration) {
	prev := time.Duration(p.outDupWindow.Swap(int64(dup)))
	p.m.dupWindow.Set(dup.Seconds())
	ackWait, consumerAckWait, hold := p.cfg.AckWait, time.Duration(p.consumerAckWait.Load()), time.Duration(p.maxHold.Load())
	short := dupWindowShort(dup, ackWait, consumerAckWait, hold)
	p.m.dupWindowShort.Set(oneIf(short))
	wasShort := p.dupShort.Swap(short)
	if dup == prev && short == wasShort {
		return
	}
	if short {
		p.log.Warn("pipeline: the output stream's duplicate window is shorter than the ack wait plus the hold bound: "+
			"a republished unkeyed event may be stored twice; raise it (nats stream edit) or lower DEDUPE_ACK_WAIT/DEDUPE_MAX_HOLD "+
			"(and the consumer's ack wait, nats consumer edit --wait, when it was edited)",
			"stream", p.cfg.OutputStream, "duplicate_window", dup, "ack_wait", ackWait, "consumer_ack_wait", consumerAckWait,
			"hold_bound", hold)
	} else if dup != prev && prev != 0 {
		p.log.Info("pipeline: the output stream's duplicate window changed", "stream", p.cfg.OutputStream, "duplicate_window", dup)
	} else if wasShort {
		p.log.Info("pipeline: the output stream's duplicate window covers the ack wait plus the hold bound again",
			"stream", p.cfg.OutputStream, "duplicate_window", dup, "ack_wait", ackWait, "consumer_ack_wait", consumerAckWait)
	}
}

// outputLimitNow reports whether an event of size bytes is over the output stream's maximum message size as the
// stream states it now: the status poll's copy may predate an operator's raise, and never dead-letters an event
// alone. A failed read answers no (the server still refuses an event too large).
func (p *Pipeline) outputLimitNow(size int64) (limit int64, over bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := p.js.Stream(ctx, p.cfg.OutputStream)
	if err != nil {
		return 0, false
	}
	limit = int64(max(st.CachedInfo().Config.MaxMsgSize, 0))
	p.outMaxMsgSize.Store(limit)
	return limit, limit > 0 && size > limit
}
