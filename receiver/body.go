package receiver

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// errBufferFull: reading on would hold more than MaxBufferedBytes of bodies at once.
var errBufferFull = errors.New("receiver: body buffers full")

// bodyStep is how far a body buffer grows ahead of what has arrived: what a client that withholds its body holds.
const bodyStep = 16 << 10

// byteBudget counts the body bytes held by all requests against a limit.
type byteBudget struct {
	limit int64
	used  atomic.Int64
	gauge prometheus.Gauge
}

// take reserves n bytes, or reports false when that would pass the limit.
func (b *byteBudget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			b.gauge.Add(float64(n))
			return true
		}
	}
}

func (b *byteBudget) give(n int64) {
	if n > 0 {
		b.used.Add(-n)
		b.gauge.Sub(float64(n))
	}
}

// bodyPool holds buffers of bodyStep bytes: most deliveries fit one, and reusing it saves an allocation and its
// zeroing per request. Larger buffers are left to the garbage collector.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, bodyStep); return &b }}

// readBody reads the whole body, at most MaxBody bytes (*http.MaxBytesError past it), within BodyTimeout of now,
// counting its buffer against MaxBufferedBytes as it grows (errBufferFull when it cannot). release gives the
// buffer back; call it once the body is no longer used (after the publish), even on error.
func (r *Receiver) readBody(w http.ResponseWriter, req *http.Request) (body []byte, release func(), err error) {
	r.metrics.reading.Inc()
	defer r.metrics.reading.Dec()
	if req.Body == nil || req.ContentLength == 0 {
		return nil, func() {}, nil
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(r.cfg.BodyTimeout)); err == nil {
		// The rest of the exchange is bounded by the server's WriteTimeout; a deadline left set would cut the
		// connection's background read, and with it the request's context, during the publish.
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	} // else not a server's connection (a test's recorder): no deadline to set

	var held int64
	var pooled *[]byte
	release = func() {
		if pooled != nil {
			bodyPool.Put(pooled)
			pooled = nil
		}
		r.buffered.give(held)
		held = 0
	}
	limit := r.cfg.MaxBody
	if n := req.ContentLength; n > 0 {
		limit = n // net/http never reads past Content-Length
	}
	grow := func(buf []byte) ([]byte, error) {
		if cap(buf) == 0 {
			if !r.buffered.take(bodyStep) {
				return buf, errBufferFull
			}
			held, pooled = bodyStep, bodyPool.Get().(*[]byte)
			return (*pooled)[:0], nil
		}
		size := min(2*int64(cap(buf)), limit+1) // +1: room for the read that finds one byte too many
		if size <= int64(cap(buf)) {
			size = int64(cap(buf)) + bodyStep
		}
		if !r.buffered.take(size - int64(cap(buf))) {
			return buf, errBufferFull
		}
		held += size - int64(cap(buf))
		nb := make([]byte, len(buf), size)
		copy(nb, buf)
		if pooled != nil { // the copy replaces the pooled buffer
			bodyPool.Put(pooled)
			pooled = nil
		}
		return nb, nil
	}
	rd := http.MaxBytesReader(w, req.Body, r.cfg.MaxBody)
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			if buf, err = grow(buf); err != nil {
				return nil, release, err
			}
		}
		n, rerr := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if rerr == io.EOF || rerr == nil && req.ContentLength > 0 && int64(len(buf)) == req.ContentLength {
			return buf, release, nil
		}
		if rerr != nil {
			return nil, release, rerr
		}
	}
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
