package embedded

// AwaitStart is awaitStart: the wait, after Start has given a server up, for its own start to return.
var AwaitStart = awaitStart
