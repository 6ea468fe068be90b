package receiver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// serverHeaderSlack is how much larger than MaxHeaderBytes a request's raw header section may be before net/http
// refuses it on its own: dropped headers (Cookie, Authorization) do not count in MaxHeaderBytes.
const serverHeaderSlack = 64 << 10

// Serve serves the Receiver on ln until ctx ends, then shuts down gracefully: the listener closes at once (Ready
// turns false first), requests in flight finish — each up to its publish's acknowledgement — within
// Config.ShutdownTimeout, and whatever is still running then is cut. It returns once the server's goroutine has
// ended: nil after a clean shutdown, an error when requests had to be cut or the listener failed. Call it once.
func (r *Receiver) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           r,
		ReadHeaderTimeout: min(10*time.Second, r.cfg.ReadTimeout),
		ReadTimeout:       r.cfg.ReadTimeout,
		// From the end of the request's headers: reading the body, verifying, publishing, answering.
		WriteTimeout: r.cfg.ReadTimeout + r.cfg.PublishTimeout + 5*time.Second,
		IdleTimeout:  2 * time.Minute,
		// Room above MaxHeaderBytes, so that the handler sees most oversized headers itself and answers (and counts)
		// 431 with their source; what passes even this gets net/http's own 431, counted by stockCounter.
		MaxHeaderBytes: r.cfg.MaxHeaderBytes + serverHeaderSlack,
		ErrorLog:       slog.NewLogLogger(r.log.Handler(), slog.LevelDebug), // TLS probes, resets: noise
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(stockCounter{ln, r.metrics}) }()
	select {
	case err := <-served:
		return fmt.Errorf("receiver: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	r.closing.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout)
	defer cancel()
	var err error
	if serr := srv.Shutdown(sctx); serr != nil {
		_ = srv.Close()
		err = fmt.Errorf("receiver: shutdown: requests still running after %s were cut: %w", r.cfg.ShutdownTimeout, serr)
	}
	<-served // http.ErrServerClosed, now that Shutdown or Close returned
	return err
}

// stock431 is what net/http writes, straight to the connection and before any handler runs, when a request's
// header section is larger than the server's MaxHeaderBytes (net/http's server.go, errTooLarge). The receiver's
// own answers never equal it: they go through the server's buffered writer with a Date and X-Content-Type-Options.
var stock431 = []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Connection: close\r\n\r\n431 Request Header Fields Too Large")

// stockCounter wraps Serve's listener so that net/http's own 431 answers are counted too, as headers_too_large of
// source "other" (the request line is never parsed: no source is known).
type stockCounter struct {
	net.Listener
	metrics *Metrics
}

func (l stockCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stockConn{Conn: c, metrics: l.metrics}, nil
}

type stockConn struct {
	net.Conn
	metrics *Metrics
}

func (c *stockConn) Write(p []byte) (int, error) {
	if len(p) == len(stock431) && bytes.Equal(p, stock431) {
		c.metrics.requests.WithLabelValues(otherSource, OutcomeHeadersTooLarge).Inc()
	}
	return c.Conn.Write(p)
}

// CloseWrite lets net/http half-close the connection after an error answer (closeWriteAndWait), as it does on a
// bare *net.TCPConn, so that the client reads the answer rather than a reset.
func (c *stockConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
