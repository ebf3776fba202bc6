package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestWebNotifications: the notifications page shows a webhook whose
// deliveries went dead (its receiver is not there, one attempt each), with
// the dead count marked and each dead delivery's error; the filters pick
// dead deliveries of the target. A viewer of one application is told it
// may not read them, a viewer gets no retry button, and an admin of one
// application is refused with the server's words; once the webhook points
// at a receiver, "Retry dead" sends the deliveries again and the page
// shows them delivered, live, with the filters kept.
func TestWebNotifications(t *testing.T) {
	requireE2E(t)
	b := newBrowser(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t, "--notify-max-attempts", "1")
	s.ok("alice", "notifications", "add", "ci", "--url", "http://127.0.0.1:1/", "--secret-file", writeSecret(t))
	s.ok("alice", "apply", dir+"/...")
	s.push("alice", "shop", "web", "image=1.0")
	s.waitStatus("shop", "web", 60*time.Second, "prod waiting for approval", prodWaitsForApproval)
	dead := waitDeliveries(t, s, "ci", "dead", 2)
	token := func(name string, roles ...string) string {
		t.Helper()
		args := []string{"tokens", "create", name, "-o", "json"}
		for _, r := range roles {
			args = append(args, "--role", r)
		}
		var resp apiv1.CreateTokenResponse
		if err := json.Unmarshal([]byte(s.ok("alice", args...).stdout), &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Token
	}
	// Notifications are read with the read permission on every
	// application, retried with configure on every one.
	pat, vic, sam := token("pat", "viewer@shop"), token("vic", "viewer"), token("sam", "viewer", "admin@shop")

	b.signIn(s.url, pat)
	b.do("open the notifications", chromedp.Navigate(s.url+"/#/notifications"))
	b.waitFor("why pat may not read them", hasText("h1", "Notifications")+` && `+hasText(`main [role="alert"]`, `lacks permission "read" on every application`))
	b.click("Sign out")

	row := `document.querySelector('table.targets tr[data-target="ci"]')`
	deadRows := `[...document.querySelectorAll('table.deliveries tbody tr')].filter(r => r.dataset.state === 'dead')`
	b.signIn(s.url, vic)
	b.waitFor("the navigation's link", hasText("nav a", "Notifications"))
	b.do("open the notifications", chromedp.Navigate(s.url+"/#/notifications"))
	b.waitFor("ci's dead count, marked", row+` !== null && `+hasText(`table.targets tr[data-target="ci"] .badge.bad`, fmt.Sprintf("%d dead", len(dead))))
	b.waitFor("ci's URL and filter", hasText(`table.targets tr[data-target="ci"] td.mono`, "http://127.0.0.1:1/")+` && `+hasText(`table.targets tr[data-target="ci"] td`, "all"))
	b.waitFor("the dead deliveries with their error", deadRows+`.length >= 2 && `+deadRows+`.every(r => r.querySelector('.lasterror').textContent.includes('connection refused'))`)
	b.waitFor("a link to the service", hasText(`table.deliveries a[href="#/apps/shop/services/web"]`, "shop/web"))
	b.shot("1-dead-viewer")
	b.axe("1-dead-viewer")
	if text := b.pageText(); strings.Contains(text, "Retry") || strings.Contains(text, "undefined") || strings.Contains(text, "null") {
		t.Errorf("a viewer sees a retry button, or the page shows undefined or null:\n%s", text)
	}
	b.click("Sign out")

	// An admin of shop alone may not retry: the server says why.
	b.signIn(s.url, sam)
	b.do("open the notifications", chromedp.Navigate(s.url+"/#/notifications"))
	b.click("Retry dead of ci")
	b.waitFor("the refusal", hasText(`main [role="alert"]`, "Retry dead of ci refused:"))
	b.click("Sign out")

	// ci now points at a receiver; the admin filters to ci's dead
	// deliveries, by clicking its row, then retries them.
	h := newHookReceiver(t)
	h.addHook(s, "ci")
	b.signIn(s.url, s.tokenOf("alice"))
	b.do("open the notifications", chromedp.Navigate(s.url+"/#/notifications"))
	b.waitFor("ci's row", row+` !== null`)
	b.do("click ci's row", chromedp.Click(chromedp.CSS(`table.targets tr[data-target="ci"] td:nth-child(4)`)))
	b.waitFor("the target filter", `document.getElementById('delivery-target').value === 'ci' && `+row+`.querySelector('button.link').getAttribute('aria-pressed') === 'true'`)
	b.pickState("dead")
	b.waitFor("dead ones of ci", hasText("main p", fmt.Sprintf("%d dead deliveries of ci.", len(dead)))+` && `+deadRows+`.length === `+fmt.Sprint(len(dead)))
	b.waitFor("a retry button per dead delivery", `[...document.querySelectorAll('table.deliveries tbody button')].filter(b => b.textContent.startsWith('Retry delivery ')).length === `+fmt.Sprint(len(dead)))
	b.shot("2-dead-admin")
	b.axe("2-dead-admin")
	b.click("Retry dead of ci")
	b.waitFor("the retry's count", hasText(`main [role="status"]`, fmt.Sprintf("Retry dead of ci: %d deliveries pending again.", len(dead))))
	// Delivered to the receiver, live; the filters stay.
	b.waitFor("no dead delivery of ci left", hasText("main p", "No dead deliveries of ci.")+` && `+row+`.textContent.includes('0 dead')`)
	b.waitFor("the filters kept", `document.getElementById('delivery-state').value + '/' + document.getElementById('delivery-target').value === 'dead/ci'`)
	b.pickState("delivered")
	b.waitFor("the retried deliveries delivered", `[...document.querySelectorAll('table.deliveries tbody tr')].filter(r => r.dataset.state === 'delivered').length >= `+fmt.Sprint(len(dead)))
	b.shot("3-retried")
	b.axe("3-retried")
	ids := map[string]bool{}
	for _, d := range dead {
		ids[fmt.Sprint(d.EventSeq)] = true
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := 0
		for _, e := range h.events() {
			if ids[e.ID] {
				got++
			}
		}
		if got >= len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver got %d of the %d retried deliveries", got, len(ids))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitDeliveries waits until target has at least n deliveries in state,
// and returns them.
func waitDeliveries(t *testing.T, s *server, target, state string, n int) []apiv1.Delivery {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		var list apiv1.DeliveryList
		err := s.getJSON("/v1/notifications/deliveries?target="+target+"&state="+state, &list)
		if err == nil && len(list.Deliveries) >= n {
			return list.Deliveries
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %s deliveries (%v), want %d", target, len(list.Deliveries), state, err, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pickState chooses state in the deliveries' state filter.
func (b *browserTest) pickState(state string) {
	b.t.Helper()
	b.waitFor("the state filter", `document.getElementById('delivery-state') !== null`)
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(() => { const s = document.getElementById('delivery-state'); s.value = `+strconv.Quote(state)+`; s.dispatchEvent(new Event('change')); return true })()`)); err != nil {
		b.t.Fatalf("pick the state %s: %v", state, err)
	}
}
