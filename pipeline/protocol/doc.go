// Package protocol is the worker's exactly-once protocol as one pure decision: given what is known of one delivery
// of an envelope so far, Decide returns the next step to take. It reads no clock, talks to no server and starts no
// goroutine; the pipeline executes its plans, and a model of the world can drive it through every interleaving.
//
// The terms (envelope, delivery, claimant, holder, takeover, stale, record, release) are those of the glossary in
// docs/architecture.md.
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
