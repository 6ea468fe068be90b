// Package pipeline is the worker's core: it consumes raw webhook deliveries ("envelopes") from the input stream,
// finds each one's event key, claims the key in the TTL'd window, republishes unique events to the output stream
// and acknowledges the envelope.
//
// # Wire contract
//
// Subjects, headers, the headers a publisher may not set and the dead-letter reasons are package contract's;
// docs/consuming.md describes them for consumers. The pipeline reads "<InputPrefix>.<tenant>.<source>[.<more>...]"
// (InputStream), publishes each unique or unkeyed event on "<OutputPrefix>.<tail>" (OutputStream), a copy of each
// duplicate on "<DuplicatesPrefix>.<tail>" when set, and what it can never process on "<DLQPrefix>.<reason>"
// (DLQStream).
//
// A delivery of an undeclared source, or of a source declared without dedupe, is forwarded unkeyed (no-dedupe); one
// that is contract.Unverified never claims a key and is forwarded unkeyed (unverified). A duplicate is
// acknowledged and not republished.
//
// A dead letter (a subject contract.ParseInput refuses, a control-shaped envelope, a claim the window rejects as
// invalid, an event the output stream refuses for good) is stored, then the envelope is acknowledged and logged at
// warn; one too large to store whole is stored without the sender's headers and with the body cut to fit
// (Dedupe-Truncated). An event dead-lettered after it won its claim releases the claim first, so that a
// well-formed retry is published. If even the dead letter cannot be stored, the envelope is handed back (NAK).
//
// # Guarantees
//
// Ordering of effects: for each envelope, claim, then publish, then ack — never an ack before the outcome is
// durable (JetStream acknowledged the publish). Outputs are not in input order.
//
// At least once in, exactly once per claim out: the consumer has explicit acks and no delivery limit, so an
// envelope is redelivered until its outcome is stored. A claim records the envelope's identity (stream sequence and
// stored-at time) and the delivery that holds it; a redelivery after a crash between claim and ack finds its own
// claim, takes it over (Owned) and publishes again with the same Nats-Msg-Id, which the output stream's duplicate
// window collapses; an earlier delivery than the claim's is Stale and does nothing. The Nats-Msg-Id derives from
// the envelope alone, so a redelivery that claims anew after the TTL still collapses; another envelope of the same
// event admitted after its TTL is published again. A delivery held past MaxHold, or across a pause of the process,
// is handed back instead of published, so that no publish of this pipeline reaches the output stream after the
// duplicate window of another replica's publish of the same envelope.
//
// Window down: a claim that fails (anything but an invalid claim) is never taken for "not a duplicate". The
// envelope is NAKed with a growing delay (250ms doubling to 5s), dedupeworker_window_errors_total counts it and
// Ready reports the window unreachable. With ForwardWhenWindowDown the envelope is instead forwarded unkeyed with
// reason window-unavailable (availability over uniqueness).
//
// Output stream full or unavailable (or no publish ack within PublishTimeout): NAK with the same backoff, never
// ack.
//
// Shutdown (Run's context cancelled): see Run. A NATS restart or leader change pauses the pipeline; it pulls again
// after reconnects and missed heartbeats and binds the consumer again if it stops.
//
// # Decisions
//
// Every decision above is made by one pure function, protocol.Decide (package pipeline/protocol, with its glossary
// and invariants; docs/architecture.md draws it): a worker inspects the envelope, then carries out the step Decide
// returns and reports its result, until Decide says to stop.
//
// # Concurrency
//
// Run owns every goroutine: MaxInFlight workers fed by the pipeline's own pull loop (pull.go), a status poller,
// the pause watcher, and the consume supervisor. Each worker handles one envelope at a time, so up to MaxInFlight
// round trips overlap. A pipeline never takes over its connection's handlers, and several pipelines (on
// different streams) may share one connection.
package pipeline
