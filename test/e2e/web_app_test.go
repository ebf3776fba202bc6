package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestWebUIApplication: the application page of db -> api -> web shows
// every service in every release channel, the chain that holds web (api,
// then db) in one line and highlighted, and approves every service
// waiting in prod with one button, an approval recorded per service.
func TestWebUIApplication(t *testing.T) {
	requireE2E(t)
	b := newBrowser(t)
	dir := orderedTree(t, "shop", "")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	// web and api first: they wait for db, which has no rollout yet, for
	// as long as the page takes to show it.
	webV, _ := s.push("dev", "shop", "web", "image=1.0")
	apiV, _ := s.push("dev", "shop", "api", "image=1.0")
	s.waitStatus("shop", "web", 30*time.Second, "web waiting for api", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "staging")
		return c != nil && c.Reason == "SERVICE_DEPENDENCY_UNMET" && strings.Contains(c.Message, "(db has no rollout there yet")
	})

	b.signIn(s.url, s.tokenOf("alice"))
	b.waitFor("the application's link", hasText("table a", "shop")+` && document.querySelector('a[href="#/apps/shop"]') !== null`)
	b.do("open the application", chromedp.Navigate(s.url+"/#/apps/shop"))
	b.waitFor("the grid", `document.querySelector('table.appgrid') !== null`)
	for _, svc := range []string{"db", "api", "web"} {
		b.waitFor(svc+"'s row", hasText(".appgrid tbody th", svc))
	}
	for _, ch := range []string{"staging", "prod"} {
		b.waitFor(ch+"'s column", hasText(".appgrid thead th", ch))
	}
	cell := func(svc, ch string) string {
		return `.appgrid td[data-service=` + strconv.Quote(svc) + `][data-channel=` + strconv.Quote(ch) + `]`
	}
	b.waitFor("the chain in one line", hasText(".chains li", "web in staging waits for api in staging, which waits for db in staging: "))
	b.waitFor("web and api on the blocking path", hasText(cell("web", "staging"), "blocking path")+` && `+hasText(cell("api", "staging"), "blocking path"))
	b.waitFor("web's wait in its cell, in full in its title", `(() => { const w = document.querySelector(`+strconv.Quote(cell("web", "staging")+" .why")+`); return w !== null && w.title.includes('waiting for api in staging') })()`)
	b.waitFor("the graph of staging", `document.querySelector('.appgraph svg[aria-label*="web waits for api"]') !== null`)
	b.shot("1-app-waiting")
	b.axe("1-app-waiting")

	dbV, _ := s.push("dev", "shop", "db", "image=1.0")
	for svc, v := range map[string]string{"db": dbV, "api": apiV, "web": webV} {
		s.waitStatus("shop", svc, 60*time.Second, svc+" converged in staging", channelIs("staging", "CONVERGED", v))
	}
	// Live: staging converges on the page without a reload, and prod asks
	// for its approvals.
	b.waitFor("staging converged on the page", hasText(cell("web", "staging")+" .badge", "Converged")+` && `+hasText(cell("db", "staging")+" .badge", "Converged"))
	b.waitFor("prod's chain in one line", hasText(".chains li", "web in prod waits for api in prod, which waits for db in prod: waiting for approval"))
	b.waitFor("prod's button", `document.querySelector('.appgrid thead th[data-channel="prod"] button') !== null`)
	if has, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.querySelector('.appgrid thead th[data-channel="staging"] button') !== null`)); err != nil || has {
		t.Errorf("staging, converged, offers to approve (%v)", err)
	}
	b.shot("2-app-prod-waiting")
	b.do("click prod's Approve every waiting channel", chromedp.Click(chromedp.CSS(`.appgrid thead th[data-channel="prod"] button`)))
	b.do("comment", chromedp.SendKeys(chromedp.CSS(`.appgrid thead th[data-channel="prod"] textarea`), "release train"))
	b.axe("3-approve-all-form")
	b.click("Approve api, db, web in prod")
	b.waitFor("the result per service", hasText(".results li", "db: approved")+` && `+hasText(".results li", "api: approved")+` && `+hasText(".results li", "web: approved"))
	for svc, v := range map[string]string{"db": dbV, "api": apiV, "web": webV} {
		s.waitStatus("shop", svc, 90*time.Second, svc+" converged in prod", channelIs("prod", "CONVERGED", v))
		if got := approvedBy(channel(t, s.status("shop", svc), "prod")); len(got) != 1 || got[0] != "alice" {
			t.Errorf("%s in prod approved by %v, want [alice]", svc, got)
		}
	}
	b.waitFor("prod converged on the page", hasText(cell("web", "prod")+" .badge", "Converged")+` && `+hasText(cell("db", "prod")+" .badge", "Converged"))
	b.shot("4-app-converged")
}
