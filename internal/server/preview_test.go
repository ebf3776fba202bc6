package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// Previews never show a secret: a command's rawSecret env, a custom
// runtime's secret parameters, a Kubernetes Secret's data, nor a channel
// secret folded into a multi-line YAML value.
func TestPreviewRedactsSecrets(t *testing.T) {
	t.Parallel()
	pem := "-----BEGIN KEY-----\nMIIsecretkeymaterial\n-----END KEY-----"
	custom := `{"kind":"custom","runtime":"vm","secrets":{"token":{"rawSecret":"param-s3cr3t"}},
		"custom":{"apply":{"env":{"TOKEN":{"rawSecret":"env-s3cr3t"}},"taskConfig":{"program":{"cmd":["deploy","--key","` + strings.ReplaceAll(pem, "\n", `\n`) + `","--token=param-s3cr3t"]}}}}}`
	secret := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db"},"stringData":{"password":"hunter2-db"}}`
	secrets := []string{pem}
	objs := renderObjects("customRuntime", []json.RawMessage{json.RawMessage(custom)}, &secrets)
	for k, v := range renderObjects("kubernetes", []json.RawMessage{json.RawMessage(secret)}, &secrets) {
		objs[k] = v
	}
	for name, text := range objs {
		for _, leak := range []string{"param-s3cr3t", "env-s3cr3t", "MIIsecretkeymaterial", "hunter2-db"} {
			if strings.Contains(text, leak) {
				t.Errorf("%s shows %q:\n%s", name, leak, text)
			}
		}
	}
	if !strings.Contains(objs["Secret db"], "password: (redacted)") || !strings.Contains(objs["custom/vm"], "rawSecret: (redacted)") {
		t.Errorf("objects:\n%s\n%s", objs["Secret db"], objs["custom/vm"])
	}
}
