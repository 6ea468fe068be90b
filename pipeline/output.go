package pipeline

import (
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/keys"
)

// unpublishable says why out can never be stored by the output stream ("" when it can): its header block over
// JetStream's 64 KiB, or headers and body over the server's maximum payload or the stream's maximum message size.
func (p *Pipeline) unpublishable(out *nats.Msg) string {
	hdr := headerSize(out.Header)
	if hdr > maxHeaderBlock {
		return fmt.Sprintf("the event's header block would be %d bytes, over JetStream's limit of %d", hdr, maxHeaderBlock)
	}
	size := int64(hdr + len(out.Data))
	if mp := p.nc.MaxPayload(); mp > 0 && size > mp {
		return fmt.Sprintf("the event would be %d bytes (headers %d, body %d), over the server's maximum payload of %d",
			size, hdr, len(out.Data), mp)
	}
	if mm := p.outMaxMsgSize.Load(); mm > 0 && size > mm {
		if mm, over := p.outputLimitNow(size); over {
			return fmt.Sprintf("the event would be %d bytes (headers %d, body %d), over stream %s's maximum message size of %d",
				size, hdr, len(out.Data), p.cfg.OutputStream, mm)
		}
	}
	return ""
}

// maxHeaderBlock is the largest header block JetStream stores (error 10097 beyond it).
const maxHeaderBlock = 1<<16 - 1

// headerSize is the size of h as the client writes it: "NATS/1.0\r\n", "Name: value\r\n" per value, "\r\n".
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n") + 2
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

// headers resets the worker's outbound message to subject and body with the inbound headers minus reserved ones
// (contract.Reserved when keepIdempotency, for dead letters), sharing their value slices.
func (w *worker) headers(subject string, in nats.Header, body []byte, keepIdempotency bool) *nats.Msg {
	out := &w.out.msg
	h := out.Header
	clear(h)
	reserved := contract.ReservedOnEvent
	if keepIdempotency {
		reserved = contract.Reserved
	}
	for k, v := range in {
		if !reserved(k) {
			h[k] = v
		}
	}
	out.Subject, out.Data, out.Reply = subject, body, ""
	return out
}

func (w *worker) set(i int, name, value string) {
	vals := &w.out.vals
	vals[i] = value
	w.out.msg.Header[name] = vals[i : i+1 : i+1]
}

// envelopeID appends the envelope's identity, "<input stream>/<seq>/<stamp>": its sequence and the time the input
// stream stored it, so that ids stay distinct when the stream is deleted and re-created (sequences restart).
func (w *worker) envelopeID(b []byte) []byte {
	b = append(b, w.p.cfg.InputStream...)
	b = append(b, '/')
	b = strconv.AppendUint(b, w.e.seq, 10)
	b = append(b, '/')
	return strconv.AppendInt(b, w.e.stamp, 10)
}

// buildOutput builds the unique (keyed) or unkeyed event for the output stream. Every id derives from the envelope
// alone, so every delivery of one envelope publishes under the same Nats-Msg-Id, whatever the claim's revision.
func (w *worker) buildOutput(in nats.Header, body []byte, keyed bool) *nats.Msg {
	p, e := w.p, &w.e
	w.headers(contract.Republish(p.cfg.OutputPrefix, e.tail), in, body, false)
	if keyed {
		hk := keys.HeaderValue(e.key)
		id, n := w.keyedID(hk)
		w.set(0, contract.HeaderIdempotencyKey, id[:n])
		w.set(1, contract.HeaderMsgID, id)
		w.set(2, contract.HeaderKey, hk)
		w.set(3, contract.HeaderStatus, contract.StatusUnique)
		w.setOrigin()
		return &w.out.msg
	}
	id := w.seqID(contract.UnkeyedIDPrefix)
	w.set(0, contract.HeaderIdempotencyKey, id)
	w.set(1, contract.HeaderMsgID, id)
	w.set(3, contract.HeaderStatus, contract.StatusUnkeyed)
	w.set(4, contract.HeaderReason, string(e.reason))
	if e.key != "" {
		// A keyed envelope forwarded while the window is down (the only unkeyed output with a key): an earlier or
		// later delivery of it may publish keyed, so it keeps the keyed Nats-Msg-Id and the output's duplicate
		// window collapses the two.
		hk := keys.HeaderValue(e.key)
		msgID, _ := w.keyedID(hk)
		w.set(1, contract.HeaderMsgID, msgID)
		w.set(2, contract.HeaderKey, hk)
	}
	w.setOrigin()
	return &w.out.msg
}

// keyedID is the Nats-Msg-Id of the envelope's keyed event, "<tenant>:<source>:<key>#<envelope>" (hk, the key as
// a header carries it), and the length of its idempotency-key part.
func (w *worker) keyedID(hk string) (string, int) {
	e := &w.e
	b := append(w.buf[:0], e.tenant...)
	b = append(b, ':')
	b = append(b, e.source...)
	b = append(b, ':')
	b = append(b, hk...)
	n := len(b)
	b = append(b, '#')
	b = w.envelopeID(b)
	id := string(b)
	w.buf = b[:0]
	return id, n
}

func (w *worker) setOrigin() {
	w.set(5, contract.HeaderInputStream, w.p.cfg.InputStream)
	w.set(6, contract.HeaderInputSeq, strconv.FormatUint(w.e.seq, 10))
}

func (w *worker) buildDuplicate(in nats.Header, body []byte) *nats.Msg {
	p, e := w.p, &w.e
	w.headers(contract.Republish(p.cfg.DuplicatesPrefix, e.tail), in, body, false)
	w.set(0, contract.HeaderIdempotencyKey, keys.IdempotencyHeader(e.tenant, e.source, e.key))
	w.set(1, contract.HeaderMsgID, w.seqID(contract.DuplicateIDPrefix))
	w.set(2, contract.HeaderKey, keys.HeaderValue(e.key))
	w.set(3, contract.HeaderStatus, contract.StatusDuplicate)
	w.setOrigin()
	return &w.out.msg
}

func (w *worker) buildDeadLetter(subject string, in nats.Header, body []byte, reason, why string) *nats.Msg {
	p := w.p
	out := w.headers(contract.DeadLetterSubject(p.cfg.DLQPrefix, reason), in, body, true)
	if contract.ControlShaped(in, body) {
		// Never store a dead letter that NATS clients would take for a status message (dlq ls reads them too).
		for _, name := range [...][2]string{{contract.NATSStatus, contract.HeaderOriginalStatus}, {contract.NATSDescription, contract.HeaderOriginalDescription}} {
			if v, ok := out.Header[name[0]]; ok {
				delete(out.Header, name[0])
				out.Header[name[1]] = v
			}
		}
	}
	return w.deadLetterHeaders(subject, why)
}

func (w *worker) deadLetterHeaders(subject, why string) *nats.Msg {
	w.set(0, contract.HeaderError, why)
	w.set(1, contract.HeaderSubject, subject)
	w.set(2, contract.HeaderMsgID, w.seqID(contract.DeadLetterIDPrefix))
	w.setOrigin()
	return &w.out.msg
}

// trimmedRoom is what a trimmed dead letter leaves of the server's max payload for its subject and headers.
const trimmedRoom = 8 << 10

// buildTrimmedDeadLetter is the dead letter of an envelope too large to be dead-lettered whole: none of the
// sender's headers, at most keep bytes of the body, and Dedupe-Truncated saying what was dropped.
func (w *worker) buildTrimmedDeadLetter(subject string, in nats.Header, body []byte, reason, why string, keep int) *nats.Msg {
	p := w.p
	hdrBytes := headerSize(in) - headerSize(nil) // the sender's "Name: value\r\n" lines
	kept := body[:min(len(body), keep)]
	w.headers(contract.DeadLetterSubject(p.cfg.DLQPrefix, reason), nil, kept, true)
	w.deadLetterHeaders(subject, why)
	w.set(4, contract.HeaderTruncated, fmt.Sprintf("sender headers (%d bytes) dropped; body %d of %d bytes kept; the original is message %d of stream %s",
		hdrBytes, len(kept), len(body), w.e.seq, p.cfg.InputStream))
	return &w.out.msg
}

func (w *worker) seqID(prefix string) string {
	b := append(w.buf[:0], prefix...)
	b = w.envelopeID(b)
	w.buf = b[:0]
	return string(b)
}
