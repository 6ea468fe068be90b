package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dedupeworker/dedupeworker/internal/jsapi"
	"github.com/dedupeworker/dedupeworker/internal/natsreq"
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
	m, err := natsreq.ParseStoredMsg(reply.Data)
	switch {
	case err == jetstream.ErrMsgNotFound: // returned itself
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("get message %d of stream %s: %w", seq, stream, err)
	}
	return m, nil
}
