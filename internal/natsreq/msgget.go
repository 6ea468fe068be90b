package natsreq

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
)

// StreamGet addresses the message reads of one stream: its STREAM.MSG.GET API subject and its DIRECT.GET prefix,
// made once rather than formatted for every read.
type StreamGet struct {
	msgGet    string // <api>STREAM.MSG.GET.<stream>
	directGet string // <api>DIRECT.GET.<stream>.
}

// NewStreamGet addresses stream's reads under the JetStream API prefix api (jsapi.Prefix: ends in a dot).
func NewStreamGet(api, stream string) StreamGet {
	return StreamGet{msgGet: api + "STREAM.MSG.GET." + stream, directGet: api + "DIRECT.GET." + stream + "."}
}

// GetLastMsg reads the last message stored on subj, as the jetstream package's Stream.GetLastMsgForSubject does
// (same requests, same answers, same errors), at most timeout and no longer than ctx: a STREAM.MSG.GET request
// answered by the stream leader, or with direct a direct get (any replica may answer; only for a stream that
// allows direct gets, as the jetstream package decides from its cached stream info). No message is
// jetstream.ErrMsgNotFound itself (compare with ==: no errors.Is walk), no answer in time nats.ErrTimeout, no
// responders nats.ErrNoResponders, a refusal the server's *jetstream.APIError.
func (m *Mux) GetLastMsg(ctx context.Context, g StreamGet, subj string, direct bool, timeout time.Duration) (*jetstream.RawStreamMsg, error) {
	r := getPool.Get().(*getReq)
	defer getPool.Put(r)
	if direct {
		// The jetstream package sends the subject as the last tokens and no body ("DIRECT.GET.<stream>.<subj>").
		r.msg.Subject, r.msg.Data = g.directGet+subj, nil
	} else {
		r.buf = appendLastBySubj(r.buf[:0], subj)
		r.msg.Subject, r.msg.Data = g.msgGet, r.buf
	}
	a, err := m.Request(ctx, &r.msg, timeout)
	r.msg.Subject, r.msg.Data = "", nil
	if err != nil {
		return nil, err
	}
	if direct {
		return DirectMsg(a)
	}
	return ParseStoredMsg(a.Data)
}

type getReq struct {
	msg nats.Msg
	buf []byte
}

var getPool = sync.Pool{New: func() any { return &getReq{buf: make([]byte, 0, 128)} }}

// appendLastBySubj appends the body the jetstream package marshals for a last-by-subject get,
// {"last_by_subj":"<subj>"}, byte for byte: a subject of plain characters as it is, any other through
// encoding/json (its escapes, HTML-safe and invalid UTF-8 included).
func appendLastBySubj(b []byte, subj string) []byte {
	b = append(b, `{"last_by_subj":`...)
	plain := true
	for i := 0; i < len(subj); i++ {
		if c := subj[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			plain = false
			break
		}
	}
	if plain {
		b = append(b, '"')
		b = append(b, subj...)
		b = append(b, '"')
	} else {
		q, _ := json.Marshal(subj) // a string always marshals
		b = append(b, q...)
	}
	return append(b, '}')
}

// ParseStoredMsg decodes the answer to a STREAM.MSG.GET request as the jetstream package does: the stored message
// (its headers decoded with nats.DecodeHeadersMsg, its time as encoding/json reads it), jetstream.ErrMsgNotFound
// itself for the server's 10037, the server's *jetstream.APIError for another refusal, and an error for an answer
// that is neither. It reads the answer with the project's strict scanner; member names must be spelt as the server
// spells them (encoding/json would also take other cases).
func ParseStoredMsg(data []byte) (*jetstream.RawStreamMsg, error) {
	var (
		s      jsonscan.Scanner
		msg    *jetstream.RawStreamMsg
		apiErr *jetstream.APIError
	)
	s.Reset(data)
	tok, err := s.Next()
	if err != nil || tok.Kind != jsonscan.ObjectStart {
		return nil, invalidGet(data, err)
	}
	for {
		name, err := s.Next()
		if err != nil {
			return nil, invalidGet(data, err)
		}
		if name.Kind == jsonscan.ObjectEnd {
			break
		}
		val, err := s.Next()
		if err != nil {
			return nil, invalidGet(data, err)
		}
		switch {
		case val.Kind == jsonscan.Null:
			// encoding/json sets a pointer member that is null to nil.
			switch {
			case jsonscan.EqualName(name.Raw, "message"):
				msg = nil
			case jsonscan.EqualName(name.Raw, "error"):
				apiErr = nil
			}
		case jsonscan.EqualName(name.Raw, "message") && val.Kind == jsonscan.ObjectStart:
			if msg == nil {
				msg = &jetstream.RawStreamMsg{}
			}
			if err := parseStoredMsg(&s, msg); err != nil {
				return nil, invalidGet(data, err)
			}
		case jsonscan.EqualName(name.Raw, "error") && val.Kind == jsonscan.ObjectStart:
			if apiErr, err = parseAPIError(&s); err != nil {
				return nil, invalidGet(data, err)
			}
		case jsonscan.EqualName(name.Raw, "message"), jsonscan.EqualName(name.Raw, "error"):
			return nil, invalidGet(data, fmt.Errorf("%s is a %s", name.Raw, val.Kind))
		default:
			if val.Kind == jsonscan.ObjectStart || val.Kind == jsonscan.ArrayStart {
				if err := s.SkipValue(); err != nil {
					return nil, invalidGet(data, err)
				}
			}
		}
	}
	if tok, err := s.Next(); err != nil || tok.Kind != jsonscan.EOF {
		return nil, invalidGet(data, err)
	}
	if apiErr != nil {
		if apiErr.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, apiErr
	}
	if msg == nil {
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	return msg, nil
}

// parseStoredMsg reads the members of a "message" object whose start the scanner has just returned into m: the
// jetstream package's storedMsg (subject, seq, hdrs and data in base64, time), hdrs decoded as it decodes them.
func parseStoredMsg(s *jsonscan.Scanner, m *jetstream.RawStreamMsg) error {
	var hdrs []byte // the base64 text of the header block, decoded once the object is read
	haveHdrs := false
	for {
		name, err := s.Next()
		if err != nil {
			return err
		}
		if name.Kind == jsonscan.ObjectEnd {
			break
		}
		val, err := s.Next()
		if err != nil {
			return err
		}
		switch {
		case val.Kind == jsonscan.Null:
			// encoding/json sets a slice member that is null to nil, and leaves the time as it was.
			switch {
			case jsonscan.EqualName(name.Raw, "hdrs"):
				haveHdrs, hdrs = false, nil
			case jsonscan.EqualName(name.Raw, "data"):
				m.Data = nil
			}
		case jsonscan.EqualName(name.Raw, "subject") && val.Kind == jsonscan.String:
			m.Subject = string(stringValue(val))
		case jsonscan.EqualName(name.Raw, "seq") && val.Kind == jsonscan.Number:
			if m.Sequence, err = strconv.ParseUint(string(val.Raw), 10, 64); err != nil {
				return err
			}
		case jsonscan.EqualName(name.Raw, "hdrs") && val.Kind == jsonscan.String:
			hdrs, haveHdrs = stringValue(val), true
		case jsonscan.EqualName(name.Raw, "data") && val.Kind == jsonscan.String:
			if m.Data, err = decodeBase64(stringValue(val)); err != nil {
				return err
			}
		case jsonscan.EqualName(name.Raw, "time") && val.Kind == jsonscan.String:
			// encoding/json hands the quoted token to time.Time's UnmarshalJSON: so does this, for the same
			// parse, precision and location.
			if err := m.Time.UnmarshalJSON(val.Raw); err != nil {
				return err
			}
		case jsonscan.EqualName(name.Raw, "subject"), jsonscan.EqualName(name.Raw, "seq"),
			jsonscan.EqualName(name.Raw, "hdrs"), jsonscan.EqualName(name.Raw, "data"), jsonscan.EqualName(name.Raw, "time"):
			return fmt.Errorf("message member %s is a %s", name.Raw, val.Kind)
		default:
			if val.Kind == jsonscan.ObjectStart || val.Kind == jsonscan.ArrayStart {
				if err := s.SkipValue(); err != nil {
					return err
				}
			}
		}
	}
	if !haveHdrs {
		return nil
	}
	// The block is copied by the decoding (its keys and values are substrings of one string), so a small one is
	// decoded on the stack.
	var stack [512]byte
	buf := stack[:0]
	if n := base64.StdEncoding.DecodedLen(len(hdrs)); n > len(stack) {
		buf = make([]byte, 0, n)
	}
	n, err := base64.StdEncoding.Decode(buf[:cap(buf)], hdrs)
	if err != nil {
		return err
	}
	m.Header = nil
	if n > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(buf[:n]); err != nil {
			return err
		}
	}
	return nil
}

// decodeBase64 decodes a []byte member as encoding/json does (standard encoding, padded; an empty string is an
// empty, non-nil slice).
func decodeBase64(src []byte) ([]byte, error) {
	b := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
	n, err := base64.StdEncoding.Decode(b, src)
	if err != nil {
		return nil, err
	}
	return b[:n], nil
}

// ErrInvalidMsgGet is an answer to a message get that is neither a message nor the server's refusal.
var ErrInvalidMsgGet = errors.New("natsreq: invalid message get answer")

func invalidGet(data []byte, err error) error { return invalidAnswer(ErrInvalidMsgGet, data, err) }

// DirectMsg decodes the answer to a direct get as the jetstream package does: the message itself, its stream,
// subject, sequence and time in headers (all of the answer's headers kept, as they are), jetstream.ErrMsgNotFound
// itself for a 404 status, an error for another status or a missing header.
func DirectMsg(r *nats.Msg) (*jetstream.RawStreamMsg, error) {
	if len(r.Data) == 0 {
		if val := r.Header.Get(contract.NATSStatus); val != "" {
			if val == "404" {
				return nil, jetstream.ErrMsgNotFound
			}
			return nil, fmt.Errorf("nats: %s", cmp.Or(r.Header.Get(contract.NATSDescription), "unable to get message"))
		}
	}
	if len(r.Header) == 0 {
		return nil, errors.New("nats: response should have headers")
	}
	if r.Header.Get(jetstream.StreamHeader) == "" {
		return nil, errors.New("nats: missing stream header")
	}
	seqStr := r.Header.Get(jetstream.SequenceHeader)
	if seqStr == "" {
		return nil, errors.New("nats: missing sequence header")
	}
	seq, err := strconv.ParseUint(seqStr, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("nats: invalid sequence header '%s': %v", seqStr, err)
	}
	timeStr := r.Header.Get(jetstream.TimeStampHeaer)
	if timeStr == "" {
		return nil, errors.New("nats: missing timestamp header")
	}
	tm, err := time.Parse(time.RFC3339Nano, timeStr)
	if err != nil {
		return nil, fmt.Errorf("nats: invalid timestamp header '%s': %v", timeStr, err)
	}
	subj := r.Header.Get(jetstream.SubjectHeader)
	if subj == "" {
		return nil, errors.New("nats: missing subject header")
	}
	return &jetstream.RawStreamMsg{Subject: subj, Sequence: seq, Header: r.Header, Data: r.Data, Time: tm}, nil
}
