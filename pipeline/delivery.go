package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/internal/natsreq"
)

// delivery is one envelope as the consumer delivered it, with what its ack subject says about it and the moment
// (p.clock) the pull subscription received it.
type delivery struct {
	msg       *nats.Msg
	at        time.Duration
	stream    string // the stream named in the ack subject
	seq       uint64 // sequence in the input stream
	delivered uint64 // JetStream's delivery count (1 = first delivery)
	stamp     int64  // the stream's timestamp of the message (unix ns): with seq, the envelope's identity
}

// ackPrefix starts every reply subject of a JetStream delivery, whatever the domain or API prefix.
const ackPrefix = "$JS.ACK."

// parseAckSubject reads a delivery's reply subject, in either of the server's forms:
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>                             (9 tokens)
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.…] (11 or more)
//
// ok is false for anything else: a message without such a reply did not come from the consumer, whatever its
// headers say (a server status message has no reply subject).
func parseAckSubject(reply string) (stream string, delivered, seq uint64, stamp int64, ok bool) {
	rest, found := strings.CutPrefix(reply, ackPrefix)
	if !found {
		return "", 0, 0, 0, false
	}
	var tok [10]string
	n := 0
	for n < len(tok) {
		var t string
		t, rest, found = strings.Cut(rest, ".")
		tok[n] = t
		n++
		if !found {
			break
		}
	}
	// n counts the tokens after "$JS.ACK." (at most 10; more are ignored): 7 for the old form, 9+ for the new.
	var fields []string
	switch {
	case n == 7 && !found:
		fields = tok[0:7] // stream, consumer, delivered, sseq, cseq, tm, pending
	case n >= 9:
		fields = tok[2:9]
	default:
		return "", 0, 0, 0, false
	}
	stream = fields[0]
	var err1, err2, err3 error
	delivered, err1 = strconv.ParseUint(fields[2], 10, 64)
	seq, err2 = strconv.ParseUint(fields[3], 10, 64)
	stamp, err3 = strconv.ParseInt(fields[5], 10, 64)
	if stream == "" || err1 != nil || err2 != nil || err3 != nil || seq == 0 {
		return "", 0, 0, 0, false
	}
	return stream, delivered, seq, stamp, true
}

// Acknowledgement bodies (the server's protocol).
var (
	ackBody = []byte("+ACK")
	nakBody = []byte("-NAK")
)

// ackMsg acknowledges the delivery and waits for the server's answer: "no responders" when no consumer serves the
// ack subject any more, a timeout when the answer did not come. m is the caller's to reuse once ackMsg returns.
func (p *Pipeline) ackMsg(ctx context.Context, d *delivery, m *nats.Msg) error {
	*m = nats.Msg{Subject: d.msg.Reply, Data: ackBody}
	_, err := p.req.Request(ctx, m, p.ackTimeout())
	return err
}

// ackTimeout bounds the wait for an ack's answer: short against the ack wait, so that an unconfirmed ack is
// recorded in the claim long before the envelope could be delivered again.
func (p *Pipeline) ackTimeout() time.Duration {
	return min(p.cfg.PublishTimeout, max(p.cfg.AckWait/4, 500*time.Millisecond))
}

func (p *Pipeline) nakMsg(d *delivery, delay time.Duration) error {
	if delay <= 0 {
		return p.nc.Publish(d.msg.Reply, nakBody)
	}
	b := make([]byte, 0, 40)
	b = append(b, `-NAK {"delay": `...)
	b = strconv.AppendInt(b, int64(delay), 10)
	b = append(b, '}')
	return p.nc.Publish(d.msg.Reply, b)
}

// inputHolds reports whether the input stream still holds the envelope (seq, stored at stamp), asking the stream's
// leader (a replica could still hold a message the leader has removed).
func (p *Pipeline) inputHolds(ctx context.Context, seq uint64, stamp int64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := strconv.AppendUint([]byte(`{"seq":`), seq, 10)
	req = append(req, '}')
	resp, err := p.nc.RequestWithContext(ctx, p.apiPrefix+"STREAM.MSG.GET."+p.cfg.InputStream, req)
	if err != nil {
		return false, err
	}
	m, err := natsreq.ParseStoredMsg(resp.Data)
	switch {
	case jserr.MsgNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("pipeline: message get %s/%d: %w", p.cfg.InputStream, seq, err)
	}
	return m.Time.UnixNano() == stamp, nil
}
