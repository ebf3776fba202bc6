package requests

import (
	"errors"
	"strings"
	"testing"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

func prodChannel(gates ...ds.Approval) Channel {
	return Channel{Channel: &ds.Channel{Name: "prod", DependsOn: []string{"staging"}, Approvals: gates}, Version: "v-2", StateID: "ds-2"}
}

func approvalBy(user, topic string, reject bool) store.Approval {
	return store.Approval{DesiredStateID: "ds-2", ReleaseChannel: "prod", Topic: topic, User: user, Reject: reject}
}

// TestB14DuplicateApprovalReported: a person who answered a gate is told so,
// whether the gate still needs approvers or not.
func TestB14DuplicateApprovalReported(t *testing.T) {
	t.Parallel()
	waiting := store.Instance{Status: ds.StatusWaitingManualApproval, DesiredStateID: "ds-2"}
	two := prodChannel(ds.Approval{Topic: "prod", MinApprovers: 2})
	one := prodChannel(ds.Approval{Topic: "prod", MinApprovers: 1})
	alice := []store.Approval{approvalBy("alice", "prod", false)}
	for _, tc := range []struct {
		name      string
		ch        Channel
		approvals []store.Approval
		topic     string
		want      string
	}{
		{"quorum not met", two, alice, "", "alice already approved prod"},
		{"quorum not met, topic named", two, alice, "prod", "alice already approved prod"},
		{"quorum met", one, alice, "", "alice already approved prod"},
		{"quorum met, topic named", one, alice, "prod", "alice already approved prod"},
		{"rejected before", two, []store.Approval{approvalBy("alice", "prod", true)}, "", "alice already rejected prod"},
		{"named gate", prodChannel(ds.Approval{Topic: "prod/security", MinApprovers: 2}), []store.Approval{approvalBy("alice", "prod/security", false)}, "", "alice already approved prod (approval prod/security)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := PendingApproval(tc.ch, waiting, tc.approvals, tc.topic, "alice")
			if !errors.Is(err, ErrAlreadyAnswered) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("PendingApproval: %v; want ErrAlreadyAnswered with %q", err, tc.want)
			}
		})
	}
	// Another person still counts.
	if g, err := PendingApproval(two, waiting, alice, "", "bob"); err != nil || g.Topic != "prod" {
		t.Errorf("bob's approval: %+v, %v", g, err)
	}
	if _, err := PendingApproval(one, waiting, alice, "", "bob"); !errors.Is(err, ErrNotWaitingForApproval) {
		t.Errorf("bob's approval of a met gate: %v, want ErrNotWaitingForApproval", err)
	}
}

// TestS3PreApprovalOfChannelNotReached: an approval (or rejection) may be
// given before the channel is reached; it binds to the desired state it names.
func TestS3PreApprovalOfChannelNotReached(t *testing.T) {
	t.Parallel()
	ch := prodChannel(ds.Approval{Topic: "prod", MinApprovers: 1})
	for _, inst := range []store.Instance{
		{}, // never planned
		{Status: ds.StatusPending, DesiredStateID: "ds-1"},
		{Status: ds.StatusWaitingPreconditions, DesiredStateID: "ds-2", CurrentVersion: "v-1", TargetVersion: "v-1", TargetStateID: "ds-1"},
	} {
		if g, err := PendingApproval(ch, inst, nil, "", "alice"); err != nil || g.Topic != "prod" {
			t.Errorf("approval of prod in %+v: %+v, %v", inst, g, err)
		}
	}
	received := store.Instance{Status: ds.StatusConverging, DesiredStateID: "ds-2", TargetVersion: "v-2", TargetStateID: "ds-2"}
	if _, err := PendingApproval(ch, received, nil, "", "alice"); !errors.Is(err, ErrNotWaitingForApproval) {
		t.Errorf("approval of a channel that received the version: %v", err)
	}
}
