package receiver

import (
	"bytes"
	"net"
)

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
