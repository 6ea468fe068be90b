package receiver

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// serveHook handles a delivery and returns its outcome. The checks go from the cheapest to the dearest: path and
// source, method, declared sizes, the body (counted against MaxBufferedBytes as it arrives, within BodyTimeout),
// a publish slot, the signature, the publish. The slot is taken only once the body is in, so that what a slow
// client holds is its bytes, never another delivery's turn.
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
	conn := connectionTokens(req.Header)
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

	verr := verifier.Verify(req.Header, body)
	if verr != nil {
		reason := verify.Reason(verr)
		r.metrics.verifyFailures.WithLabelValues(label, reason).Inc()
		if !sp.forward {
			r.logSometimes(slog.LevelInfo, "rejected:"+label, "delivery rejected: signature does not verify",
				"tenant", tenant, "source", source, "reason", reason, "err", verr, "remote", req.RemoteAddr)
			w.Header().Set("WWW-Authenticate", "Signature")
			return r.answer(w, label, OutcomeRejected, http.StatusUnauthorized, "signature does not verify: "+verr.Error())
		}
	}
	hdr := stripHeader(req.Header, conn)
	setVerified(hdr, verr == nil)

	subject := r.subject + tenant + "." + source
	seq, err := r.publish(req.Context(), subject, hdr, body)
	if err != nil {
		return r.publishFailed(w, label, subject, err)
	}
	if verr != nil {
		r.logSometimes(slog.LevelInfo, "forwarded:"+label, "delivery forwarded unverified: signature does not verify (on_invalid: forward)",
			"tenant", tenant, "source", source, "reason", verify.Reason(verr), "err", verr, "remote", req.RemoteAddr, "seq", seq)
		return r.answer(w, label, OutcomeForwarded, http.StatusAccepted,
			fmt.Sprintf("accepted unverified: %s seq %d: %v", r.cfg.InputStream, seq, verr))
	}
	var text [96]byte
	return r.answerBytes(w, label, OutcomeAccepted, http.StatusAccepted,
		strconv.AppendUint(append(append(text[:0], "accepted: "...), r.acceptedPrefix...), seq, 10))
}

// bodyFailed answers a body that could not be read whole.
func (r *Receiver) bodyFailed(w http.ResponseWriter, label string, err error) string {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
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
