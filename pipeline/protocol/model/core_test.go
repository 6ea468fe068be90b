package model_test

import (
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol/model"
)

// core is the decision core the model checks.
var core = model.Protocol(protocol.Decide)
