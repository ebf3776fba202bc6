package config

import (
	"testing"
	"time"
)

// FuzzScalars feeds durations and time windows (protection configs) to their
// parsers: no panic; a parsed duration is not negative and prints back to a
// duration that parses to the same value; a parsed window answers Contains.
func FuzzScalars(f *testing.F) {
	for _, seed := range [][4]string{
		{"5m", "weekdays", "9-17", "Europe/Paris"},
		{"1.5s", "mon,wed-fri", "22-6", "UTC"},
		{"3600", "weekends", "", ""},
		{"-1s", "sun-sat", "0-24", "Local"},
		{"9999999999h", "x", "25-1", "../../etc/passwd"},
		{"", "", "-", "America/New_York"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, dur, days, hours, tz string) {
		if d, err := ParseDuration(dur); err == nil {
			if d.Duration < 0 {
				t.Fatalf("%q parsed to a negative duration %s", dur, d.Duration)
			}
			back, err := ParseDuration(d.String())
			if err != nil || back.Duration != d.Duration {
				t.Fatalf("%q -> %s -> %v (%v)", dur, d, back.Duration, err)
			}
		}
		if w, err := ParseTimeWindow(TimeWindow{Days: days, Hours: hours, TZ: tz}); err == nil {
			_ = w.Contains(time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC))
		}
	})
}
