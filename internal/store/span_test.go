package store

import "testing"

// TestServiceSpanString: errors name a span by its two ends.
func TestServiceSpanString(t *testing.T) {
	span := ServiceSpan{First: ServiceRef{Application: "blog", Service: "web"}, Last: ServiceRef{Application: "shop", Service: "api"}}
	if got, want := span.String(), "blog/web to shop/api"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
