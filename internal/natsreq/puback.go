package natsreq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/backoff"
	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
)

// PubAck is a JetStream publish acknowledgement. Stream is a slice of the answer's data.
type PubAck struct {
	Stream    []byte
	Sequence  uint64
	Duplicate bool
}

// ErrInvalidPubAck is an answer that is no JetStream publish acknowledgement.
var ErrInvalidPubAck = errors.New("natsreq: invalid publish acknowledgement")

// ParsePubAck decodes the answer to a JetStream publish: its acknowledgement, or the server's refusal as a
// *jetstream.APIError (the type the jetstream package returns, so that callers classify both paths alike). It
// reads the answer with the project's strict scanner and allocates only for a refusal.
func ParsePubAck(data []byte) (PubAck, error) {
	var (
		s       jsonscan.Scanner
		pa      PubAck
		apiErr  *jetstream.APIError
		haveSeq bool
	)
	s.Reset(data)
	tok, err := s.Next()
	if err != nil || tok.Kind != jsonscan.ObjectStart {
		return PubAck{}, invalid(data, err)
	}
	for {
		tok, err = s.Next()
		if err != nil {
			return PubAck{}, invalid(data, err)
		}
		if tok.Kind == jsonscan.ObjectEnd {
			break
		}
		name := tok
		val, err := s.Next()
		if err != nil {
			return PubAck{}, invalid(data, err)
		}
		switch {
		case jsonscan.EqualName(name.Raw, "stream") && val.Kind == jsonscan.String:
			pa.Stream = stringValue(val)
		case jsonscan.EqualName(name.Raw, "seq") && val.Kind == jsonscan.Number:
			if pa.Sequence, err = strconv.ParseUint(string(val.Raw), 10, 64); err != nil {
				return PubAck{}, invalid(data, err)
			}
			haveSeq = true
		case jsonscan.EqualName(name.Raw, "duplicate") && (val.Kind == jsonscan.True || val.Kind == jsonscan.False):
			pa.Duplicate = val.Kind == jsonscan.True
		case jsonscan.EqualName(name.Raw, "error") && val.Kind == jsonscan.ObjectStart:
			if apiErr, err = parseAPIError(&s); err != nil {
				return PubAck{}, invalid(data, err)
			}
		default:
			if val.Kind == jsonscan.ObjectStart || val.Kind == jsonscan.ArrayStart {
				if err := s.SkipValue(); err != nil {
					return PubAck{}, invalid(data, err)
				}
			}
		}
	}
	if tok, err := s.Next(); err != nil || tok.Kind != jsonscan.EOF {
		return PubAck{}, invalid(data, err)
	}
	if apiErr != nil {
		return PubAck{}, apiErr
	}
	if len(pa.Stream) == 0 || !haveSeq {
		return PubAck{}, invalid(data, errors.New("no stream or sequence"))
	}
	return pa, nil
}

// parseAPIError reads the members of an "error" object whose start the scanner has just returned.
func parseAPIError(s *jsonscan.Scanner) (*jetstream.APIError, error) {
	e := &jetstream.APIError{}
	for {
		name, err := s.Next()
		if err != nil {
			return nil, err
		}
		if name.Kind == jsonscan.ObjectEnd {
			return e, nil
		}
		val, err := s.Next()
		if err != nil {
			return nil, err
		}
		switch {
		case jsonscan.EqualName(name.Raw, "code") && val.Kind == jsonscan.Number:
			e.Code, _ = strconv.Atoi(string(val.Raw))
		case jsonscan.EqualName(name.Raw, "err_code") && val.Kind == jsonscan.Number:
			c, _ := strconv.ParseUint(string(val.Raw), 10, 16)
			e.ErrorCode = jetstream.ErrorCode(c)
		case jsonscan.EqualName(name.Raw, "description") && val.Kind == jsonscan.String:
			e.Description = string(stringValue(val))
		default:
			if val.Kind == jsonscan.ObjectStart || val.Kind == jsonscan.ArrayStart {
				if err := s.SkipValue(); err != nil {
					return nil, err
				}
			}
		}
	}
}

// stringValue is a string token's text: a slice of the input unless it holds escapes.
func stringValue(t jsonscan.Token) []byte {
	raw := t.Raw[1 : len(t.Raw)-1]
	if !t.Escaped {
		return raw
	}
	return jsonscan.AppendUnescaped(nil, t.Raw)
}

func invalid(data []byte, err error) error { return invalidAnswer(ErrInvalidPubAck, data, err) }

// invalidAnswer is kind, with the start of the answer that was not one and why.
func invalidAnswer(kind error, data []byte, err error) error {
	const max = 200
	if len(data) > max {
		data = data[:max]
	}
	if err == nil {
		err = errors.New("not an object")
	}
	return fmt.Errorf("%w %q: %w", kind, data, err)
}

// Retries of a publish that found no stream to answer it, as the jetstream package makes them: during a leader
// election a stream has no responder for a moment.
const (
	noResponderRetries = 2
	noResponderWait    = 250 * time.Millisecond
)

// Publish sends msg to a JetStream stream and returns its acknowledgement, waiting at most timeout in all. "No
// responders" is tried twice more, 250 ms apart, then is jetstream.ErrNoStreamResponse; no answer in time is
// nats.ErrTimeout; a refusal is the server's *jetstream.APIError.
func (m *Mux) Publish(ctx context.Context, msg *nats.Msg, timeout time.Duration) (PubAck, error) {
	deadline := time.Now().Add(timeout)
	for attempt := 0; ; attempt++ {
		left := time.Until(deadline)
		if left <= 0 {
			return PubAck{}, nats.ErrTimeout
		}
		a, err := m.Request(ctx, msg, left)
		if errors.Is(err, nats.ErrNoResponders) {
			if attempt == noResponderRetries {
				return PubAck{}, jetstream.ErrNoStreamResponse
			}
			if err := backoff.Wait(ctx, min(noResponderWait, time.Until(deadline))); err != nil {
				return PubAck{}, err
			}
			continue
		}
		if err != nil {
			return PubAck{}, err
		}
		return ParsePubAck(a.Data)
	}
}
