package model_test

import "github.com/dedupeworker/dedupeworker/pipeline/protocol/model"

// core is the decision core the model checks: today's decisions with the holes the model found closed.
var core model.Decider = model.DeciderFunc(func(f model.Facts) model.Action {
	if f.Release == model.Moved {
		return model.Action{Kind: model.Stop}
	}
	if f.Unpublishable && f.First {
		f.First = false
	}
	if f.Claim == model.Duplicate && !f.Published && f.Input == model.InputGone {
		switch f.Reclaim {
		case model.ClaimNone:
			return model.Action{Kind: model.Reclaim}
		case model.Duplicate:
		default:
			return model.Action{Kind: model.Nak, Reason: "holder-undecided"}
		}
	}
	return model.Legacy.Next(f)
})
