package jserr_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
)

// TestUnreachable: a failed first connection is retried only when no server answered at the address (the client's
// own errors: a real server's refusals are in TestClassify).
func TestUnreachable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cases := []struct {
		err  error
		want bool
	}{
		{nats.ErrNoServers, true},
		{fmt.Errorf("x: %w", nats.ErrTimeout), true},
		{io.EOF, true},
		{dial, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "nats", IsNotFound: true}}, true},
		{&net.DNSError{Err: "server misbehaving", Name: "nats"}, true},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, false},
		{fmt.Errorf("%w: connection closed by remote after TLS handshake: %w", nats.ErrTLS, io.EOF), false},
		{nats.ErrAuthorization, false},
		{&fs.PathError{Op: "open", Path: "/x.creds", Err: syscall.ENOENT}, false},
		{syscall.ETIMEDOUT, false}, // a bare errno is no socket error
		{errors.New("nats: maximum connections exceeded"), false},
	}
	for _, tc := range cases {
		if got := jserr.Unreachable(tc.err); got != tc.want {
			t.Errorf("Unreachable(%#v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
