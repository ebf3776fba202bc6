package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestWebUIRelease: a release of db -> api -> web has a page of its own,
// linked from the application's page while it is in flight: its id, its
// services by release channel, the order it takes and its history. Once db
// waits for its approval in prod, one "Approve release in prod" answers
// all three services with one call, the page lists the result per
// service, and all three converge in prod.
func TestWebUIRelease(t *testing.T) {
	requireE2E(t)
	b := newBrowser(t)
	dir := orderedTree(t, "shop", "")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	rel := s.release("dev", "shop", "--param", "db.image=1.0", "--param", "api.image=1.0", "--param", "web.image=1.0")
	if len(rel.Services) != 3 {
		t.Fatalf("release %+v", rel)
	}
	versions := map[string]string{}
	for _, m := range rel.Services {
		versions[m.Service] = m.Version
	}
	s.waitStatus("shop", "db", 90*time.Second, "db waiting for approval in prod", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "prod")
		return c != nil && c.Status == "WAITING_MANUAL_APPROVAL"
	})

	b.signIn(s.url, s.tokenOf("alice"))
	b.do("open the application", chromedp.Navigate(s.url+"/#/apps/shop"))
	b.waitFor("the release in flight", hasText(".release-line", "Release in flight: "+rel.ID)+
		` && document.querySelector('.release-line a[href="#/apps/shop/releases/`+rel.ID+`"]') !== null`)
	b.do("open the releases", chromedp.Click(chromedp.CSS(`.release-line a[href="#/apps/shop/releases"]`)))
	b.waitFor("the release in the list", hasText("table.releases td a", rel.ID)+` && `+hasText("table.releases td", "db ")+` && `+hasText("table.releases td", "dev"))
	b.shot("1-releases")
	b.axe("1-releases")
	b.do("open the release", chromedp.Click(chromedp.CSS(`table.releases a[href="#/apps/shop/releases/`+rel.ID+`"]`)))
	b.waitFor("the release's id", hasText("h1", rel.ID))
	for _, svc := range []string{"db", "api", "web"} {
		b.waitFor(svc+"'s row", hasText(".relgrid tbody th", svc))
	}
	for _, ch := range []string{"staging", "prod"} {
		b.waitFor(ch+"'s column", hasText(".relgrid thead th", ch))
	}
	cell := func(svc, ch string) string {
		return `.relgrid td[data-service=` + strconv.Quote(svc) + `][data-channel=` + strconv.Quote(ch) + `]`
	}
	b.waitFor("db needs approval in prod", hasText(cell("db", "prod")+" .badge", "Needs approval"))
	b.waitFor("staging converged", hasText(cell("web", "staging")+" .badge", "Converged"))
	b.waitFor("the order", hasText("ol.order li", "staging: db")+` && `+hasText("ol.order li", "prod: web"))
	b.waitFor("the history", hasText("ol.history li", "converged"))
	b.waitFor("prod's button", hasText(`.relgrid thead th[data-channel="prod"] button`, "Approve release in prod"))
	if has, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.querySelector('.relgrid thead th[data-channel="staging"] button') !== null`)); err != nil || has {
		t.Errorf("staging, converged, offers to approve (%v)", err)
	}
	b.shot("2-release-waiting")
	b.axe("2-release-waiting")
	b.click("Approve release in prod…")
	b.do("comment", chromedp.SendKeys(chromedp.CSS(`.relgrid thead th[data-channel="prod"] textarea`), "release train"))
	b.axe("3-approve-form")
	b.click("Approve release in prod")
	b.waitFor("the result per service", hasText(".results li", "db: approved")+` && `+hasText(".results li", "api: approved")+` && `+hasText(".results li", "web: approved"))
	for _, svc := range []string{"db", "api", "web"} {
		s.waitStatus("shop", svc, 90*time.Second, svc+" converged in prod", channelIs("prod", "CONVERGED", versions[svc]))
		if got := approvedBy(channel(t, s.status("shop", svc), "prod")); len(got) != 1 || got[0] != "alice" {
			t.Errorf("%s in prod approved by %v, want [alice]", svc, got)
		}
	}
	b.waitFor("the release succeeded on the page", hasText("main > div > p .badge", "Succeeded")+` && `+hasText(cell("web", "prod")+" .badge", "Converged"))
	b.shot("4-release-succeeded")
}
