package receiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// serveHook handles a delivery and returns its outcome. The checks go from the cheapest to the dearest; the publish
// slot is taken only once the body is in, so that what a slow client holds is its bytes, never another delivery's
// turn.
func (r *Receiver) serveHook(w http.ResponseWriter, req *http.Request) string {
	tenant, source, ok := hookPath(req.URL.Path)
	if !ok {
		return r.answer(w, otherSource, OutcomeNotFound, http.StatusNotFound, "not found: deliveries go to POST "+HookPrefix+"<tenant>/<source>")
	}
	label := r.policy.label(source)
	sp, verifier := r.policy.lookup(tenant, source)
	if sp == nil {
		return r.answer(w, label, OutcomeNotFound, http.StatusNotFound, "not found: no such tenant or source")
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return r.answer(w, label, OutcomeMethodNotAllowed, http.StatusMethodNotAllowed, "method "+req.Method+" not allowed: POST")
	}
	if req.ContentLength > r.cfg.MaxBody {
		return r.answer(w, label, OutcomeTooLarge, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("body of %d bytes is larger than %d bytes", req.ContentLength, r.cfg.MaxBody))
	}
	conn := connectionTokens(req.Header, sp.protected)
	size, err := checkHeader(req.Header, conn)
	if err != nil {
		return r.answer(w, label, OutcomeBadRequest, http.StatusBadRequest, "invalid headers: "+err.Error())
	}
	if size += r.ownHeader; size > r.cfg.MaxHeaderBytes {
		return r.answer(w, label, OutcomeHeadersTooLarge, http.StatusRequestHeaderFieldsTooLarge,
			fmt.Sprintf("headers of %d bytes are larger than %d bytes", size, r.cfg.MaxHeaderBytes))
	}

	var bb bodyBuf
	err = r.readBody(w, req, &bb)
	defer bb.release()
	if err != nil {
		return r.bodyFailed(w, label, err)
	}
	body := bb.buf

	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	default:
		return r.unavailable(w, label, OutcomeOverloaded, fmt.Sprintf("busy: %d deliveries are being published; retry later", r.cfg.MaxInFlight))
	}
	r.metrics.inFlight.Inc()
	defer r.metrics.inFlight.Dec()

	d, verr := verify.VerifyDelivery(verifier, req.Header, body)
	if verr != nil {
		reason := verify.Reason(verr)
		r.metrics.verifyFailures.WithLabelValues(label, reason).Inc()
		if !sp.forward {
			r.logSometimes(slog.LevelInfo, "rejected:"+label, "delivery rejected: signature does not verify",
				"tenant", tenant, "source", source, "reason", reason, "err", verr, "remote", req.RemoteAddr)
			w.Header().Set("WWW-Authenticate", "Signature")
			return r.answer(w, label, OutcomeRejected, http.StatusUnauthorized, "signature does not verify: "+answerText(verr))
		}
	}
	hdr := stripHeader(req.Header, conn)
	var held guardHeld // the guard's claim of an id-less delivery, given up if its publish fails
	if verr == nil {
		// The key is bound to what was verified, and a body signed alone is not published again under another id:
		// both decided on the headers as the worker will read them.
		if outcome := r.bindKey(w, label, tenant, source, sp, hdr, d, size, req.RemoteAddr); outcome != "" {
			return outcome
		}
		if sp.guard && r.cfg.Window != nil {
			var outcome string
			if held, outcome = r.guardReplay(w, req, label, tenant, source, sp, hdr, body); outcome != "" {
				return outcome
			}
		}
	}
	setVerified(hdr, verr == nil)

	subject := contract.InputSubject(r.cfg.InputPrefix, tenant, source)
	seq, err := r.publish(req.Context(), subject, hdr, body)
	if err != nil {
		r.releaseGuard(req.Context(), held)
		return r.publishFailed(w, label, subject, err)
	}
	if verr != nil {
		r.logSometimes(slog.LevelInfo, "forwarded:"+label, "delivery forwarded unverified: signature does not verify (on_invalid: forward)",
			"tenant", tenant, "source", source, "reason", verify.Reason(verr), "err", verr, "remote", req.RemoteAddr, "seq", seq)
		return r.answer(w, label, OutcomeForwarded, http.StatusAccepted,
			fmt.Sprintf("accepted unverified: %s seq %d: %s", r.cfg.InputStream, seq, answerText(verr)))
	}
	var text [96]byte
	return r.answerBytes(w, label, OutcomeAccepted, http.StatusAccepted,
		strconv.AppendUint(append(append(text[:0], "accepted: "...), r.acceptedPrefix...), seq, 10))
}

// bindKey publishes the verified id under the key's header (keyBinding.decide), or answers instead and returns the
// outcome: 400 for a conflicting id, 431 when the header it adds does not fit.
func (r *Receiver) bindKey(w http.ResponseWriter, label, tenant, source string, sp *sourcePolicy, hdr nats.Header,
	d verify.Delivery, size int, remote string) string {
	id, set, err := sp.key.decide(http.Header(hdr), d)
	if err != nil {
		r.logSometimes(slog.LevelWarn, "id_conflict:"+label, "delivery refused: it verifies, but a header carries another id than the verified one",
			"tenant", tenant, "source", source, "err", err, "remote", remote)
		return r.answer(w, label, OutcomeIDConflict, http.StatusBadRequest, "conflicting ids: "+err.Error())
	}
	if !set {
		return ""
	}
	if len(hdr[sp.key.header]) == 0 {
		if size += headerBlockSize(sp.key.header, id); size > r.cfg.MaxHeaderBytes {
			return r.answer(w, label, OutcomeHeadersTooLarge, http.StatusRequestHeaderFieldsTooLarge,
				fmt.Sprintf("headers of %d bytes with the verified id under %s are larger than %d bytes", size, sp.key.header, r.cfg.MaxHeaderBytes))
		}
	}
	setKeyHeader(http.Header(hdr), sp.key.header, id)
	return ""
}

// guardReplay claims the body in the window under the id the worker will key it on (docs/sources.md, "The replay
// guard"), or answers instead and returns the outcome: 202 without publishing for a replay, 503 when the window did
// not answer (the provider retries; nothing is published unguarded).
func (r *Receiver) guardReplay(w http.ResponseWriter, req *http.Request, label, tenant, source string, sp *sourcePolicy,
	hdr nats.Header, body []byte) (held guardHeld, outcome string) {
	id, _ := keys.NATSHeaders(hdr).Get(sp.key.written) // what the worker will key the envelope on
	c := guardClaim(tenant, source, id, body, sp.ttl)
	ctx, cancel := context.WithTimeout(req.Context(), r.cfg.PublishTimeout)
	start := time.Now()
	o, err := r.cfg.Window.Claim(ctx, c, kvwindow.Known{})
	cancel()
	r.metrics.guardDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		if id == "" && claimMayHaveLanded(err) {
			r.settleGuard(req.Context(), c)
		}
		r.logSometimes(slog.LevelWarn, "guard_unavailable", "delivery not stored: the replay guard's window did not take the claim (err says why: out of reach, bucket lost, age limit); answered 503",
			"tenant", tenant, "source", source, "err", err)
		return held, r.unavailable(w, label, OutcomeUnavailable, "not stored: the replay guard's window is unavailable; retry later")
	}
	if !replayed(o) {
		if id == "" && o.Status == kvwindow.Won {
			// Without an id the provider's retry cannot be told from a replay: if this publish fails, the claim goes.
			held = guardHeld{c: c, rev: o.Revision}
		}
		return held, ""
	}
	r.metrics.replays.WithLabelValues(label).Inc()
	r.logSometimes(slog.LevelWarn, "replay:"+label, "delivery not published: its signed body was accepted under another id (replay guard)",
		"tenant", tenant, "source", source, "id", id, "id_header", sp.key.header, "window_key", c.Key,
		"first_id_fingerprint", o.HolderSeq, "first_claimed", o.FirstClaimed, "remote", req.RemoteAddr,
		"find", "DEDUPE_BUCKET="+r.cfg.Window.Bucket()+" DEDUPE_WINDOW_SHARDS=1 dedupeworker window get --tenant "+tenant+" --source "+source+" --key '"+c.Key+"'")
	return held, r.answer(w, label, OutcomeReplay, http.StatusAccepted,
		"accepted, not published: this signed body was accepted under another id (replay guard)")
}

// bodyFailed answers a body that could not be read whole.
func (r *Receiver) bodyFailed(w http.ResponseWriter, label string, err error) string {
	switch {
	case errors.As(err, new(*http.MaxBytesError)):
		return r.answer(w, label, OutcomeTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", r.cfg.MaxBody))
	case errors.Is(err, errBufferFull):
		return r.unavailable(w, label, OutcomeOverloaded, fmt.Sprintf("busy: %d bytes of bodies are held; retry later", r.cfg.MaxBufferedBytes))
	case isTimeout(err):
		w.Header().Set("Connection", "close")
		return r.answer(w, label, OutcomeBodyTimeout, http.StatusRequestTimeout,
			fmt.Sprintf("the body did not arrive within %s", r.cfg.BodyTimeout))
	}
	return r.answer(w, label, OutcomeBadRequest, http.StatusBadRequest, "could not read the body: "+err.Error())
}

// guardHeld is the guard's claim of a delivery without an id (rev 0: none held).
type guardHeld struct {
	c   kvwindow.Claim
	rev uint64
}

// settleGuard follows a claim of a delivery without an id whose write may have landed with only its answer lost
// (claimMayHaveLanded). Left in place, it would take the provider's retry — under a fingerprint of its own — for a
// replay, and the delivery would never be published: the claim is made again under the same fingerprint, apart
// from the request's context, and given up if it is ours (heldByClaim).
func (r *Receiver) settleGuard(ctx context.Context, c kvwindow.Claim) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PublishTimeout)
	o, err := r.cfg.Window.Claim(cctx, c, kvwindow.Known{})
	cancel()
	if err != nil {
		r.logSometimes(slog.LevelWarn, "guard_settle", "replay guard's claim of a delivery without an id not checked after the window failed to answer: if it was stored, the retry will be taken for a replay until the claim's TTL",
			"tenant", c.Tenant, "source", c.Source, "window_key", c.Key, "err", err)
		return
	}
	if heldByClaim(o) {
		r.releaseGuard(ctx, guardHeld{c: c, rev: o.Revision})
	}
}

// releaseGuard gives up the guard's claim of an id-less delivery whose publish failed, which would take the
// provider's retry for a replay. A release that fails is logged.
func (r *Receiver) releaseGuard(ctx context.Context, g guardHeld) {
	if g.rev == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PublishTimeout)
	defer cancel()
	if _, err := r.cfg.Window.Release(ctx, g.c, g.rev, false); err != nil {
		r.logSometimes(slog.LevelWarn, "guard_release", "replay guard's claim of a delivery without an id not released after its publish failed: its retry will be taken for a replay",
			"tenant", g.c.Tenant, "source", g.c.Source, "window_key", g.c.Key, "err", err)
	}
}

// claimMayHaveLanded reports whether a failed claim's write may have been stored with only its answer lost
// (jserr.MayHaveLanded), unless its bucket is lost. Every other failure (no responders, the age limit's or
// JetStream's refusal, a closed window) says nothing was written.
func claimMayHaveLanded(err error) bool {
	return !errors.Is(err, kvwindow.ErrWindowLost) && jserr.MayHaveLanded(err)
}

// answerText is a verification error as a provider's answer words it: after "signature does not verify", without
// the "verify: " its errors start with ("github: X-Hub-Signature-256: signature mismatch: …").
func answerText(verr error) string { return strings.TrimPrefix(verr.Error(), "verify: ") }
