package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/oidctest"
)

// browserTest drives a real Chromium (Debian's chromium, headless) with
// chromedp. CI installs it; elsewhere the test is skipped when it is
// missing, unless DROVER_REQUIRE_BROWSER=1 says it must run.
type browserTest struct {
	t   *testing.T
	ctx context.Context
	dir string // where screenshots go
}

func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *browserTest {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("DROVER_REQUIRE_BROWSER") != "" {
			t.Fatalf("chromium is required (DROVER_REQUIRE_BROWSER) but not found: %v", err)
		}
		t.Skip("chromium not installed (apt-get install chromium)")
	}
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(profile), chromedp.Env("TMPDIR="+profile),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900))
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first call on ctx starts the browser, which lives as long as
	// ctx: not a timeout's context derived from it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	dir := os.Getenv("DROVER_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(repoRoot, ".artifacts")
	}
	dir = filepath.Join(dir, "web", t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browserTest{t: t, ctx: ctx, dir: dir}
}

func (b *browserTest) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v\npage text:\n%s", what, err, b.pageText())
	}
}

// waitFor waits until the page's JavaScript expression is true.
func (b *browserTest) waitFor(what, expr string) {
	b.t.Helper()
	b.do("wait for "+what, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(45*time.Second)))
}

// waitAcrossNavigations is waitFor for a page that navigates meanwhile
// (redirects): it evaluates expr again until it is true, taking an error
// (the page changing under the evaluation) as "not yet".
func (b *browserTest) waitAcrossNavigations(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
			b.t.Fatalf("wait for %s: not true within 45s (last error %v)\npage text:\n%s", what, err, b.pageText())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hasText is an expression: some element matching css contains text.
func hasText(css, text string) string {
	return `[...document.querySelectorAll(` + strconv.Quote(css) + `)].some(e => e.textContent.includes(` + strconv.Quote(text) + `))`
}

// click clicks the button whose text is label.
func (b *browserTest) click(label string) {
	b.t.Helper()
	b.waitFor("button "+label, hasText("button", label))
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const b = [...document.querySelectorAll('button')].find(b => b.textContent === `+strconv.Quote(label)+`); if (!b) return false; b.click(); return true })()`))
	if err != nil || !ok {
		b.t.Fatalf("click %q: %v (found %v)\n%s", label, err, ok, b.pageText())
	}
}

// open opens the <details> in the element css whose summary is summary.
func (b *browserTest) open(css, summary string) {
	b.t.Helper()
	b.waitFor("details "+summary, hasText(css+" summary", summary))
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = [...document.querySelectorAll(`+strconv.Quote(css+" summary")+`)].find(s => s.textContent === `+strconv.Quote(summary)+`); if (!s) return false; if (!s.parentElement.open) s.click(); return true })()`))
	if err != nil || !ok {
		b.t.Fatalf("open %q in %s: %v (found %v)\n%s", summary, css, err, ok, b.pageText())
	}
}

func (b *browserTest) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	return s
}

// shot saves a screenshot of the whole page as NAME.png.
func (b *browserTest) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

// axe runs axe-core's accessibility rules on the page (DROVER_AXE_JS
// names its script: hack/install-axe.sh) and fails the test on a serious
// or critical violation.
func (b *browserTest) axe(page string) {
	b.t.Helper()
	path := os.Getenv("DROVER_AXE_JS")
	if path == "" {
		if os.Getenv("DROVER_REQUIRE_BROWSER") != "" {
			b.t.Fatal("DROVER_AXE_JS is not set: run hack/install-axe.sh DIR and export the path it prints")
		}
		b.t.Logf("accessibility of %s not checked: DROVER_AXE_JS is not set (hack/install-axe.sh)", page)
		return
	}
	src, err := os.ReadFile(path)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](string(src)+";true")); err != nil {
		b.t.Fatalf("load axe-core: %v", err)
	}
	type violation struct {
		ID, Impact, Help string
		Nodes            []struct{ Target []any }
	}
	found, err := chromedp.Run(ctx, chromedp.Evaluate[[]violation](
		`axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => ({target: n.target}))})))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("run axe-core on %s: %v", page, err)
	}
	for _, v := range found {
		msg := fmt.Sprintf("%s: accessibility %s (%s): %s at %v", page, v.ID, v.Impact, v.Help, v.Nodes)
		if v.Impact == "serious" || v.Impact == "critical" {
			b.t.Error(msg)
		} else {
			b.t.Log(msg)
		}
	}
}

// signIn signs the browser in with an API token at the sign-in page.
func (b *browserTest) signIn(url, token string) {
	b.t.Helper()
	b.do("open the sign-in page", chromedp.Navigate(url+"/#/signin"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token))
	b.click("Sign in with a token")
	b.waitFor("the services page", `document.querySelector('#search') !== null`)
}

// TestWebUI: a person follows and drives a release from the browser. A
// viewer sees the service's pipeline, staging converged and prod waiting
// for an approval, without an approve button; an approver approves prod
// with a comment and watches it converge with no reload; a deployer pushes
// a new image from the form built from the service's parameters; a failing
// version's reason and rollback show. Screenshots of each page go to
// .artifacts/web/.
func TestWebUI(t *testing.T) {
	requireE2E(t)
	b := newBrowser(t)
	dir := twoChannelTree(t, "shop", "1s")
	// Plain HTTP on loopback: the browser takes the page as a secure
	// context and the session cookie without Secure (see secureCookie).
	s := newServer(t)
	admin := s.tokenOf("web-admin")
	run := func(token string, args ...string) result {
		t.Helper()
		r := runDrover(t, append(args, "--server", s.url, "--token", token)...)
		if r.code != 0 {
			t.Fatalf("unexpected failure: %s", r)
		}
		return r
	}
	token := func(name, role string) string {
		t.Helper()
		var resp apiv1.CreateTokenResponse
		if err := json.Unmarshal([]byte(run(admin, "tokens", "create", name, "--role", role, "-o", "json").stdout), &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Token
	}
	vic, ann, dan := token("vic", "viewer@shop"), token("ann", "approver@shop"), token("dan", "deployer@shop")
	run(admin, "apply", dir+"/...")
	run(dan, "push", "web", "--app", "shop", "--param", "image=1.0")
	s.waitStatus("shop", "web", 60*time.Second, "prod waiting for approval", prodWaitsForApproval)

	b.do("open the sign-in page", chromedp.Navigate(s.url+"/#/signin"), chromedp.WaitVisible(chromedp.ID("token")))
	b.shot("0-sign-in")
	b.axe("0-sign-in")
	b.signIn(s.url, vic)
	b.waitFor("shop/web in the list", hasText("table a", "shop/web"))
	b.shot("1-services-viewer")
	b.axe("1-services-viewer")
	b.do("open the service", chromedp.Navigate(s.url+"/#/apps/shop/services/web"))
	b.waitFor("the pipeline", `document.querySelector('.pipeline svg') !== null`)
	b.waitFor("staging converged", hasText("#ch-staging .badge", "Converged"))
	b.waitFor("prod waiting for approval", hasText("#ch-prod", "waiting for 1 more approval"))
	b.shot("2-service-viewer")
	b.axe("2-service-viewer")
	if strings.Contains(b.pageText(), "Approve prod") {
		t.Errorf("a viewer sees the approve button:\n%s", b.pageText())
	}
	b.click("Sign out")
	b.waitFor("the sign-in page", `document.querySelector('#token') !== null`)

	b.signIn(s.url, ann)
	b.do("open the service", chromedp.Navigate(s.url+"/#/apps/shop/services/web"))
	b.click("Approve prod…")
	b.do("comment", chromedp.SendKeys(chromedp.CSS("#ch-prod textarea"), "looks good"))
	b.shot("3-approve-form")
	b.axe("3-approve-form")
	b.click("Approve prod")
	b.waitFor("prod converged, live", hasText("#ch-prod .badge", "Converged"))
	b.shot("4-prod-converged")
	st := s.status("shop", "web")
	if got := approvedBy(channel(t, st, "prod")); len(got) != 1 || got[0] != "ann" {
		t.Errorf("prod approved by %v, want [ann]", got)
	}
	b.click("Sign out")

	b.signIn(s.url, dan)
	b.do("open the service", chromedp.Navigate(s.url+"/#/apps/shop/services/web"))
	b.click("Push a new version…")
	b.do("fill the image", chromedp.WaitVisible(chromedp.ID("p-image")), chromedp.SetValue(chromedp.ID("p-image"), "2.0"))
	b.shot("5-push-form")
	b.axe("5-push-form")
	b.click("Push web")
	b.waitFor("staging rolls 2.0 out", hasText("#ch-staging .badge", "Converged")+` && `+hasText("#ch-prod", "waiting for 1 more approval"))
	b.shot("6-pushed")
	// Before approving: what prod would get, as a diff; and what a channel
	// was compiled to.
	b.open("#ch-prod", "What approving prod rolls out")
	b.waitFor("the diff", hasText("#ch-prod pre.diff .add", "2.0")+` && `+hasText("#ch-prod pre.diff .del", "1.0")+` && `+hasText("#ch-prod .preview", "Deployment")+` && `+hasText("#ch-prod .preview li", "image: 1.0 → 2.0"))
	b.open("#ch-staging", "Compiled config")
	b.waitFor("staging's compiled Deployment", hasText("#ch-staging .object pre", "kind: Deployment")+` && `+hasText("#ch-staging .object pre", "replicas: 1"))
	b.shot("6a-preview-compiled")
	b.axe("6a-preview-compiled")
	if st := s.status("shop", "web"); channel(t, st, "staging").Version == "" || st.DesiredVersion == "" {
		t.Errorf("after the push from the form: %s", dump(st))
	}
	// Pause and resume staging, then roll it back to 1.0, from the page.
	b.click("Pause staging")
	b.waitFor("staging paused", hasText("#ch-staging", "paused")+` && `+hasText("button", "Resume staging"))
	b.click("Resume staging")
	b.waitFor("staging resumed", hasText("button", "Pause staging"))
	b.click("Roll back staging…")
	b.shot("6b-rollback-form")
	b.click("Roll back staging")
	b.waitFor("the rollback recorded", hasText("#ch-staging", "rolled back")+` || `+hasText("td", "rollback"))
	types := map[string]bool{}
	for _, e := range s.events("shop", "web") {
		if e.ReleaseChannel == "staging" && e.Actor == "dan" {
			types[e.Type] = true
		}
	}
	if !types["paused"] || !types["resumed"] || len(types) < 3 {
		t.Errorf("dan's pause, resume and rollback of staging are not all in the events: %v", types)
	}
	b.do("open the runtimes", chromedp.Navigate(s.url+"/#/runtimes"))
	b.waitFor("the runtimes table", hasText("td", "staging"))
	b.shot("7-runtimes")
	b.axe("7-runtimes")

	// On a phone's screen: the same page, its actions within reach.
	b.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)),
		chromedp.Navigate(s.url+"/#/apps/shop/services/web"))
	b.waitFor("the pipeline", `document.querySelector('.pipeline svg') !== null && `+hasText("button", "Push a new version…"))
	b.shot("8-service-phone")
	b.axe("8-service-phone")
	if wide, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`)); err != nil || wide {
		t.Errorf("the service page scrolls sideways on a phone (%v)", err)
	}
}

// TestWebUIFailure: a version that fails is pushed from the browser; the
// page shows, live, the failure's reason and the automatic rollback, in
// the channel's card and in the list.
func TestWebUIFailure(t *testing.T) {
	requireE2E(t)
	b := newBrowser(t)
	dir := oneChannelTree(t, "solo", "1s")
	s := newServer(t, "--poll-interval", "100ms")
	s.ok("alice", "apply", dir+"/...")
	s.push("alice", "solo", "web", "image=1.0")
	s.waitStatus("solo", "web", 60*time.Second, "v1 converged", func(st *apiv1.ServiceStatus) bool { return st.Status == "CONVERGED" })
	breakVersion(t, s, dir, compiledVersion(t, dir, "solo", "web", "image=2.0"))

	b.signIn(s.url, s.tokenOf("alice"))
	b.do("open the service", chromedp.Navigate(s.url+"/#/apps/solo/services/web"))
	b.click("Push a new version…")
	b.do("fill the image", chromedp.WaitVisible(chromedp.ID("p-image")), chromedp.SetValue(chromedp.ID("p-image"), "2.0"))
	b.click("Push web")
	b.waitFor("the rollback, live", hasText("#ch-staging .badge", "Rolled back")+` && `+hasText("#ch-staging .reason", "simulated failure"))
	b.shot("1-rolled-back")
	b.axe("1-rolled-back")
	if text := b.pageText(); !strings.Contains(text, "rolled back from") {
		t.Errorf("the page does not say what was rolled back:\n%s", text)
	}
	b.do("open the list", chromedp.Navigate(s.url+"/#/"))
	b.waitFor("solo/web rolled back in the list", hasText("tr", "solo/web")+` && `+hasText("td .badge", "Rolled back"))
	b.shot("2-list-rolled-back")
}

// TestWebUIRunsAndBypass: a protection's command keeps prod blocked; the
// page shows why and the command's runs with their output; an admin
// bypasses the protection from the page, with a comment, and prod rolls
// out.
func TestWebUIRunsAndBypass(t *testing.T) {
	requireE2E(t)
	b := newBrowser(t)
	s := newServer(t)
	const app = "migrating"
	tree, _ := migrationTree(t, app)
	s.ok("alice", "apply", tree+"/...")
	s.push("alice", app, "api")
	s.waitStatus(app, "api", 60*time.Second, "prod blocked by its protection", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "prod")
		return c != nil && c.Status == "BLOCKED"
	})

	b.signIn(s.url, s.tokenOf("alice"))
	b.do("open the service", chromedp.Navigate(s.url+"/#/apps/"+app+"/services/api"))
	b.waitFor("prod blocked, with the check's words", hasText("#ch-prod .badge", "Blocked")+` && `+hasText("#ch-prod", "migrations pending on orders"))
	b.waitFor("the runs", hasText("h2", "Runs")+` && document.querySelector('.runs details') !== null`)
	b.waitFor("a run of the check", hasText(".runs summary", "check in prod"))
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(() => { [...document.querySelectorAll('.runs details summary')].find(s => s.textContent.includes('check in prod')).click(); return true })()`)); err != nil {
		t.Fatalf("open the newest run of the check: %v", err)
	}
	b.waitFor("its output", hasText(".runs pre", "migrations pending on orders"))
	if text := b.pageText(); strings.Contains(text, "null") || strings.Contains(text, "undefined") {
		t.Errorf("the page shows null or undefined:\n%s", text)
	}
	b.shot("1-blocked-runs")
	b.axe("1-blocked-runs")
	b.click("Bypass db-migrations…")
	b.do("say why", chromedp.SendKeys(chromedp.CSS("#ch-prod textarea"), "migrated by hand"))
	b.click("Bypass db-migrations in prod")
	b.waitFor("prod rolled out", hasText("#ch-prod .badge", "Converged"))
	b.shot("2-bypassed")
	evs := s.events(app, "api")
	found := false
	for _, e := range evs {
		if e.Type == "bypassed" && strings.Contains(e.Message, "migrated by hand") {
			found = true
		}
	}
	if !found {
		t.Errorf("no bypassed event with the comment: %s", dump(eventKeys(evs)))
	}
}

// TestWebUIWaits: the page says in plain words why a channel waits — a
// deploy window that opens later, a runtime whose agent went away — and
// offers the approval that drift waits for before it is healed
// (everyAction), given from the page.
func TestWebUIWaits(t *testing.T) {
	requireE2E(t)
	b := newBrowser(t)
	s := newServer(t, "--agent-listen", freeAddr(t), "--poll-interval", "100ms")

	// A deploy window two days away holds staging.
	const windowed = "windowed"
	dir := twoChannelTree(t, windowed, "1s")
	p := filepath.Join(dir, "app.pvn.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().UTC().AddDate(0, 0, 2).Weekday().String()[:3]
	text := strings.Replace(string(data), "        - runtime: staging\n", "        - runtime: staging\n      deployWindows:\n        - {days: "+strings.ToLower(later)+", hours: 9-17, tz: UTC}\n", 1)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s.ok("alice", "apply", dir+"/...")
	s.push("alice", windowed, "web", "image=1.0")
	s.waitStatus(windowed, "web", 30*time.Second, "staging blocked outside its deploy window", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "staging").Status == "BLOCKED"
	})
	b.signIn(s.url, s.tokenOf("alice"))
	b.do("open the windowed service", chromedp.Navigate(s.url+"/#/apps/"+windowed+"/services/web"))
	b.waitFor("the window's words", hasText("#ch-staging .reason", "outside the deploy window until "+later)+` && `+hasText("#ch-staging .reason", "09:00"))
	b.waitFor("prod's wait, in brief", hasText("#ch-prod .reason", "waiting for staging to run")+` && `+
		hasText("#ch-prod .reason", "(staging is blocked: outside the deploy window until "+later)+` && `+hasText("#ch-prod .reason", "then for an approval"))
	b.shot("1-deploy-window")
	b.axe("1-deploy-window")

	// A service on a runtime whose commands run through an agent; the
	// agent stops.
	hostsLink, hostsTok := link(t, s, "hosts")
	hosts := startAgent(t, "hosts", agentArgs(hostsLink, hostsTok, "--mode", "commands")...)
	waitAgent(t, s, "hosts", "connected")
	s.ok("alice", "apply", opsTree(t, "api")+"/...")
	v, _ := s.push("alice", "ops", "api")
	s.waitStatus("ops", "api", 60*time.Second, "ops/api converged through the agent", converged(v))
	b.do("open the agent's service", chromedp.Navigate(s.url+"/#/apps/ops/services/api"))
	b.waitFor("prod converged", hasText("#ch-prod .badge", "Converged"))
	hosts.stop()
	b.waitFor("the agent's absence, without a reload", hasText("#ch-prod .reason", "runtime hosts disconnected"))
	b.shot("2-agent-disconnected")
	b.do("open the runtimes", chromedp.Navigate(s.url+"/#/runtimes"))
	b.waitFor("cmds through hosts", hasText("td", "through hosts")+` && `+hasText("td", "agent disconnected"))

	// Drift on an everyAction channel waits for an approval of its apply.
	tmp := t.TempDir()
	const app, svc = "guarded", "site"
	channel := crWith(crChannel("live", "shell"), "preconditions", []crObj{{"manualApproval": crObj{"everyAction": true}}})
	cfg := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": crRuntime("shell", []string{"stateDir"}, crObj{
			"apply": crProgram(crApplyScript, map[string]string{"STATE_DIR": "{{.Params.stateDir}}"}),
			"fetch": crFetch("1s"),
		}),
		"app":     crApp(app, channel),
		"service": crService(app, svc, "stateDir", tmp+"/state"),
	})
	s.ok("alice", "apply", cfg+"/...")
	version, _ := s.push("alice", app, svc)
	b.do("open the guarded service", chromedp.Navigate(s.url+"/#/apps/"+app+"/services/"+svc))
	b.click("Approve live…")
	b.click("Approve live")
	b.waitFor("live converged", hasText("#ch-live .badge", "Converged"))
	versionFile := tmp + "/state/version"
	if err := os.WriteFile(versionFile, []byte("tampered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the drift's approval", hasText("#ch-live .reason", "waiting for 1 more approval (apply after drift)"))
	b.shot("3-drift-approval")
	b.axe("3-drift-approval")
	b.click("Approve live…")
	b.do("say why", chromedp.SendKeys(chromedp.CSS("#ch-live textarea"), "tampered by a test"))
	b.click("Approve live")
	b.waitFor("live healed", hasText("#ch-live .badge", "Converged"))
	if got := strings.TrimSpace(crReadFile(t, versionFile)); got != version {
		t.Errorf("version file after the approved heal: %q, want %q", got, version)
	}
}

// TestWebUIOIDC: a person signs in to the web UI through the server's
// OpenID provider — the authorization code flow in a real browser, over
// TLS — gets the role their group maps to, approves prod from the page,
// and signs out.
func TestWebUIOIDC(t *testing.T) {
	requireE2E(t)
	// The server's certificate is self-signed: the browser is told to
	// accept it (the page is still a secure context, so the __Host-
	// cookie is set).
	b := newBrowser(t, chromedp.Flag("ignore-certificate-errors", true))
	addr := freeAddr(t)
	op := oidctest.Start(t, []oidctest.Person{
		{Name: "ann", Password: "ann-secret-pw", Email: "ann@example.com", Groups: []string{"release-managers"}},
	}, "https://"+addr+"/v1/auth/callback")
	files := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const admin = "drover_e2e-web-oidc-first-admin-token-01"
	s := newServerAt(t, addr, "--tls", "--admin-token-file", write("admin", admin),
		"--oidc-issuer", op.Issuer,
		"--oidc-client-id", oidctest.WebClientID, "--oidc-client-secret-file", write("web-secret", oidctest.WebClientSecret),
		"--oidc-scopes", "openid,profile,email,groups", "--oidc-group", "release-managers=approver@shop")
	pin := "sha256:" + s.fingerprint()
	for _, args := range [][]string{{"apply", twoChannelTree(t, "shop", "1s") + "/..."}, {"push", "web", "--app", "shop", "--param", "image=1.0"}} {
		if r := runDrover(t, append(args, "--server", s.url, "--token", admin, "--tls-fingerprint", pin)...); r.code != 0 {
			t.Fatalf("unexpected failure: %s", r)
		}
	}
	s.waitStatus("shop", "web", 60*time.Second, "prod waiting for approval", prodWaitsForApproval)

	b.do("open the sign-in page", chromedp.Navigate(s.url+"/#/signin"))
	b.waitFor("the provider's link", hasText("a", "Sign in with your identity provider"))
	b.do("follow it", chromedp.Click(chromedp.CSS("a.button")))
	b.waitAcrossNavigations("the provider's login page", `document.querySelector('#username') !== null`)
	b.do("sign in at the provider", chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "ann"), chromedp.SendKeys(chromedp.ID("password"), "ann-secret-pw"),
		chromedp.Submit(chromedp.ID("password")))
	// The form's submit goes through the provider's redirects and drover's
	// callback: a poll across those navigations fails, so each try is a
	// fresh evaluation.
	b.waitAcrossNavigations("back in drover, signed in as ann", hasText(".who", "ann@example.com (approver@shop)"))
	b.do("open the service", chromedp.Navigate(s.url+"/#/apps/shop/services/web"))
	b.click("Approve prod…")
	b.click("Approve prod")
	b.waitFor("prod converged", hasText("#ch-prod .badge", "Converged"))
	b.shot("1-approved-by-oidc")
	if got := approvedBy(channel(t, s.status("shop", "web"), "prod")); len(got) != 1 || got[0] != "ann@example.com" {
		t.Errorf("prod approved by %v, want [ann@example.com]", got)
	}
	if strings.Contains(b.pageText(), "Push a new version") {
		t.Errorf("an approver sees the push button:\n%s", b.pageText())
	}
	b.click("Sign out")
	b.waitFor("the sign-in page", `document.querySelector('#token') !== null`)
	if code, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`fetch('/v1/whoami').then(r => r.status)`, chromedp.EvalAwaitPromise)); err != nil || code != 401 {
		t.Errorf("whoami after signing out: %d (%v), want 401", code, err)
	}
}
