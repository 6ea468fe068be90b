package hashing_test

import (
	"fmt"
	"os"

	"github.com/dedupeworker/dedupeworker/hashing"
)

func ExampleNew() {
	h, err := hashing.New(hashing.Options{Only: []string{".user_id", ".template"}})
	if err != nil {
		panic(err)
	}
	key, err := h.Key("send_email", []byte(`{"template": "welcome", "user_id": 42, "requested_at": "2024-05-01"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(key)
	if err := h.Canonical(os.Stdout, []byte(`{"user_id": 42, "template": "welcome", "n": 1.0}`)); err != nil {
		panic(err)
	}
	fmt.Println()
	// Output:
	// send_email:1f98104cc5a072ae84731379f5888c48c1886f7d58681e806cc9cca4d601f765
	// {"template":"welcome","user_id":42,}
}
