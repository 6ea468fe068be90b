package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// sideBare is the ingest mode's third side: the handler anyone would write first — read the body, publish it
// with the request's headers (and Ingest-Verified: true, so that both store the same envelope), wait for the
// PubAck — with no verification and no filtering. It runs in a process of its own (the bench's binary, started
// with bareEnv), so that its CPU is measured as the receiver's is.
const sideBare = "bare"

// bareEnv, when set to "<listen address> <NATS URL>", makes the bench's binary the bare handler's process
// instead of the bench (bareMain), until SIGTERM.
const bareEnv = "DEDUPEBENCH_BARE_HANDLER"

func init() {
	if v := os.Getenv(bareEnv); v != "" {
		os.Exit(bareMain(v))
	}
}

// bareMain runs the bare handler's process; its exit status is 0 after SIGTERM.
func bareMain(spec string) int {
	addr, url, ok := strings.Cut(spec, " ")
	if !ok {
		fmt.Fprintf(os.Stderr, "dedupebench: bare: %s: want \"<listen address> <NATS URL>\", got %q\n", bareEnv, spec)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := serveBare(ctx, addr, url); err != nil {
		fmt.Fprintf(os.Stderr, "dedupebench: bare: %v\n", err)
		return 1
	}
	return 0
}

// serveBare serves the bare handler on addr until ctx ends.
func serveBare(ctx context.Context, addr, url string) error {
	nc, err := nats.Connect(url, nats.Name("dedupebench-bare"), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connect %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: bareHandler{js: js}, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // owned here: ends with Shutdown
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// bareHandler is the bare side's handler: POST /hooks/<tenant>/<source> publishes to ingest.<tenant>.<source>;
// /readyz is 200 (the bench's readiness wait).
type bareHandler struct{ js jetstream.JetStream }

func (h bareHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/readyz" {
		w.WriteHeader(http.StatusOK)
		return
	}
	tenant, source, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, receiver.HookPrefix), "/")
	if !ok || req.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	hdr := nats.Header(req.Header)
	hdr.Set(contract.HeaderVerified, "true")
	ctx, cancel := context.WithTimeout(req.Context(), receiver.DefaultPublishTimeout)
	defer cancel()
	msg := &nats.Msg{Subject: inputPrefix + "." + tenant + "." + source, Header: hdr, Data: body}
	ack, err := h.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(inputStream))
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, "accepted: %s seq %d\n", ack.Stream, ack.Sequence)
}
