package state

import (
	"testing"

	ds "github.com/drover-dev/drover/internal/desiredstate"
)

func TestNotifyOf(t *testing.T) {
	for _, c := range []struct {
		e    Event
		want string
	}{
		{Event{Type: ds.EventConverged, Data: []byte(`{"version":"v1"}`)}, NotifyServiceDeployed},
		{Event{Type: ds.EventConverged, Data: []byte(`{"version":"v2","previousVersion":"v1"}`)}, NotifyServiceUpgraded},
		{Event{Type: ds.EventConverged, Data: []byte(`{"version":"v1","previousVersion":"v2","rollback":true}`)}, NotifyServiceRolledBack},
		{Event{Type: ds.EventConverged}, NotifyServiceDeployed},
		{Event{Type: ds.EventApprovalRequested}, NotifyApprovalRequested},
		{Event{Type: ds.EventBlocked}, NotifyChannelBlocked},
		{Event{Type: ds.EventFailed}, NotifyChannelFailed},
		{Event{Type: ds.EventFrozen, Application: "shop"}, NotifyFreezeStarted},
		// A freeze's events of the services it holds notify nobody: the
		// freeze's own does, once.
		{Event{Type: ds.EventFrozen, Application: "shop", Service: "web"}, ""},
		{Event{Type: ds.EventApplying}, ""},
	} {
		n, ok := NotifyOf(c.e)
		if n.Type != c.want || ok != (c.want != "") {
			t.Errorf("NotifyOf(%s %s): %q %v, want %q", c.e.Type, c.e.Data, n.Type, ok, c.want)
		}
		if ok && !MayNotify(c.e.Type) {
			t.Errorf("MayNotify(%s) is false, but it notifies", c.e.Type)
		}
	}
}
