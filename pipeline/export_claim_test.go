package pipeline

// ClaimFailed is claimFailed: what a failed claim tells the protocol.
var ClaimFailed = claimFailed
