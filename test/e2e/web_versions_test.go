package e2e

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestWebUIRollbackTo: the service page lists the earlier versions with
// their display names and a "Roll back to this" action per release
// channel; it asks first, the rollback waits for prod's approval like any
// rollout, and a refusal (the version is already there) is shown.
func TestWebUIRollbackTo(t *testing.T) {
	requireE2E(t)
	b := newBrowser(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	var v1, v2 string
	for _, tag := range []string{"1.0", "2.0"} {
		version, _ := s.push("alice", "shop", "web", "image="+tag)
		s.waitStatus("shop", "web", 60*time.Second, "prod waiting for "+tag, prodWaitsForApproval)
		s.ok("bob", "approve", "web", "--app", "shop", "--release-channel", "prod")
		s.waitStatus("shop", "web", 60*time.Second, "prod on "+tag, channelIs("prod", "CONVERGED", version))
		v1, v2 = v2, version
	}
	b.signIn(s.url, s.tokenOf("web-admin"))
	b.do("open the service", chromedp.Navigate(s.url+"/#/apps/shop/services/web"))
	b.waitFor("the versions, named", hasText("table[aria-label], .scroll[aria-label=Versions] td", "1.0")+` && `+hasText(".scroll[aria-label=Versions] td", "2.0")+
		` && `+hasText(".node .sub", "runs 2.0 ("))
	b.shot("1-versions")
	b.axe("1-versions")

	// A refusal: staging is rolled back to 1.0 elsewhere while the form is open.
	b.click("Roll back staging to this…")
	s.ok("alice", "rollback", "web", "--app", "shop", "--release-channel", "staging", "--to", "1.0")
	b.click("Roll back staging")
	b.waitFor("the refusal", hasText("[role=alert]", "Refused: ")+` && `+hasText("[role=alert]", "already"))
	b.shot("2-refused")
	b.click("Cancel")
	s.waitStatus("shop", "web", 60*time.Second, "staging on 1.0", channelIs("staging", "CONVERGED", v1))

	b.click("Roll back prod to this…")
	b.waitFor("the question", hasText("form[aria-label] p", "Roll prod back from 2.0 (")+` && `+hasText("form[aria-label] p", "approvals, protections and freezes apply"))
	b.shot("3-confirm")
	b.axe("3-confirm")
	b.click("Roll back prod")
	b.waitFor("prod waits for its approval", hasText("#ch-prod", "Approve prod…"))
	st := s.waitStatus("shop", "web", 60*time.Second, "prod waiting for the rollback's approval", prodWaitsForApproval)
	if p := channel(t, st, "prod"); p.Version != v2 || p.DesiredVersion != v1 {
		t.Errorf("prod before its approval: %s", dump(p))
	}
	b.click("Approve prod…")
	b.click("Approve prod")
	b.waitFor("prod back on 1.0, live", hasText("#ch-prod dd", "1.0 (")+` && `+hasText("#ch-prod .badge", "Converged"))
	b.shot("4-rolled-back")
	after := s.waitStatus("shop", "web", 60*time.Second, "prod on 1.0", channelIs("prod", "CONVERGED", v1))
	if c := channel(t, after, "prod"); c.DisplayName != "1.0" {
		t.Errorf("prod: %s", dump(c))
	}
}
