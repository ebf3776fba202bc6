package postgres

import (
	"fmt"
	"testing"

	"github.com/drover-dev/drover/internal/store"
)

// TestPutConfigsMany: an apply of 40,000 configs fits PostgreSQL's lock
// table with its default size (one advisory lock per config ran out of
// shared memory here, past 20,000).
func TestPutConfigsMany(t *testing.T) {
	t.Parallel()
	s := open(t)
	objs := make([]store.ConfigObject, 40000)
	for i := range objs {
		objs[i] = store.ConfigObject{Kind: "service", Name: fmt.Sprintf("shop/s%d", i), Body: []byte(`{}`), Hash: fmt.Sprint(i)}
	}
	res, err := s.PutConfigs(t.Context(), objs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(objs) || !res[len(res)-1].Created || res[len(res)-1].Config.Name != "shop/s39999" {
		t.Fatalf("got %d results, last %+v", len(res), res[len(res)-1])
	}
}
