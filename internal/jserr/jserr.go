// Package jserr sorts the errors of NATS and JetStream requests into the few categories the worker acts on:
//
//   - refused for good: the server answered and no retry changes its answer (Refused, TooLarge, WorkQueueTaken);
//   - conflict: a write that expected another last sequence of its subject (WrongLastSeq, LastSeq);
//   - not answering: no answer, or JetStream or its cluster not available for now; it passes by itself
//     (NotAnswering, Unanswered);
//   - no placement: the cluster cannot place a stream's replicas (NoPlacement, a 400 that Refused also reports).
//     It passes by itself when a server is offline or not yet known to the meta leader (a cluster just formed, a
//     server restarting in a rolling upgrade: the leader places only on peers it has had statistics from since
//     their route came up), and is permanent when DEDUPE_REPLICAS exceeds the servers available or the window's
//     placement (DEDUPE_WINDOW_PLACEMENT) names a cluster or tags no server has. The code does not tell which (the
//     server's text may: "peer offline", "tags not matched [...]"), so the worker's start retries it and names the
//     causes and settings (PlacementError);
//   - client offline: the request never left the client, or the first connection found no server (Offline,
//     Unreachable).
//
// It reads the server's error codes (jetstream.JSErrCode*, and the few the client does not name, below) through
// *jetstream.APIError, never the server's text where a code exists; the two places that must read text say why.
package jserr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The server's error codes that nats.go does not name (nats-server's server/jetstream_errors_generated.go).
const (
	CodeNoSuitablePeers        jetstream.ErrorCode = 10005 // "no suitable peers for placement" (400), with the reasons per peer
	CodeClusterUnavailable     jetstream.ErrorCode = 10008 // "JetStream system temporarily unavailable" (503): no meta leader
	CodeStoreFailed            jetstream.ErrorCode = 10077 // "message too large", among other store failures
	CodeHeaderTooLarge         jetstream.ErrorCode = 10097 // "header size exceeds maximum allowed of 64k"
	CodeWorkQueueUnfiltered    jetstream.ErrorCode = 10099 // "multiple non-filtered consumers not allowed on workqueue stream"
	CodeWorkQueueNotUnique     jetstream.ErrorCode = 10100 // "filtered consumer not unique on workqueue stream"
	CodeStreamOffline          jetstream.ErrorCode = 10118 // "stream is offline" (500): its replicas' servers gone for now
	CodeExpectedStreamMismatch jetstream.ErrorCode = 10060 // "expected stream does not match"
)

// API returns the server's answer err carries, or nil when the server did not answer.
func API(err error) *jetstream.APIError {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api
	}
	return nil
}

// Code is the server's error code in err, or 0.
func Code(err error) jetstream.ErrorCode {
	if api := API(err); api != nil {
		return api.ErrorCode
	}
	return 0
}

// Refused reports whether the server answered with a refusal no retry changes (an API error below 500). Errors
// without the server's answer (timeouts, no responders, the connection's) and 5xx answers may go away by themselves.
func Refused(err error) bool {
	api := API(err)
	return api != nil && api.Code < http.StatusInternalServerError
}

// TooLarge reports whether a publish can never be stored because of its size: over the connection's maximum
// payload, the stream's maximum message size, or JetStream's 64 KiB header block.
func TooLarge(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	switch api := API(err); {
	case api == nil:
		return false
	case api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum, api.ErrorCode == CodeHeaderTooLarge:
		return true
	case api.ErrorCode == CodeStoreFailed:
		// 10077 is every failure of the store ("resource limits exceeded" among them, which passes); only its text
		// tells a message too large for the store, and no other code carries that.
		return strings.Contains(strings.ToLower(api.Description), "message too large")
	}
	return false
}

// NoPlacement reports the cluster's refusal to place a stream's replicas (10005, "no suitable peers for placement").
func NoPlacement(err error) bool { return Code(err) == CodeNoSuitablePeers }

// PlacementError is the cluster's refusal to place What (a stream or a bucket, named) with Replicas replicas
// (NoPlacement of Err). Its text is the warning of a start that waits for it: the server's text, which may name the
// cause ("peer offline", "tags not matched [...]"; none for a cluster that does not exist), and the causes with the
// settings that decide them.
type PlacementError struct {
	What     string
	Replicas int
	// Placement is DEDUPE_WINDOW_PLACEMENT's value when it places What (a window bucket), else empty: a stream or
	// a bucket without placement goes to any server of the cluster.
	Placement string
	Err       error
}

func (e *PlacementError) Error() string {
	text := e.Err.Error()
	if api := API(e.Err); api != nil {
		text = api.Description
	}
	if e.Placement != "" {
		return fmt.Sprintf("the cluster cannot place %s with %d replicas (%s): DEDUPE_WINDOW_PLACEMENT (%q) may name "+
			"a cluster or tags no server has, or DEDUPE_REPLICAS is more than the servers it selects, or one of them "+
			"may be offline or not yet known to the meta leader; retrying", e.What, e.Replicas, text, e.Placement)
	}
	return fmt.Sprintf("the cluster cannot place %s with %d replicas (%s): a server may be offline or not yet known "+
		"to the meta leader, or DEDUPE_REPLICAS is more than the servers available; retrying", e.What, e.Replicas, text)
}

// Setting is the setting most likely wrong when the refusal lasts: DEDUPE_WINDOW_PLACEMENT when it places What,
// else DEDUPE_REPLICAS.
func (e *PlacementError) Setting() string {
	if e.Placement != "" {
		return "DEDUPE_WINDOW_PLACEMENT"
	}
	return "DEDUPE_REPLICAS"
}

func (e *PlacementError) Unwrap() error { return e.Err }

// Lasted is the error line of a refusal that has lasted d: a setting is then the likely cause.
func (e *PlacementError) Lasted(d time.Duration) string {
	return fmt.Sprintf("the cluster has refused to place %s for %s: %s is the likely cause, not a server restarting; "+
		"still retrying", e.What, d, e.Setting())
}

// PlacementStuckAfter is how long the cluster's refusal to place a stream or a bucket lasts before a start that
// waits for it says, once at ERROR, that a setting is the likely cause: a server restarting or just joined is known
// to the meta leader well within it.
const PlacementStuckAfter = 2 * time.Minute

// Refusals follows the placement refusals in a row of a start that waits for them, to say once that they lasted.
// The zero value has seen none.
type Refusals struct {
	since time.Time // the first refusal of those in a row; zero when the last attempt was not refused
	said  bool
}

// Lasted records an attempt at now (refused: NoPlacement of its error) and reports whether to say now that the
// refusals in a row have lasted after: once for a start, at the first attempt that finds them lasted.
func (r *Refusals) Lasted(refused bool, now time.Time, after time.Duration) bool {
	if !refused {
		r.since = time.Time{}
		return false
	}
	if r.since.IsZero() {
		r.since = now
	}
	if r.said || now.Sub(r.since) < after {
		return false
	}
	r.said = true
	return true
}

// WorkQueueTaken reports the server's refusal of a second consumer over the same subjects of a work-queue stream.
func WorkQueueTaken(err error) bool {
	c := Code(err)
	return c == CodeWorkQueueUnfiltered || c == CodeWorkQueueNotUnique
}

// MsgNotFound reports the server's "no message found" to a message get.
func MsgNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrMsgNotFound) || Code(err) == jetstream.JSErrCodeMessageNotFound
}

// WrongLastSeq reports whether err is the server's "wrong last sequence" answer to a write that expected another
// last sequence of its subject (10071, or 10164 on replicated streams), with its code.
func WrongLastSeq(err error) (jetstream.ErrorCode, bool) {
	switch c := Code(err); c {
	case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
		return c, true
	}
	return 0, false
}

// LastSeq reads the subject's last sequence from a 10071 answer ("wrong last sequence: 42"). The server puts it
// in the description alone: the API error has no field for it, and 10164 (replicated streams) does not give it.
func LastSeq(err error) (uint64, bool) {
	api := API(err)
	if api == nil || api.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		return 0, false
	}
	d, ok := strings.CutPrefix(api.Description, "wrong last sequence: ")
	if !ok {
		return 0, false
	}
	n, perr := strconv.ParseUint(d, 10, 64)
	return n, perr == nil && n > 0
}

// Unanswered reports whether a request got no answer (no reply in time, no responders), or JetStream's
// "temporarily unavailable" (10008, a cluster without a meta leader): only those may go away by themselves when
// creating a stream. Another 503 (insufficient resources, a store that cannot be set up) waits for an operator.
func Unanswered(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		Code(err) == CodeClusterUnavailable
}

// MayHaveLanded reports whether a request that failed with err may still have done its work, with only its answer
// lost: it was sent and no answer came back (none in time, the caller's context ended, the connection lost under
// it). A server's refusal, and no responders (nothing to take it), did nothing.
func MayHaveLanded(err error) bool {
	switch {
	case API(err) != nil, errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return false
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting)
}

// NotAnswering reports whether the server did not answer rather than refused: no reply before the deadline, no
// responders on the JetStream API, JetStream or its cluster not available (503), the server shutting down, the
// stream offline (its servers gone from the cluster for now). A server that is stopping, or back but still
// recovering its streams, and a stream without a leader, give that until they are back: it passes by itself.
// An error of a disconnected client is not one (the request never left: Offline).
func NotAnswering(err error) bool {
	// Unanswered's 10008 is a 503 too.
	if Unanswered(err) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrServerShutdown) {
		return true
	}
	api := API(err)
	return api != nil && (api.Code == http.StatusServiceUnavailable || api.ErrorCode == CodeStreamOffline)
}

// Offline reports whether err is the client's, not the server's: nc is not connected, or the request was never
// sent (no reconnect buffer: a publish while disconnected fails at once) or the connection went away under it.
// Such an error says nothing about a consumer, a stream or a bucket.
func Offline(nc *nats.Conn, err error) bool {
	return !nc.IsConnected() || errors.Is(err, nats.ErrReconnectBufExceeded) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrConnectionClosed)
}

// Unreachable reports whether a failed first connection means "the server is not there (yet)": refused, reset,
// timed out, a name that does not resolve, a connection closed during the handshake. Anything else — the server's
// -ERR (authorization violation and the like), a TLS alert or a certificate it does not trust, a bad option — is
// not worth retrying.
func Unreachable(err error) bool {
	if errors.Is(err, nats.ErrTLS) {
		// The connection closed right after the TLS handshake (io.EOF, a reset or a broken pipe, depending on
		// timing): the server refused the client certificate.
		return false
	}
	if errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	// Socket errors (dial, read, write) come as *net.OpError; a TLS alert from the server too, with Op "remote
	// error": the server refuses our certificate (or the lack of one), which no retry changes. A bare errno (from
	// reading a file) is not a socket error, though it implements net.Error.
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op != "remote error"
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
