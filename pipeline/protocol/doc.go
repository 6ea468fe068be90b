// Package protocol is the worker's exactly-once protocol as one pure decision: given what is known of one delivery
// of an envelope so far, Decide returns the next step to take. It reads no clock, talks to no server and starts no
// goroutine; the pipeline executes its plans, and a model of the world can drive it through every interleaving.
//
// # Glossary
//
//   - Envelope: one message of the input stream (a raw webhook delivery as an ingest service published it),
//     identified by its sequence in the input stream and the time the stream stored it.
//   - Delivery: one handing of an envelope to a worker by the consumer. An envelope not acknowledged within the ack
//     wait is delivered again (JetStream's delivery count grows), so two deliveries of one envelope can be alive at
//     once; JetStream accepts an ack or a NAK from any of them.
//   - Claimant: the envelope that made a claim on an event key in the window (its sequence and stored-at time). The
//     claim also records which delivery of the claimant made it.
//   - Holder: the delivery that holds a key's claim now: the claimant's latest delivery. Only the holder may publish
//     the event, dead-letter it while holding its claim, or acknowledge its envelope.
//   - Takeover: a later delivery of the claimant rewrites the claim (expecting the revision it read) and becomes
//     the holder (claim status Owned). The earlier delivery is then stale.
//   - Stale: a delivery of the claimant that is no longer the holder (claim status Stale, or its release found the
//     key moved on). It does nothing at all: no ack, no NAK; the holder decides the envelope.
//   - Record: the holder writes into its claim that the event is stored in the output (the window's
//     MarkPublished), so that a later delivery of the envelope only acknowledges, and a copy that finds the claim
//     knows the holder's outcome is decided.
//   - Release: the holder replaces its claim (expecting its revision) by a release marker after dead-lettering the
//     event, so that a well-formed copy is admitted; a release that finds another revision changes nothing. The
//     marker names the envelope (a later delivery of it finds DeadLettered and only acknowledges) and says whether
//     the event may be stored (the holder had taken the claim over: the copy admitted over it publishes marked).
//
// # Invariants
//
// Every plan sequence Decide produces for one delivery keeps these:
//
//  1. One end. A delivery ends in exactly one Ack, exactly one Nak, or (stale only) neither.
//  2. Ack only a durable outcome: the event stored in the output (its publish acknowledged by JetStream); or its
//     dead letter stored and, when the delivery held the claim, the claim released by this very delivery; or a
//     copy of an event whose holder's outcome is decided (the claim records the publish, the holder finished
//     published in this process, or the holder is gone from a work-queue input stream while the key, read again
//     after that lookup, still holds the claim the copy found); or an earlier delivery's recorded publish; or an
//     earlier delivery's dead letter, found through the release marker naming the envelope.
//  3. Only the holder acknowledges a claimed envelope. A keyed envelope is never dead-lettered and acknowledged
//     without claiming first; a stale delivery, and a delivery whose release finds the key moved on, stop without
//     ack or NAK (JetStream would take that ack from any delivery and drop the envelope while a later delivery
//     still holds the claim undecided).
//  4. Publish only while holding the claim (Won, or Owned without a recorded publish), within the hold bound and
//     not across a pause of the process, so that no publish reaches the output after the duplicate window of
//     another delivery's publish of the same envelope.
//  5. A takeover whose claim was first made so long ago that the output's duplicate window may have forgotten an
//     earlier delivery's publish publishes marked as a possible duplicate; so does a claim made over a release
//     marker that says the event may be stored (a takeover refused for good released it: not releasing would lose
//     the event when the earlier delivery never stored it).
//  6. Once the output holds the event, shutdown changes nothing: the ack and the record still follow (the executor
//     sends them on a bounded context that shutdown does not cancel). When the input stream keeps acknowledged
//     envelopes the record comes before the ack (a waiting copy cannot see the holder leave the stream); otherwise
//     the ack comes first and the record follows only when the ack is unconfirmed.
//  7. A window that cannot decide is never "not a duplicate": the delivery is handed back (or, with
//     ForwardWhenWindowDown and a window not lost, forwarded unkeyed, marked window-unavailable).
//
// # Use
//
// The executor keeps one Facts per delivery, filled in by inspection, and loops: plan := Decide(f); carry out
// plan.Do; write its result into the matching field of f; until plan.Do is Stop. It refreshes f.Hold before every
// call. A step is never asked twice: a filled result moves the decision on. Decide is a plain function, and Plan and
// Facts plain values, so a test can wrap Decide and alter a plan (undo one rule) to show that the model catches it.
//
// # Stability
//
// The API is additive from its first version: new constants, fields and actions may be added (a zero field keeps
// the earlier meaning); existing names and meanings stay. Additions are listed here.
//
//   - Recheck (action) and Facts.Recheck: a copy whose holder is gone from the input reads the key again before
//     it is acknowledged as a duplicate (the model found a copy acknowledged while its holder was dead-lettered
//     and released between the copy's claim and its input lookup).
//   - ClaimStatus DeadLettered, ClaimResult.MayBeStored and Plan.MayBeStored: release markers (the model found a
//     redelivery of a dead-lettered envelope holding the key again, and a copy published unmarked after a refused
//     takeover released a claim whose earlier delivery had stored the event).
package protocol
