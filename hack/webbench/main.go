// Command webbench times the web UI's services page in a real headless
// Chromium against a running server: from navigation to the first status
// row, to the whole list counted, and one search keystroke to its
// filtered rows. Fill a server first, e.g.:
//
//	drover bench --services 10000 --channels 3 --data /tmp/b10k
//	drover server --data /tmp/b10k --listen 127.0.0.1:7499 &
//	go run ./hack/webbench --url http://127.0.0.1:7499 --token "$(cat /tmp/b10k/token)"
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:7420", "the server")
	token := flag.String("token", "", "an API token or the local token (read access)")
	runs := flag.Int("runs", 5, "page loads to time")
	flag.Parse()
	if err := run(*url, *token, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "webbench:", err)
		os.Exit(1)
	}
}

type result struct {
	Services        int       `json:"services"`
	FirstRowMs      []float64 `json:"firstRowMs"`
	CountedMs       []float64 `json:"countedMs"`
	SearchMs        []float64 `json:"searchMs"`
	ServicesJSONKiB float64   `json:"summaryJsonKiB"`
}

func run(url, token string, runs int) error {
	profile, err := os.MkdirTemp("", "webbench")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(profile) }()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(profile), chromedp.Env("TMPDIR="+profile), chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/#/signin"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Poll[chromedp.Void](`(() => { const b = [...document.querySelectorAll('button')].find(b => b.textContent === 'Sign in with a token'); if (b) b.click(); return !!b })()`),
		chromedp.WaitVisible(chromedp.ID("search"))); err != nil {
		return fmt.Errorf("sign in: %w", err)
	}
	var res result
	for range runs {
		// A fresh load of the page: the script, the sign-in check, the list.
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
			return err
		}
		began := time.Now()
		if err := chromedp.Do(ctx, chromedp.Navigate(url+"/#/"),
			chromedp.Poll[chromedp.Void](`document.querySelector('table.list tbody tr') !== null`, chromedp.WithPollingInterval(5*time.Millisecond))); err != nil {
			return err
		}
		first := time.Since(began)
		n, err := chromedp.Run(ctx, chromedp.Poll[int](`(() => { const m = /of (\d+)\)|of (\d+) services/.exec(document.body.innerText); return m && Number(m[1] || m[2]) })()`,
			chromedp.WithPollingInterval(5*time.Millisecond)))
		if err != nil {
			return err
		}
		counted := time.Since(began)
		res.Services = n
		res.FirstRowMs = append(res.FirstRowMs, ms(first))
		res.CountedMs = append(res.CountedMs, ms(counted))
		// One keystroke's filter over every service (past the 80 ms
		// debounce), timed in the page.
		d, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`new Promise((done) => {
			const input = document.getElementById('search');
			const t0 = performance.now();
			input.value = 'svc-99';
			input.dispatchEvent(new Event('input'));
			const check = () => /matching|services\./.test(document.querySelector('p.muted').textContent) && document.querySelectorAll('table.list tbody tr').length <= 200
				? done(performance.now() - t0 - 80) : requestAnimationFrame(check);
			setTimeout(check, 81);
		})`, chromedp.EvalAwaitPromise))
		if err != nil {
			return err
		}
		res.SearchMs = append(res.SearchMs, d)
	}
	size, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`fetch('/v1/services:summary').then(r => r.text()).then(t => t.length / 1024)`, chromedp.EvalAwaitPromise))
	if err != nil {
		return err
	}
	res.ServicesJSONKiB = size
	out, _ := json.MarshalIndent(res, "", "  ")
	_, err = os.Stdout.Write(append(out, '\n'))
	return err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
