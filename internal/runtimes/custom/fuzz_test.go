package custom

import "testing"

// FuzzParseOutput feeds command stdout (user programs' output) to the
// structured fetch and getInfo parsers: no panic, and a parsed object has a
// known status.
func FuzzParseOutput(f *testing.F) {
	for _, seed := range []string{
		`{"objects":[{"name":"web","objectType":"vm","status":"SUCCEEDED","version":"v1","replicas":"2"}]}`,
		`{"objects":[{"name":"a","status":"pending"}],"message":"x"}`,
		`{"outputs":[{"name":"Version","text":"v7"}]}`,
		`{"outputs":null}`, `{}`, `[]`, `null`, ``, `{"objects":[{}]}`, `{"objects":[{"replicas":1e400}]}`,
		`{"outputs":[{"name":"a","text":"b"}]} trailing`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stdout []byte) {
		if out, err := parseStructured(stdout, nil); err == nil {
			for _, o := range out.Objects {
				if _, ok := objectStatus(o.Status); !ok {
					t.Fatalf("parsed an unknown status %q", o.Status)
				}
			}
		}
		_, _ = parseInfo(stdout, nil)
	})
}
