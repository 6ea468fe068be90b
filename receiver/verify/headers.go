package verify

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// header returns the first value of the header name (name in canonical form), matched ignoring letter case, with
// surrounding blanks removed; "" when there is none.
func header(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return trimOWS(v[0])
	}
	// net/http canonicalises names, but a header map built elsewhere (from NATS headers, by hand) may keep another
	// letter case. Take the smallest such key so that the choice does not depend on map order.
	key, found := "", false
	for k := range h {
		if strings.EqualFold(k, name) && (!found || k < key) {
			key, found = k, true
		}
	}
	if found && len(h[key]) > 0 {
		return trimOWS(h[key][0])
	}
	return ""
}

// trimOWS removes the blanks HTTP allows around a field value (net/http does too; a hand-built map may not).
func trimOWS(s string) string { return strings.Trim(s, " \t") }

// parseUnix reads a signed timestamp: Unix seconds as 1 to 19 ASCII digits, nothing else (no sign, no blanks, no
// fraction), so that what is checked is what the provider sent.
func parseUnix(s string) (int64, bool) {
	if s == "" || len(s) > 19 || strings.ContainsFunc(s, func(c rune) bool { return c < '0' || c > '9' }) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// checkTime says whether the signed time ts (Unix seconds) is within tol of now, either way, and if not by how
// much, for the error. The bounds are inclusive, as in Stripe's and the Standard Webhooks libraries.
func checkTime(now time.Time, ts int64, tol time.Duration) (detail string, ok bool) {
	signed := time.Unix(ts, 0)
	if age := now.Sub(signed); age > tol {
		return fmt.Sprintf("signed at %d, %s before now (tolerance %s)", ts, age.Truncate(time.Second), tol), false
	}
	if signed.After(now.Add(tol)) {
		return fmt.Sprintf("signed at %d, %s after now (tolerance %s)", ts, signed.Sub(now).Truncate(time.Second), tol), false
	}
	return "", true
}
