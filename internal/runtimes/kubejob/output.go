package kubejob

import (
	"context"
	"io"

	corev1 "k8s.io/api/core/v1"
)

// podLog reads the log of a pod's container (GET pods/log) and keeps its
// last limit bytes; cut says more was dropped. It returns what it read
// before an error too.
func (r *Runner) podLog(ctx context.Context, ns, pod, container string, limit int) (out string, cut bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, logTimeout)
	defer cancel()
	stream, err := r.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Stream(ctx)
	if err != nil {
		return "", false, err
	}
	defer stream.Close()
	t := &tailWriter{limit: limit}
	_, err = io.Copy(t, stream)
	out, cut = t.end()
	return out, cut, err
}

// tailWriter keeps the last limit bytes written to it.
type tailWriter struct {
	buf   []byte
	limit int
	cut   bool
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.limit {
		n := copy(t.buf, t.buf[len(t.buf)-t.limit:])
		t.buf, t.cut = t.buf[:n], true
	}
	return len(p), nil
}

func (t *tailWriter) end() (string, bool) {
	out, cut := keepEnd(string(t.buf), t.limit)
	return out, cut || t.cut
}

// keepEnd keeps the last limit bytes of s, starting at a character boundary.
func keepEnd(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	s = s[len(s)-limit:]
	for i := 0; i < 3 && len(s) > 0 && s[0]&0xC0 == 0x80; i++ {
		s = s[1:]
	}
	return s, true
}
