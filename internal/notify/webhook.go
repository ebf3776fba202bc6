package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/store"
)

// Webhook headers.
const (
	// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the
	// body keyed with the target's secret.
	SignatureHeader = "X-Drover-Signature"
	// DeliveryHeader carries the outbox row's id, AttemptHeader the
	// attempt (from 1).
	DeliveryHeader = "X-Drover-Delivery"
	AttemptHeader  = "X-Drover-Attempt"
)

// WebhookSpec is the Spec of a webhook target.
type WebhookSpec struct {
	URL string `json:"url"`
	// Secret keys the signature (sealed at rest with the spec).
	Secret string `json:"secret"`
}

// MinSecret is the shortest webhook secret accepted.
const MinSecret = 16

// CheckWebhook says what is wrong with spec, or nil.
func CheckWebhook(spec WebhookSpec) error {
	u, err := url.Parse(spec.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("url: give an http:// or https:// URL with a host")
	}
	if u.User != nil {
		return errors.New("url: credentials in the URL are refused (the secret signs the body)")
	}
	if len(spec.Secret) < MinSecret {
		return fmt.Errorf("secret: at least %d bytes", MinSecret)
	}
	if strings.TrimSpace(spec.Secret) != spec.Secret {
		return errors.New("secret: has leading or trailing white space")
	}
	return nil
}

// Sign is the SignatureHeader value of body keyed with secret.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether sig is body's signature with secret (for
// receivers and tests).
func Verify(secret string, body []byte, sig string) bool {
	return hmac.Equal([]byte(sig), []byte(Sign(secret, body)))
}

// Webhook posts notifications as CloudEvents in structured mode
// (application/cloudevents+json), signed.
type Webhook struct {
	Client *http.Client
	// Source is the base of the events' source (the web UI's address).
	Source    string
	UserAgent string
}

// Send implements Sender.
func (w *Webhook) Send(ctx context.Context, t store.NotifyTarget, n Notification) error {
	var spec WebhookSpec
	if err := json.Unmarshal(t.Spec, &spec); err != nil {
		return &PermanentError{fmt.Errorf("webhook %s: settings: %w", t.Name, err)}
	}
	ce, err := CloudEvent(n, w.Source)
	if err != nil {
		return &PermanentError{err}
	}
	body, err := json.Marshal(ce)
	if err != nil {
		return &PermanentError{err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, spec.URL, bytes.NewReader(body))
	if err != nil {
		return &PermanentError{fmt.Errorf("webhook %s: %s", t.Name, redactURL(err))}
	}
	req.Header.Set("Content-Type", "application/cloudevents+json; charset=utf-8")
	req.Header.Set(SignatureHeader, Sign(spec.Secret, body))
	req.Header.Set(DeliveryHeader, strconv.FormatInt(n.Delivery, 10))
	req.Header.Set(AttemptHeader, strconv.Itoa(n.Attempt))
	if w.UserAgent != "" {
		req.Header.Set("User-Agent", w.UserAgent)
	}
	client := w.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %s", hostOf(spec.URL), redactURL(err))
	}
	defer func() { _ = resp.Body.Close() }()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	err = fmt.Errorf("POST %s: HTTP %d%s", hostOf(spec.URL), resp.StatusCode, excerpt(text))
	if resp.StatusCode == http.StatusTooManyRequests {
		if secs, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && secs > 0 {
			return &RetryAfterError{Err: err, After: time.Duration(secs) * time.Second}
		}
	}
	return err
}

// redactURL is err without the URL it may quote: a webhook's URL may hold
// a token in its path or query.
func redactURL(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err.Error()
	}
	return err.Error()
}

// hostOf is raw's host (its path and query may hold tokens).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Scheme + "://" + u.Host
}

// excerpt is the start of a response body for an error, one line.
func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(strings.ReplaceAll(strings.ToValidUTF8(string(b), "?"), "\x00", "?")), " ")
	if s == "" {
		return ""
	}
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return ": " + s
}
