package natsreq_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
	"github.com/dedupeworker/dedupeworker/internal/natsreq"
)

// referenceStoredMsg decodes a STREAM.MSG.GET answer as the jetstream package does (its getMsg, after the request):
// encoding/json into the same shape, then the same checks and header decoding.
func referenceStoredMsg(data []byte) (*jetstream.RawStreamMsg, error) {
	var resp struct {
		Type    string              `json:"type"`
		Error   *jetstream.APIError `json:"error,omitempty"`
		Message *struct {
			Subject  string    `json:"subject"`
			Sequence uint64    `json:"seq"`
			Header   []byte    `json:"hdrs,omitempty"`
			Data     []byte    `json:"data,omitempty"`
			Time     time.Time `json:"time"`
		} `json:"message,omitempty"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, resp.Error
	}
	if resp.Message == nil {
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	m := resp.Message
	var hdr nats.Header
	if len(m.Header) > 0 {
		var err error
		if hdr, err = nats.DecodeHeadersMsg(m.Header); err != nil {
			return nil, err
		}
	}
	return &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Sequence, Header: hdr, Data: m.Data, Time: m.Time}, nil
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

const (
	tombstoneHdrs = "NATS/1.0\r\nKV-Operation: PURGE\r\nNats-Rollup: sub\r\nNats-TTL: 60s\r\n\r\n"
	markerHdrs    = "NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 1s\r\n\r\n"
)

func TestParseStoredMsg(t *testing.T) {
	at := time.Date(2026, 12, 4, 3, 54, 23, 123456789, time.UTC)
	cases := []struct {
		name    string
		data    string
		want    *jetstream.RawStreamMsg
		wantErr func(error) bool
	}{
		{name: "found, no headers",
			data: `{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"$KV.b.k","seq":42,"data":"` + b64("claim") + `","time":"2026-12-04T03:54:23.123456789Z"}}`,
			want: &jetstream.RawStreamMsg{Subject: "$KV.b.k", Sequence: 42, Data: []byte("claim"), Time: at}},
		{name: "found, tombstone headers, no data",
			data: `{"message":{"subject":"$KV.b.k","seq":7,"hdrs":"` + b64(tombstoneHdrs) + `","time":"2026-12-04T03:54:23.123456789Z"}}`,
			want: &jetstream.RawStreamMsg{Subject: "$KV.b.k", Sequence: 7, Time: at, Header: nats.Header{
				"KV-Operation": {"PURGE"}, "Nats-Rollup": {"sub"}, "Nats-TTL": {"60s"}}}},
		{name: "server marker",
			data: `{"message":{"subject":"$KV.b.k","seq":8,"hdrs":"` + b64(markerHdrs) + `","time":"2026-12-04T03:54:23.123456789Z"}}`,
			want: &jetstream.RawStreamMsg{Subject: "$KV.b.k", Sequence: 8, Time: at, Header: nats.Header{
				"Nats-Marker-Reason": {"MaxAge"}, "Nats-TTL": {"1s"}}}},
		{name: "empty data is empty, not nil",
			data: `{"message":{"subject":"s","seq":1,"data":"","time":"2026-12-04T03:54:23.123456789Z"}}`,
			want: &jetstream.RawStreamMsg{Subject: "s", Sequence: 1, Data: []byte{}, Time: at}},
		{name: "empty header block is no header",
			data: `{"message":{"subject":"s","seq":1,"hdrs":"","time":"2026-12-04T03:54:23.123456789Z"}}`,
			want: &jetstream.RawStreamMsg{Subject: "s", Sequence: 1, Time: at}},
		{name: "time in another zone, microseconds",
			data: `{"message":{"subject":"s","seq":1,"time":"2026-12-04T04:54:23.123456+01:00"}}`,
			want: func() *jetstream.RawStreamMsg {
				var tm time.Time
				_ = tm.UnmarshalJSON([]byte(`"2026-12-04T04:54:23.123456+01:00"`))
				return &jetstream.RawStreamMsg{Subject: "s", Sequence: 1, Time: tm}
			}()},
		{name: "escaped strings, unknown members, nulls",
			data: `{"x":[1,{"y":null}],"error":null,"message":{"subject":"a\/b\u0041","seq":3,"data":"` +
				strings.ReplaceAll(b64("\xfb\xff"), "/", `\/`) + `","extra":{"z":[]},"hdrs":null}}`,
			want: &jetstream.RawStreamMsg{Subject: "a/bA", Sequence: 3, Data: []byte("\xfb\xff")}},
		{name: "10037 is ErrMsgNotFound itself",
			data:    `{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"code":404,"err_code":10037,"description":"no message found"}}`,
			wantErr: func(err error) bool { return err == jetstream.ErrMsgNotFound }},
		{name: "stream not found",
			data: `{"error":{"code":404,"err_code":10059,"description":"stream not found"}}`,
			wantErr: func(err error) bool {
				var api *jetstream.APIError
				return errors.Is(err, jetstream.ErrStreamNotFound) && errors.As(err, &api) && api.Code == 404 &&
					api.Description == "stream not found"
			}},
		{name: "JetStream not available (503)",
			data: `{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}`,
			wantErr: func(err error) bool {
				var je jetstream.JetStreamError
				return errors.As(err, &je) && je.APIError().Code == 503
			}},
		{name: "error wins over a message",
			data: `{"message":{"subject":"s","seq":1},"error":{"code":500,"err_code":10118,"description":"stream is offline"}}`,
			wantErr: func(err error) bool {
				var api *jetstream.APIError
				return errors.As(err, &api) && api.ErrorCode == 10118
			}},
		{name: "neither message nor error",
			data:    `{"type":"io.nats.jetstream.api.v1.stream_msg_get_response"}`,
			wantErr: func(err error) bool { return errors.Is(err, jetstream.ErrInvalidJetStreamResponse) }},
		{name: "message null", data: `{"message":null}`,
			wantErr: func(err error) bool { return errors.Is(err, jetstream.ErrInvalidJetStreamResponse) }},
		{name: "malformed JSON", data: `{"message":{"subject":"s","seq":1`, wantErr: isInvalidGet},
		{name: "trailing garbage", data: `{"message":{"subject":"s"}} x`, wantErr: isInvalidGet},
		{name: "not an object", data: `[]`, wantErr: isInvalidGet},
		{name: "empty answer", data: ``, wantErr: isInvalidGet},
		{name: "message of the wrong type", data: `{"message":"s"}`, wantErr: isInvalidGet},
		{name: "sequence not an integer", data: `{"message":{"subject":"s","seq":1.5}}`, wantErr: isInvalidGet},
		{name: "negative sequence", data: `{"message":{"subject":"s","seq":-1}}`, wantErr: isInvalidGet},
		{name: "sequence out of range", data: `{"message":{"subject":"s","seq":18446744073709551616}}`, wantErr: isInvalidGet},
		{name: "subject of the wrong type", data: `{"message":{"subject":1,"seq":1}}`, wantErr: isInvalidGet},
		{name: "bad base64 data", data: `{"message":{"subject":"s","seq":1,"data":"!!!"}}`, wantErr: isInvalidGet},
		{name: "unpadded base64 data", data: `{"message":{"subject":"s","seq":1,"data":"YQ"}}`, wantErr: isInvalidGet},
		{name: "bad base64 headers", data: `{"message":{"subject":"s","seq":1,"hdrs":"%%%"}}`, wantErr: isInvalidGet},
		{name: "not a header block",
			data:    `{"message":{"subject":"s","seq":1,"hdrs":"` + b64("HTTP/1.1\r\n\r\n") + `"}}`,
			wantErr: func(err error) bool { return errors.Is(err, nats.ErrBadHeaderMsg) }},
		{name: "bad time", data: `{"message":{"subject":"s","seq":1,"time":"yesterday"}}`, wantErr: isInvalidGet},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := natsreq.ParseStoredMsg([]byte(tc.data))
			ref, refErr := referenceStoredMsg([]byte(tc.data))
			if tc.wantErr != nil {
				if got != nil || !tc.wantErr(err) {
					t.Fatalf("ParseStoredMsg = %+v, %v; want the error the case describes", got, err)
				}
				if refErr == nil {
					t.Fatalf("the jetstream package's decoding takes it: %+v", ref)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseStoredMsg: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseStoredMsg = %#v\nwant %#v", got, tc.want)
			}
			if refErr != nil || !reflect.DeepEqual(got, ref) {
				t.Fatalf("the jetstream package's decoding differs: %#v, %v", ref, refErr)
			}
		})
	}
}

func isInvalidGet(err error) bool { return errors.Is(err, natsreq.ErrInvalidMsgGet) }

func TestDirectMsg(t *testing.T) {
	ts := "2026-12-04T03:54:23.123456789Z"
	at, _ := time.Parse(time.RFC3339Nano, ts)
	full := func(extra ...string) nats.Header {
		h := nats.Header{"Nats-Stream": {"KV_b"}, "Nats-Subject": {"$KV.b.k"}, "Nats-Sequence": {"9"}, "Nats-Time-Stamp": {ts}}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Add(extra[i], extra[i+1])
		}
		return h
	}
	cases := []struct {
		name    string
		msg     *nats.Msg
		want    *jetstream.RawStreamMsg
		wantErr string // "" with want nil: ErrMsgNotFound itself
	}{
		{name: "claim", msg: &nats.Msg{Header: full(), Data: []byte("v")},
			want: &jetstream.RawStreamMsg{Subject: "$KV.b.k", Sequence: 9, Header: full(), Data: []byte("v"), Time: at}},
		{name: "tombstone without data", msg: &nats.Msg{Header: full("KV-Operation", "DEL")},
			want: &jetstream.RawStreamMsg{Subject: "$KV.b.k", Sequence: 9, Header: full("KV-Operation", "DEL"), Time: at}},
		{name: "404", msg: &nats.Msg{Header: nats.Header{"Status": {"404"}, "Description": {"Message Not Found"}}}},
		{name: "408", msg: &nats.Msg{Header: nats.Header{"Status": {"408"}, "Description": {"Bad Request"}}}, wantErr: "nats: Bad Request"},
		{name: "other status without description", msg: &nats.Msg{Header: nats.Header{"Status": {"500"}}}, wantErr: "nats: unable to get message"},
		{name: "no headers", msg: &nats.Msg{Data: []byte("v")}, wantErr: "nats: response should have headers"},
		{name: "no stream", msg: &nats.Msg{Header: nats.Header{"Nats-Sequence": {"1"}}, Data: []byte("v")}, wantErr: "nats: missing stream header"},
		{name: "bad sequence", msg: &nats.Msg{Header: nats.Header{"Nats-Stream": {"KV_b"}, "Nats-Sequence": {"x"}}, Data: []byte("v")},
			wantErr: "nats: invalid sequence header"},
		{name: "no time", msg: &nats.Msg{Header: nats.Header{"Nats-Stream": {"KV_b"}, "Nats-Sequence": {"1"}}, Data: []byte("v")},
			wantErr: "nats: missing timestamp header"},
		{name: "no subject", msg: &nats.Msg{Header: nats.Header{"Nats-Stream": {"KV_b"}, "Nats-Sequence": {"1"}, "Nats-Time-Stamp": {ts}}, Data: []byte("v")},
			wantErr: "nats: missing subject header"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := natsreq.DirectMsg(tc.msg)
			switch {
			case tc.want != nil:
				if err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("DirectMsg = %#v, %v; want %#v", got, err, tc.want)
				}
			case tc.wantErr == "":
				if got != nil || err != jetstream.ErrMsgNotFound {
					t.Fatalf("DirectMsg = %#v, %v; want ErrMsgNotFound", got, err)
				}
			default:
				if got != nil || err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("DirectMsg = %#v, %v; want %q", got, err, tc.wantErr)
				}
			}
		})
	}
}

// FuzzParseStoredMsg checks that the parser never panics, and that whatever it takes as a message the jetstream
// package's decoding reads alike. Inputs whose member names encoding/json would match differently (another case, a
// name twice) or that are not valid UTF-8 (encoding/json replaces such bytes) are only checked for panics.
func FuzzParseStoredMsg(f *testing.F) {
	for _, s := range []string{
		`{"message":{"subject":"$KV.b.k","seq":42,"data":"` + b64("claim") + `","time":"2026-12-04T03:54:23.123456789Z"}}`,
		`{"message":{"subject":"$KV.b.k","seq":7,"hdrs":"` + b64(tombstoneHdrs) + `","time":"2026-12-04T03:54:23Z"}}`,
		`{"message":{"subject":"s","seq":1,"hdrs":"` + b64("NATS/1.0 404 Not Found\r\nA: 1\r\nA: 2\r\n\r\n") + `"}}`,
		`{"error":{"code":404,"err_code":10037,"description":"no message found"}}`,
		`{"error":{"code":503,"err_code":10008}}`,
		`{"message":{"subject":"a\/b\u0041","seq":3,"data":"","extra":{"z":[1,"2",null]}}}`,
		`{"message":null,"error":null}`,
		`{"message":{"seq":1e3}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := natsreq.ParseStoredMsg(data)
		if (got == nil) == (err == nil) {
			t.Fatalf("ParseStoredMsg = %v, %v: exactly one of them must be set", got, err)
		}
		if err != nil || !utf8.Valid(data) || ambiguousNames(data) {
			return
		}
		ref, refErr := referenceStoredMsg(data)
		if refErr != nil {
			t.Fatalf("ParseStoredMsg took %q (%#v), the jetstream package's decoding fails: %v", data, got, refErr)
		}
		if !reflect.DeepEqual(got, ref) {
			t.Fatalf("ParseStoredMsg(%q) = %#v\njetstream package: %#v", data, got, ref)
		}
	})
}

// ambiguousNames reports a document in which a member name the parser knows appears twice, or in another case
// (encoding/json matches names case-insensitively and merges repeated objects).
func ambiguousNames(data []byte) bool {
	known := []string{"message", "error", "subject", "seq", "hdrs", "data", "time", "code", "err_code", "description", "type"}
	seen := map[string]bool{}
	var s jsonscan.Scanner
	s.Reset(data)
	for {
		tok, err := s.Next()
		if err != nil || tok.Kind == jsonscan.EOF {
			return false
		}
		if tok.Kind != jsonscan.Name {
			continue
		}
		name := string(jsonscan.AppendUnescaped(nil, tok.Raw))
		for _, k := range known {
			if strings.EqualFold(name, k) || foldsLoosely(name, k) {
				if name != k || seen[k] {
					return true
				}
				seen[k] = true
			}
		}
	}
}

// foldsLoosely catches the Unicode folds encoding/json also applies (the Kelvin sign for k, the long s for s).
func foldsLoosely(name, k string) bool {
	r := strings.NewReplacer("\u212a", "k", "\u017f", "s")
	return strings.EqualFold(r.Replace(name), k) && !bytes.Equal([]byte(name), []byte(k))
}
