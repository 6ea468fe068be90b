package pipeline

// ClaimFailed is claimFailed: what a failed claim tells the protocol.
var ClaimFailed = claimFailed

// ClaimClears is claimClears: whether a claim that succeeded clears a window error.
var ClaimClears = claimClears
