package cli

import (
	"slices"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

func TestWaitsForPerson(t *testing.T) {
	t.Parallel()
	ch := func(name, status, reason string) apiv1.ChannelStatus {
		return apiv1.ChannelStatus{Name: name, Status: status, Reason: reason}
	}
	for _, tc := range []struct {
		name     string
		channels []apiv1.ChannelStatus
		want     bool
	}{
		{"prod waits, staging converged", []apiv1.ChannelStatus{ch("staging", "CONVERGED", ""), ch("prod", "WAITING_MANUAL_APPROVAL", "MANUAL_APPROVAL_PENDING")}, true},
		{"prod approved early, staging still converging", []apiv1.ChannelStatus{ch("staging", "CONVERGING", "UPDATING_PODS"), ch("prod", "WAITING_MANUAL_APPROVAL", "MANUAL_APPROVAL_PENDING")}, false},
		{"a channel after prod waits for it", []apiv1.ChannelStatus{ch("staging", "CONVERGED", ""), ch("prod", "WAITING_MANUAL_APPROVAL", ""), ch("prod-eu", "WAITING_PRECONDITIONS", "RELEASE_CHANNEL_DEPENDENCY_UNMET")}, true},
		{"a deploy window passes on its own", []apiv1.ChannelStatus{ch("prod", "WAITING_MANUAL_APPROVAL", ""), ch("prod-eu", "WAITING_PRECONDITIONS", "LIFECYCLE_CHECK_PENDING")}, false},
		{"nothing waits for a person", []apiv1.ChannelStatus{ch("staging", "CONVERGED", ""), ch("prod", "CONVERGING", "")}, false},
		{"paused", []apiv1.ChannelStatus{ch("staging", "PAUSED", "PAUSED"), ch("prod", "WAITING_MANUAL_APPROVAL", "")}, false},
	} {
		if got := waitsForPerson(&apiv1.ServiceStatus{ReleaseChannels: tc.channels}); got != tc.want {
			t.Errorf("%s: waitsForPerson = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPendingApprovalsNameTheCommand(t *testing.T) {
	t.Parallel()
	st := &apiv1.ServiceStatus{Application: "shop", Service: "web", ReleaseChannels: []apiv1.ChannelStatus{
		{Name: "staging", Status: "CONVERGED"},
		{Name: "prod", Status: "WAITING_MANUAL_APPROVAL", Approvals: []apiv1.ApprovalStatus{{Topic: "prod", MinApprovers: 1}}},
		{Name: "prod-eu", Status: "WAITING_MANUAL_APPROVAL", Approvals: []apiv1.ApprovalStatus{
			{Topic: "security", MinApprovers: 1, ApprovedBy: []string{"bob"}}, {Topic: "sre", MinApprovers: 2, ApprovedBy: []string{"carol"}}}},
	}}
	got := pendingApprovals(&globals{server: "http://127.0.0.1:7431"}, st)
	var cmds []string
	for _, a := range got {
		cmds = append(cmds, a.Command)
	}
	want := []string{
		"drover approve web --app shop --release-channel prod --server http://127.0.0.1:7431",
		"drover approve web --app shop --release-channel prod-eu --server http://127.0.0.1:7431 --topic sre",
	}
	if !slices.Equal(cmds, want) {
		t.Errorf("commands:\n%q\nwant\n%q", cmds, want)
	}
	if s := approvalChannels(got); s != "prod, prod-eu" {
		t.Errorf("approvalChannels = %q", s)
	}
}

// TestWaitFlagsGoWithWait: push's --timeout and --wait-for-approval mean
// nothing without --wait: a usage error, before anything is sent.
func TestWaitFlagsGoWithWait(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"push", "web", "--app", "shop", "--timeout", "1m"},
		{"push", "web", "--app", "shop", "--wait-for-approval"},
		{"push", "web", "--app", "shop", "-o", "yaml"},
		{"wait", "web", "--app", "shop", "-o", "text/plain"},
	} {
		if code, _, stderr := runMain(append(args, "--server", noServer)...); code != exitUsage {
			t.Errorf("drover %v: exit %d, want %d\n%s", args, code, exitUsage, stderr)
		}
	}
}
