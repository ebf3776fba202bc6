// Package alertspec is the contract of alert gates: the spec a check
// carries, which the compiler writes and the evaluator in internal/alerts
// reads. It is a leaf, so the compiler needs no HTTP client to name it.
package alertspec

// Kind is the gate kind of alert gates: a check's "alert" member.
const Kind = "alert"

// Spec is an alert gate as a check carries it: the Alertmanager to ask and
// the label matchers an alert must match to hold the channel.
type Spec struct {
	URL      string   `json:"url"`
	Matchers []string `json:"matchers"`
}
