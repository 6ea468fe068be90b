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

// bodyBuf is a request's body buffer and what it holds of MaxBufferedBytes. A value in the handler's frame: no
// allocation besides the buffer itself, which comes from bodyPool for most deliveries.
type bodyBuf struct {
	r      *Receiver
	buf    []byte
	held   int64   // bytes taken from r.buffered: cap(buf)
	pooled *[]byte // buf's pool entry, if it is one
}

// release gives the buffer and its bytes back; the body must no longer be used (after the publish).
func (b *bodyBuf) release() {
	if b.pooled != nil {
		bodyPool.Put(b.pooled)
		b.pooled = nil
	}
	b.r.buffered.give(b.held)
	b.held, b.buf = 0, nil
}

// grow makes room for more of a body of at most limit bytes, taking it from MaxBufferedBytes first.
func (b *bodyBuf) grow(limit int64) error {
	if cap(b.buf) == 0 {
		if !b.r.buffered.take(bodyStep) {
			return errBufferFull
		}
		b.held, b.pooled = bodyStep, bodyPool.Get().(*[]byte)
		b.buf = (*b.pooled)[:0]
		return nil
	}
	c := int64(cap(b.buf))
	size := min(2*c, limit+1) // +1: room for the read that finds one byte too many
	if size <= c {
		size = c + bodyStep
	}
	if !b.r.buffered.take(size - c) {
		return errBufferFull
	}
	b.held += size - c
	nb := make([]byte, len(b.buf), size)
	copy(nb, b.buf)
	if b.pooled != nil { // the copy replaces the pooled buffer
		bodyPool.Put(b.pooled)
		b.pooled = nil
	}
	b.buf = nb
	return nil
}

// readBody reads the whole body into b, at most MaxBody bytes (*http.MaxBytesError past it), within BodyTimeout
// of now, counting the buffer against MaxBufferedBytes as it grows (errBufferFull when it cannot). Call
// b.release once the body is no longer used, even on error.
func (r *Receiver) readBody(w http.ResponseWriter, req *http.Request, b *bodyBuf) error {
	b.r = r
	r.metrics.reading.Inc()
	defer r.metrics.reading.Dec()
	if req.Body == nil || req.ContentLength == 0 {
		return nil
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(r.cfg.BodyTimeout)); err == nil {
		// The rest of the exchange is bounded by the server's WriteTimeout; a deadline left set would cut the
		// connection's background read, and with it the request's context, during the publish.
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	} // else not a server's connection (a test's recorder): no deadline to set

	limit := r.cfg.MaxBody
	var rd io.Reader = req.Body // with a Content-Length (at most MaxBody, checked), net/http reads no further
	if req.ContentLength > 0 {
		limit = req.ContentLength
	} else {
		rd = http.MaxBytesReader(w, req.Body, r.cfg.MaxBody)
	}
	for {
		if len(b.buf) == cap(b.buf) {
			if err := b.grow(limit); err != nil {
				return err
			}
		}
		n, err := rd.Read(b.buf[len(b.buf):cap(b.buf)])
		b.buf = b.buf[:len(b.buf)+n]
		if err == io.EOF || err == nil && req.ContentLength > 0 && int64(len(b.buf)) == req.ContentLength {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
