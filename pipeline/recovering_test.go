package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// readyLog polls Ready until stopped and keeps every distinct reason it gave (digits aside, so that one state
// with a growing duration is kept once), in order.
type readyLog struct {
	mu      sync.Mutex
	reasons []string
	seen    map[string]bool
	stop    chan struct{}
	done    chan struct{}
}

func watchReady(t *testing.T, p *pipeline.Pipeline) *readyLog {
	l := &readyLog{seen: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := p.Ready(context.Background()); err != nil {
				l.add(err.Error())
			}
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(l.end)
	return l
}

func (l *readyLog) add(reason string) {
	short := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, reason)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.seen[short] {
		l.seen[short] = true
		l.reasons = append(l.reasons, reason)
	}
}

func (l *readyLog) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

func (l *readyLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reasons...)
}

// said waits until one of the reasons given so far contains want.
func (l *readyLog) said(t *testing.T, timeout time.Duration, want string) {
	t.Helper()
	natstest.Eventually(t, timeout, func() error {
		for _, r := range l.all() {
			if strings.Contains(r, want) {
				return nil
			}
		}
		return fmt.Errorf("readiness never said %q; it said %q", want, l.all())
	})
}

// TestReadinessAcrossServerRestart stops the (file-backed) server under an idle pipeline for longer than a few
// status polls and starts it again on the same store. Meanwhile readiness says the connection is down and why it
// can last (a restarted server takes connections once it has recovered its streams); once the server is back it
// is ready again by itself, at once, without reporting what failed in the client during the outage (before:
// "consumer INGEST > dedupeworker: nats: outbound buffer limit exceeded" until the next status poll).
func TestReadinessAcrossServerRestart(t *testing.T) {
	srv := natstest.Run(t)
	// The worker's own connection has no reconnect buffer (internal/natsconn): a request while disconnected fails
	// in the client at once.
	e := newEnvOn(t, srv, natstest.Connect(t, srv.URL(), nats.ReconnectBufSize(-1)))
	cfg := e.config(e.kvWindow())
	cfg.StatusInterval = 300 * time.Millisecond
	r := e.start(cfg)
	for i := range 10 {
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "a-"+strconv.Itoa(i)), nil)
	}
	e.waitCount(pipeline.DefaultOutputStream, 10, 10*time.Second)
	e.drained(10 * time.Second)

	l := watchReady(t, r.p)
	srv.Shutdown()
	l.said(t, 5*time.Second, "not connected to NATS")
	// The outage itself, not a wait for a condition: it spans several status polls, each of which finds the
	// connection down (a poll while disconnected makes no request, so there is nothing to observe).
	time.Sleep(4 * cfg.StatusInterval)
	srv.Restart()
	back := time.Now()
	natstest.Eventually(t, 10*time.Second, func() error { return r.p.Ready(context.Background()) })
	if took := time.Since(back); took > 3*time.Second {
		t.Errorf("ready %s after the server was back", took)
	}
	l.end()
	reasons := l.all()
	t.Logf("readiness said: %q", reasons)
	var down string
	for _, why := range reasons {
		switch {
		case strings.Contains(why, "outbound buffer"):
			t.Errorf("readiness reported a request that never left the client: %q", why)
		case strings.Contains(why, "not connected to NATS"):
			if down == "" {
				down = why
			}
		case strings.Contains(why, "not answering"): // the server stops JetStream before it closes connections
		default:
			t.Errorf("readiness said %q: want the connection's state, or the server not answering while it stops", why)
		}
	}
	if !strings.Contains(down, "recovered its streams") || !strings.Contains(down, "resumes by itself") {
		t.Errorf("readiness said %q: want why it lasts (the server recovering its streams) and that it resumes", down)
	}

	for i := range 10 {
		natstest.Eventually(t, 10*time.Second, func() error {
			_, err := e.js.PublishMsg(context.Background(), &nats.Msg{Subject: "ingest.t1.gh",
				Header: hdr("X-GitHub-Delivery", "b-"+strconv.Itoa(i))})
			return err
		})
	}
	e.waitCount(pipeline.DefaultOutputStream, 20, 30*time.Second)
	e.drained(10 * time.Second)
}

// TestReadinessWindowRecovering restarts the cluster node that holds the window's bucket (one replica, on file)
// under a running pipeline whose streams are replicated three ways: the bucket does not answer until the node is
// back and has recovered it (a clustered server takes connections first and recovers its streams after). With
// the worker connected to another node throughout, readiness says the window does not answer; connected to the
// bucket's node, it reconnects to another one and says the window is recovering. Either way it names the bucket
// and is ready again by itself, and the events published meanwhile go out once each.
func TestReadinessWindowRecovering(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	for _, tc := range []struct {
		name   string
		onNode bool // the worker is connected to the bucket's node
		want   string
	}{
		{"connected to another node", false, "dedupe window not answering: bucket dedupe-window ("},
		{"connected to the bucket's node", true, "dedupe window recovering: bucket dedupe-window not answering yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := natstest.RunCluster(t, 3)
			setup := natstest.Connect(t, c.URLs())
			sjs, err := jetstream.New(setup)
			if err != nil {
				t.Fatal(err)
			}
			wcfg := kvwindow.DefaultConfig()
			wcfg.Timeout = time.Second
			// A fresh cluster (under -race, on a loaded machine) can take longer than the window's own 1s to
			// create the bucket: create it with more patience, retried until it answers.
			ccfg := wcfg
			ccfg.Timeout = 10 * time.Second
			natstest.Eventually(t, 60*time.Second, func() error {
				_, err := kvwindow.New(ctx(t), sjs, ccfg)
				return err
			})
			holder := c.StreamLeader("KV_"+wcfg.Bucket, 10*time.Second)
			var first string
			var rest []string
			for _, s := range c.Servers {
				if (s == holder) == tc.onNode && first == "" {
					first = s.URL()
				} else {
					rest = append(rest, s.URL())
				}
			}
			e := newEnvOn(t, nil, natstest.Connect(t, strings.Join(append([]string{first}, rest...), ","),
				nats.DontRandomize(), nats.ReconnectBufSize(-1)))
			// Bound with the test's short timeout, retried while unavailable as the worker retries it at its start
			// (a loaded machine, or the race detector, can leave the first read of a fresh bucket unanswered).
			var w *kvwindow.Window
			natstest.Eventually(t, 30*time.Second, func() error {
				var err error
				w, err = kvwindow.New(ctx(t), e.js, wcfg)
				if err != nil && (!errors.Is(err, kvwindow.ErrUnavailable) || errors.Is(err, kvwindow.ErrWindowLost)) {
					t.Fatal(err)
				}
				return err
			})
			cfg := e.config(w)
			cfg.Replicas = 3
			provisionRetried(t, sjs, cfg)
			r := e.start(cfg)
			send := func(prefix string) { sendRetried(t, sjs, prefix, 5, 10*time.Second) }
			send("a-")
			e.waitCount(pipeline.DefaultOutputStream, 5, 20*time.Second)

			l := watchReady(t, r.p)
			holder.Shutdown()
			l.said(t, 15*time.Second, tc.want)
			send("b-")
			send("a-") // retries of events the bucket holds
			holder.Restart()
			natstest.Eventually(t, 30*time.Second, func() error { return r.p.Ready(context.Background()) })
			l.end()
			reasons := l.all()
			t.Logf("readiness said: %q", reasons)
			for _, why := range reasons {
				if strings.Contains(why, "outbound buffer") {
					t.Errorf("readiness reported a request that never left the client: %q", why)
				}
			}
			e.waitCount(pipeline.DefaultOutputStream, 10, 30*time.Second)
			e.drained(30 * time.Second)
			if got := e.count(pipeline.DefaultOutputStream); got != 10 {
				t.Errorf("output holds %d messages, want 10", got)
			}
		})
	}
}
