package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/jsapi"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streamGet reads one message of a stream through the stream's API ($JS.API.STREAM.MSG.GET): the message at seq
// or, with nextBySubject, the first at or after seq on that subject; jetstream.ErrMsgNotFound when there is none.
//
// Never by direct get, even on a stream that allows them: a direct get answers with the stored headers as the
// reply's own, so a stored message with an empty body and a Status header — a control-header dead letter written
// before the worker renamed those headers, or its original in the input stream — reads as the server's status:
// nats.go takes "Status: 404" for "no message" (a scan would stop there and hide every later dead letter), 503 for
// "no responders" and anything else for an error. The API's JSON answer carries the headers encoded, as data.
func streamGet(ctx context.Context, js jetstream.JetStream, stream string, seq uint64, nextBySubject string) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(struct {
		Seq        uint64 `json:"seq"`
		NextBySubj string `json:"next_by_subj,omitempty"`
	}{seq, nextBySubject})
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dlqRequestTimeout)
		defer cancel()
	}
	reply, err := js.Conn().RequestWithContext(ctx, jsapi.Prefix(js.Options())+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("get message %d of stream %s: %w", seq, stream, err)
	}
	var resp struct {
		Message *struct {
			Subject  string    `json:"subject"`
			Sequence uint64    `json:"seq"`
			Header   []byte    `json:"hdrs"`
			Data     []byte    `json:"data"`
			Time     time.Time `json:"time"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("get message %d of stream %s: unreadable answer: %w", seq, stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return nil, fmt.Errorf("get message %d of stream %s: %w", seq, stream, resp.Error)
	case resp.Message == nil:
		return nil, fmt.Errorf("get message %d of stream %s: %w", seq, stream, jetstream.ErrInvalidJetStreamResponse)
	}
	m := resp.Message
	out := &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Sequence, Data: m.Data, Time: m.Time}
	if len(m.Header) > 0 {
		if out.Header, err = nats.DecodeHeadersMsg(m.Header); err != nil {
			return nil, fmt.Errorf("get message %d of stream %s: headers: %w", m.Sequence, stream, err)
		}
	}
	return out, nil
}
