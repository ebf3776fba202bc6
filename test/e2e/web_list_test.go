package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestWebUIServicesList: the services list sorts by a column's header
// (aria-sort says how), filters by application, service or status, and
// shows a service pushed meanwhile without a reload, keeping the filter
// and the order.
func TestWebUIServicesList(t *testing.T) {
	requireE2E(t)
	b := newBrowser(t)
	dir := orderedTree(t, "shop", "")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	s.push("dev", "shop", "db", "image=1.0")
	s.push("dev", "shop", "api", "image=1.0")
	s.waitStatus("shop", "db", 30*time.Second, "db converged in staging", channelIs("staging", "CONVERGED", s.status("shop", "db").DesiredVersion))

	b.signIn(s.url, s.tokenOf("alice"))
	order := `[...document.querySelectorAll('table.list tbody tr')].map(r => r.dataset.service).join(',')`
	b.waitFor("both services, by name", order+` === 'shop/api,shop/db'`)
	b.waitFor("sorted by service", `document.querySelector('th[data-sort="service"]').getAttribute('aria-sort') === 'ascending'`)
	b.axe("1-list")
	b.do("sort by service, descending", chromedp.Click(chromedp.CSS(`th[data-sort="service"] button`)))
	b.waitFor("descending", order+` === 'shop/db,shop/api' && document.querySelector('th[data-sort="service"]').getAttribute('aria-sort') === 'descending'`)
	b.do("sort by status", chromedp.Click(chromedp.CSS(`th[data-sort="status"] button`)))
	b.waitFor("sorted by status", `document.querySelector('th[data-sort="status"]').getAttribute('aria-sort') === 'ascending' && document.querySelector('th[data-sort="service"]').getAttribute('aria-sort') === 'none'`)
	b.do("sort by application, descending", chromedp.Click(chromedp.CSS(`th[data-sort="application"] button`)), chromedp.Click(chromedp.CSS(`th[data-sort="application"] button`)))
	b.waitFor("by application, descending", order+` === 'shop/db,shop/api'`)
	b.do("filter", chromedp.SendKeys(chromedp.ID("search"), "shop/"))
	b.waitFor("the filter keeps both", order+` === 'shop/db,shop/api'`)
	b.do("narrow the filter", chromedp.SendKeys(chromedp.ID("search"), "d"))
	b.waitFor("only db", order+` === 'shop/db'`+` && `+hasText("main p", "1 of 2 services."))
	b.shot("1-filtered")

	// Live: web pushed now appears, in the order and filter chosen.
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(() => { const i = document.getElementById('search'); i.value = ''; i.dispatchEvent(new Event('input')); return true })()`)); err != nil {
		t.Fatalf("clear the filter: %v", err)
	}
	b.do("filter by application", chromedp.SendKeys(chromedp.ID("search"), "shop"))
	b.waitFor("both again", order+` === 'shop/db,shop/api'`)
	s.push("dev", "shop", "web", "image=1.0")
	b.waitFor("web without a reload", order+` === 'shop/web,shop/db,shop/api'`)
	b.shot("2-live")
}

// TestWebUIServicesPages: 205 services are two pages of the list, 200 and
// 5, with next and previous; the filter pages what it matches.
func TestWebUIServicesPages(t *testing.T) {
	requireE2E(t)
	b := newBrowser(t)
	const n = 205
	dir := releaseChainTree(t, "chain", n, "1h")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	args := make([]string, 0, 2*n)
	for i := range n {
		args = append(args, "--param", fmt.Sprintf("svc-%03d.image=1.0", i))
	}
	s.release("dev", "chain", args...)

	b.signIn(s.url, s.tokenOf("alice"))
	rows := `document.querySelectorAll('table.list tbody tr').length`
	first := `document.querySelector('table.list tbody tr').dataset.service`
	b.waitFor("the first page", rows+` === 200 && `+hasText("main p", "Showing 1–200 of 205 services, page 1 of 2."))
	b.waitFor("previous disabled", `[...document.querySelectorAll('.pager button')].find(b => b.textContent.includes('Previous')).disabled`)
	b.click("Next page →")
	b.waitFor("the second page", rows+` === 5 && `+first+` === 'chain/svc-200' && `+hasText("main p", "Showing 201–205 of 205 services, page 2 of 2."))
	b.axe("1-second-page")
	b.click("← Previous page")
	b.waitFor("the first page again", rows+` === 200 && `+first+` === 'chain/svc-000'`)
	b.do("filter", chromedp.SendKeys(chromedp.ID("search"), "svc-20"))
	b.waitFor("one page of what matches", rows+` === 5 && document.querySelector('.pager').hidden && `+hasText("main p", "5 of 205 services."))
	b.shot("1-pages-filtered")
}
