package pipeline_test

import (
	"strconv"
	"testing"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestHolders: a copy waits for a holding until it finishes and learns whether it published; a finished,
// published holding decides later claims of its key until FinishedHoldings newer ones pushed it out; one held
// again meanwhile is not pushed out.
func TestHolders(t *testing.T) {
	h := pipeline.NewHolders()

	finish := h.Begin("k", 7)
	if h.Known("k") != 0 {
		t.Error("an undecided holding must not decide a claim")
	}
	if found, _ := h.Wait("k", 8); found {
		t.Error("another envelope's claim found as this holding")
	}
	found, wait := h.Wait("k", 7)
	if !found {
		t.Fatal("holding not found")
	}
	got := make(chan bool)
	go func() { got <- wait() }()
	finish(true)
	if !<-got {
		t.Error("the waiting copy did not learn that the holder published")
	}
	if found, wait := h.Wait("k", 7); !found || !wait() {
		t.Error("a copy arriving after the holder finished must find it published at once")
	}
	if h.Known("k") != 7 {
		t.Errorf("Known = %d, want the holder's revision 7", h.Known("k"))
	}

	finish = h.Begin("gone", 9)
	finish(false)
	if found, _ := h.Wait("gone", 9); found || h.Known("gone") != 0 {
		t.Error("a holding that did not publish must be forgotten")
	}

	// A later delivery of an envelope holds its claim in place of an earlier one: the earlier one finishing (a
	// stale delivery handing back) leaves the later one in place.
	earlier := h.Begin("r", 1)
	later := h.Begin("r", 2)
	earlier(false)
	if found, _ := h.Wait("r", 2); !found {
		t.Error("the earlier delivery's finish removed the later one's holding")
	}
	later(true)

	// "k" is the oldest finished holding; "again" is held again, undecided, when its turn to go comes.
	h.Hold("again", 10)
	finishAgain := h.Begin("again", 11)
	for i := range pipeline.FinishedHoldings { // pushes out "k", then reaches "again"
		h.Hold("fill-"+strconv.Itoa(i), uint64(100+i))
	}
	if h.Known("k") != 0 {
		t.Error("the oldest finished holding was not pushed out")
	}
	if found, _ := h.Wait("again", 11); !found {
		t.Error("a holding under way was pushed out")
	}
	finishAgain(true)
	if h.Known("again") != 11 {
		t.Errorf("Known(again) = %d, want 11", h.Known("again"))
	}
}
