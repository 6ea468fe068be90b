package verify

import "testing"

// A value that reads as a name is shown in the error; one that could be a misplaced secret is not.
func TestNotShown(t *testing.T) {
	for got, want := range map[string]string{
		"md5":                          `want one of a, b; got "md5"`,
		"hmac-sha256":                  `want one of a, b; got "hmac-sha256"`,
		"GitHub":                       "want one of a, b; got 6 characters; the value is not shown",
		"whsec_MfKQ9r8GKYqrTwjUPD8ILP": "want one of a, b; got 28 characters; the value is not shown",
		"":                             "want one of a, b; got 0 characters; the value is not shown",
	} {
		if s := notShown(got, "a", "b"); s != want {
			t.Errorf("%q: %q, want %q", got, s, want)
		}
	}
}
