package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/store"
)

// TestAPIErrorsWrapCodeAndCause: an API error matches its code and the
// causes it wraps with errors.Is, and is answered with the code and its
// status.
func TestAPIErrorsWrapCodeAndCause(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("revoke: %w", statusError(apiv1.CodeNotFound, fmt.Errorf("session 7: %w", store.ErrNotFound)))
	if !errors.Is(err, apiv1.CodeNotFound) || !errors.Is(err, store.ErrNotFound) || errors.Is(err, apiv1.CodeConflict) {
		t.Fatalf("%v does not wrap its code and cause alone", err)
	}
	for _, code := range apiv1.ErrorCodes() {
		if code == apiv1.CodeInternal {
			continue // answered with the store's state, which needs a store
		}
		w := httptest.NewRecorder()
		writeError(w, nil, errorf(code, "refused with %s", code))
		var body apiv1.ErrorResponse
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if w.Code != code.HTTPStatus() || body.Error.Code != code || body.Error.Message != "refused with "+string(code) {
			t.Errorf("%s: answered %d %+v", code, w.Code, body.Error)
		}
	}
}
