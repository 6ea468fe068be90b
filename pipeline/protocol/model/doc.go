// Package model checks the exactly-once protocol by exhaustive exploration: a deterministic model of the world the
// decision core runs in, driven through every interleaving up to a bound, with the protocol's invariants checked
// after each step. It drives the real core (protocol.Decide, through Protocol) and, for comparison, the worker's
// decisions before the core (Legacy).
//
// The model is test code: everything but this package doc is in _test.go files, so no build of the worker
// compiles it (docs/model.md#test-code).
//
// # The world
//
// One event, of which Envelopes copies sit in the input stream (copy A is the large one: once the output's limits
// are lowered, A can never be stored). The model holds:
//
//   - the window key: a create that succeeds only on an empty key or a marker (Won); a claim that records its
//     claimant and delivery, so that a later delivery of the claimant takes it over with a revision-checked write
//     (Owned) and an earlier one is Stale; revision-checked record (MarkPublished) and release; a release leaves
//     a marker naming the released envelope and saying whether the event may be stored: the same envelope's later
//     claim is told DeadLettered, another's wins over it (and a claim won over a may-be-stored marker says so,
//     across takeovers); TTL expiry as a step, which leaves an anonymous marker;
//   - the consumer: a work-queue input stream (or one that keeps acknowledged envelopes); deliveries numbered per
//     consumer; the ack wait running out as a step, after which the envelope is delivered again while the earlier
//     delivery may still be running; a NAK; an ack accepted from any delivery of a pending message, which removes
//     it; the consumer deleted and re-created (delivery counts restart, acks to the old one go nowhere);
//   - the output stream: one Nats-Msg-Id per envelope and a duplicate window that collapses a second publish of
//     it; a whole duplicate window passing as a step (the output forgets its ids, every delivery held across it is
//     past the hold bound, a claim first made before it is older than the window); a publish handed to the client
//     library and sent in a later step; a publish stored whose PubAck is lost; a publish refused for now; limits
//     lowered, after which A is refused for good;
//   - replicas, each with the holdings its deliveries have in memory (pipeline/holders.go): a replica freezes and
//     resumes (its deliveries are then past a pause; with the connection fence a publish handed to the client
//     before the freeze is dropped, without it the publish is sent on resume), or crashes and restarts with
//     nothing in memory;
//   - failures of each effect: a claim, record, release or ack answered by nobody, whether or not it was applied; a
//     dead letter not stored; a key read again without an answer.
//
// Ack-wait expiries and every fault count against Config.Faults.
//
// # The invariants
//
// After each step (and in each end state, where nothing is enabled), the model checks:
//
//   - RuleLost: in an end state where every copy has left the input stream, the event is in the output, or
//     dead-lettered with no copy acknowledged as its duplicate. An end state with a copy still pending (at its
//     delivery bound) is visibly stuck, not lost: a later delivery would decide it.
//   - RuleTwice: no second store of the event while its claim lives (a TTL expiry ends the check: the TTL is the
//     dedupe window by definition), except a second store of the same envelope marked Dedupe-Possible-Duplicate;
//   - RuleMarkedUnexcused: such a marked copy only under the conditions of
//     docs/failures.md#when-never-published-twice-holds: an earlier store of the envelope was not known to be
//     stored and recorded (its PubAck lost; its process dead, or held a whole duplicate window, between the PubAck
//     and its ack; its ack unconfirmed and its record failed or found the key moved on). A
//     marked store of a copy whose claim was made over a may-be-stored release marker is excused too: a takeover
//     refused for good released the key while its earlier delivery may have stored the event;
//   - RuleTwiceAfterDeadLetter: a second store after a store of the event was dead-lettered and its claim released
//     (the same invariant as RuleTwice, counted apart);
//   - RuleNoOutcome: an envelope is acknowledged only when it is stored, dead-lettered or a duplicate.
//
// A violation comes with the interleaving that led to it, one readable line per step (Replay).
//
// # The search
//
// Depth first from the initial state, skipping states already visited: a state is kept as a 64-bit hash of its
// canonical form (revisions renumbered by their order, replicas ordered), so states that differ only in the history
// of revision numbers or in which replica is which are explored once. The order of the search is fixed (no seed);
// the hashes are taken under a seed drawn per run, so the rare collision of two states' hashes (a few in a million
// runs at ten million states) would skip a different state in each run.
package model
