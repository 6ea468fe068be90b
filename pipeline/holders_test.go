package pipeline_test

import (
	"strconv"
	"testing"
	"time"

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

	// Past its claim's TTL a finished holding decides nothing: a key whose last revision is still its number can
	// only be another bucket's (the bucket deleted and created again, the number matching by chance).
	finishTTL := h.BeginUntil("ttl", 12, 10*time.Second)
	finishTTL(true)
	if got := h.KnownAt("ttl", 9*time.Second); got != 12 {
		t.Errorf("KnownAt(ttl, within the TTL) = %d, want 12", got)
	}
	if got := h.KnownAt("ttl", 10*time.Second); got != 0 {
		t.Errorf("KnownAt(ttl, past the TTL) = %d, want 0: a re-created bucket's revision would be taken for the claim", got)
	}
}
