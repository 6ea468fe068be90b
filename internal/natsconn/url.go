package natsconn

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ErrURL is wrapped by CheckURL's errors (and so by ConnectContext's for such a URL): the URL is malformed, a
// configuration error that no retry can cure, apart from a well-formed URL whose host does not resolve (yet).
var ErrURL = errors.New("natsconn: malformed URL")

// urlError is a CheckURL error: the reason, wrapping ErrURL without repeating its text.
type urlError struct{ msg string }

func (e *urlError) Error() string { return e.msg }
func (e *urlError) Unwrap() error { return ErrURL }

// CheckURL checks a comma-separated list of server URLs as the client reads it, so that a malformed one stops the
// start with its reason instead of being dialled (and, with its host taken as a name, retried) until the connect
// timeout: every entry is [scheme://][user[:password]@][host][:port], scheme nats, tls, ws or wss (none: nats),
// port 1-65535 (none: the scheme's default), a host unless a port is given (Go then dials this machine), no path
// except on ws and wss, and websocket and plain entries are not mixed. A list with an empty entry ("a:4222,,") is
// refused too: the client would skip it silently. Errors quote the entry without its user information.
func CheckURL(list string) error {
	entries := strings.Split(list, ",")
	var ws, plain bool
	for i, raw := range entries {
		bad := func(format string, a ...any) error {
			what := fmt.Sprintf("%q", Redact(strings.TrimSpace(raw)))
			if len(entries) > 1 {
				what = fmt.Sprintf("URL %d of %d (%s)", i+1, len(entries), what)
			}
			return &urlError{what + ": " + fmt.Sprintf(format, a...)}
		}
		s := strings.TrimSpace(raw)
		if s == "" {
			if len(entries) == 1 {
				return &urlError{"is empty"}
			}
			return &urlError{fmt.Sprintf("URL %d of %d is empty (a stray comma?)", i+1, len(entries))}
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s // as the client does
		}
		u, err := url.Parse(s)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // its text holds the whole URL, user information included
			}
			return bad("%s", strings.TrimPrefix(err.Error(), "net/url: "))
		}
		switch u.Scheme {
		case "nats", "tls":
			plain = true
			if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
				return bad("a %s URL has no path, query or fragment (only ws and wss URLs do)", u.Scheme)
			}
		case "ws", "wss":
			ws = true
		default:
			return bad("scheme %q is not one of nats, tls, ws, wss", u.Scheme)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return bad("port %s is not between 1 and 65535", p)
			}
		} else if u.Hostname() == "" {
			return bad("no host")
		}
	}
	if ws && plain {
		return &urlError{"mixes websocket (ws, wss) and plain (nats, tls) URLs: the client connects with one kind"}
	}
	return nil
}
