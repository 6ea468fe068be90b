package pipeline

// InputLimitProblems is inputLimitProblems: the input stream's limits that delete unprocessed envelopes.
var InputLimitProblems = inputLimitProblems

// DroppedUndelivered is droppedUndelivered: the envelopes gone from the input stream before their delivery.
var DroppedUndelivered = droppedUndelivered

// SeesAll is seesAll: whether a consumer's filters take in every subject the stream stores.
var SeesAll = seesAll
