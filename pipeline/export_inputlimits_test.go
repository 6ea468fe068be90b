package pipeline

// InputLimitProblems is inputLimitProblems: the input stream's limits that delete unprocessed envelopes.
var InputLimitProblems = inputLimitProblems

// UndeliveredGap is undeliveredGap: the envelopes gone from the input stream before their delivery.
var UndeliveredGap = undeliveredGap

// SeesAll is seesAll: whether a consumer's filters take in every subject the stream stores.
var SeesAll = seesAll
