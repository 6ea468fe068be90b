package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dedupeworker/dedupeworker/internal/backoff"
)

// startStatus is what /readyz answers: while a role starts, the step it waits for; once it runs, its readiness.
// Both roles listen before their first step, so that a start that hangs shows in the probes, not as a dead port.
type startStatus struct {
	waiting atomic.Pointer[string]
	ready   atomic.Pointer[func(context.Context) error]
}

func (s *startStatus) wait(format string, args ...any) {
	reason := fmt.Sprintf(format, args...)
	s.waiting.Store(&reason)
}

func (s *startStatus) running(ready func(context.Context) error) { s.ready.Store(&ready) }

// check is nil when the role is ready, else why not.
func (s *startStatus) check(ctx context.Context) error {
	if ready := s.ready.Load(); ready != nil {
		return (*ready)(ctx)
	}
	if reason := s.waiting.Load(); reason != nil {
		return errors.New(*reason)
	}
	return errors.New("starting")
}

// startingHandler answers on ingest's address until the receiver takes it over: /healthz 200, /readyz 503 with
// the step the start waits for, /metrics; any other request (a delivery) 503 with Retry-After, which providers
// retry, as the receiver answers while JetStream cannot store deliveries.
func startingHandler(st *startStatus, reg prometheus.Gatherer, retryAfter time.Duration) http.Handler {
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	retry := fmt.Sprint(int64((retryAfter + time.Second - 1) / time.Second))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch path := r.URL.Path; {
		case path != "/healthz" && path != "/readyz" && path != "/metrics":
			w.Header().Set("Retry-After", retry)
			writePlain(w, http.StatusServiceUnavailable, "ingest is starting: "+st.check(r.Context()).Error())
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			writePlain(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: GET")
		case path == "/healthz":
			writePlain(w, http.StatusOK, "ok")
		case path == "/readyz":
			writePlain(w, http.StatusServiceUnavailable, "not ready: "+st.check(r.Context()).Error())
		default:
			metrics.ServeHTTP(w, r)
		}
	})
}

// writePlain answers status with one line of text.
func writePlain(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text+"\n")
}

// handoff passes the connections of one listener to one server after another: first the one that answers while
// the role starts, then the role's own (whose Serve owns its http.Server). The port stays bound throughout and
// connections that arrive during the change wait in the listen backlog: none is refused. The listener closes
// when the last server closes its side.
type handoff struct {
	ln     net.Listener
	cur    atomic.Pointer[handoffListener]
	failed chan struct{} // closed when ln's Accept failed for good (err)
	err    error
}

// newHandoff starts accepting on ln and returns the listener of the first server.
func newHandoff(ln net.Listener) (*handoff, net.Listener) {
	h := &handoff{ln: ln, failed: make(chan struct{})}
	first := h.next()
	go h.accept()
	return h, first
}

// next returns a listener that receives every connection from now on. The previous one gets no more; its server
// shuts down on its own.
func (h *handoff) next() net.Listener {
	l := &handoffListener{h: h, conns: make(chan net.Conn), closed: make(chan struct{})}
	h.cur.Store(l)
	return l
}

func (h *handoff) accept() {
	bo := backoff.Backoff{Min: 5 * time.Millisecond, Max: time.Second}
	for {
		c, err := h.ln.Accept()
		if err != nil {
			// As net/http's Serve: out of file descriptors and the like pass; anything else (closed) ends it.
			var te interface{ Temporary() bool }
			if !errors.Is(err, net.ErrClosed) && errors.As(err, &te) && te.Temporary() {
				time.Sleep(bo.Next())
				continue
			}
			h.err = err
			close(h.failed)
			return
		}
		bo.Reset()
		h.deliver(c)
	}
}

// deliver hands c to the current listener's server, waiting until it accepts; a listener closed meanwhile passes
// it on to its successor, and with none c is closed.
func (h *handoff) deliver(c net.Conn) {
	for {
		l := h.cur.Load()
		select {
		case l.conns <- c:
			return
		case <-l.closed:
			if h.cur.Load() == l {
				_ = c.Close()
				return
			}
		}
	}
}

// handoffListener is one server's side of a handoff.
type handoffListener struct {
	h      *handoff
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case <-l.closed: // before a connection that is also waiting: a closed listener accepts nothing
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.h.failed:
		return nil, l.h.err
	}
}

// Close stops this server's share; the last one's Close closes the port.
func (l *handoffListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.closed)
		if l.h.cur.Load() == l {
			err = l.h.ln.Close()
		}
	})
	return err
}

func (l *handoffListener) Addr() net.Addr { return l.h.ln.Addr() }
