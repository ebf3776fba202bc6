// Package commitspec is the contract of a commitDenylist's ranges: the spec
// a check carries, which the compiler writes and the evaluator in
// internal/gitcheck reads. It is a leaf, so the compiler runs no git to
// name it.
package commitspec

// Kind is the gate kind of a commitDenylist's ranges: a check's "commits"
// member.
const Kind = "commits"

// Ranges is a commitDenylist check that needs the repository: the commits
// pushed (parameter name and commit) and the denylisted ranges (start
// exclusive, end inclusive) of Repository (each pushed commit's own
// repository when it names none).
type Ranges struct {
	Repository string         `json:"repository"`
	Pushed     []PushedCommit `json:"pushed"`
	Ranges     []Range        `json:"ranges"`
}

// PushedCommit is a commit parameter's value.
type PushedCommit struct {
	Param  string `json:"param"`
	Commit string `json:"commit"`
	// Repository is the parameter's repository.
	Repository string `json:"repository"`
}

// Range is a denylisted range: after Start, up to and with End.
type Range struct {
	Start string `json:"start"`
	End   string `json:"end"`
}
