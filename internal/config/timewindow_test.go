package config

import (
	"testing"
	"time"
)

func TestParseTimeWindow(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	// 2024-01-01 was a Monday.
	at := func(day, hour int, loc *time.Location) time.Time { return time.Date(2024, 1, day, hour, 30, 0, 0, loc) }
	tests := []struct {
		name string
		tw   TimeWindow
		in   []time.Time
		out  []time.Time
		loc  *time.Location
	}{
		{
			name: "empty means always",
			tw:   TimeWindow{},
			in:   []time.Time{at(1, 0, time.UTC), at(7, 23, time.UTC)},
			loc:  time.UTC,
		},
		{
			name: "separators only mean always",
			tw:   TimeWindow{Days: " , ", Hours: ","},
			in:   []time.Time{at(6, 3, time.UTC)},
			loc:  time.UTC,
		},
		{
			name: "day range and hours inclusive",
			tw:   TimeWindow{Days: "mon-thu", Hours: "9-17", TZ: "Europe/Paris"},
			in:   []time.Time{at(1, 9, paris), at(4, 17, paris), at(1, 8, time.UTC)}, // 08:30 UTC is 09:30 in Paris
			out:  []time.Time{at(1, 8, paris), at(1, 18, paris), at(5, 10, paris), at(7, 10, paris)},
			loc:  paris,
		},
		{
			name: "wrapping day range",
			tw:   TimeWindow{Days: "fri-mon"},
			in:   []time.Time{at(5, 1, time.UTC), at(6, 1, time.UTC), at(7, 1, time.UTC), at(1, 1, time.UTC)},
			out:  []time.Time{at(2, 1, time.UTC), at(4, 1, time.UTC)},
			loc:  time.UTC,
		},
		{
			name: "names, lists and case",
			tw:   TimeWindow{Days: "Weekends, Wednesday", Hours: " 5, 7-8 ", TZ: "america/new_york"},
			in:   []time.Time{at(6, 5, newYork), at(3, 8, newYork), at(7, 7, newYork)},
			out:  []time.Time{at(6, 6, newYork), at(1, 5, newYork), at(3, 9, newYork)},
			loc:  newYork,
		},
		{
			name: "weekdays",
			tw:   TimeWindow{Days: "weekdays", TZ: "UTC"},
			in:   []time.Time{at(1, 0, time.UTC), at(5, 23, time.UTC)},
			out:  []time.Time{at(6, 12, time.UTC), at(7, 12, time.UTC)},
			loc:  time.UTC,
		},
		{
			name: "single day and hour",
			tw:   TimeWindow{Days: "tues", Hours: "0"},
			in:   []time.Time{at(2, 0, time.UTC)},
			out:  []time.Time{at(2, 1, time.UTC), at(3, 0, time.UTC)},
			loc:  time.UTC,
		},
	}
	for _, tt := range tests {
		w, err := ParseTimeWindow(tt.tw)
		if err != nil {
			t.Errorf("%s: ParseTimeWindow(%+v): %v", tt.name, tt.tw, err)
			continue
		}
		if w.Location.String() != tt.loc.String() {
			t.Errorf("%s: location = %v, want %v", tt.name, w.Location, tt.loc)
		}
		for _, tm := range tt.in {
			if !w.Contains(tm) {
				t.Errorf("%s: window does not contain %v", tt.name, tm)
			}
		}
		for _, tm := range tt.out {
			if w.Contains(tm) {
				t.Errorf("%s: window contains %v", tt.name, tm)
			}
		}
	}
}

func TestParseTimeWindowErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tw   TimeWindow
		want string
	}{
		{TimeWindow{Days: "someday"}, `days: unknown day "someday" (use mon..sun, monday..sunday, weekdays, weekends)`},
		{TimeWindow{Days: "mon-"}, `days: unknown day ""`},
		{TimeWindow{Days: "mon-xyz"}, `days: unknown day "xyz"`},
		{TimeWindow{Hours: "24"}, `hours: "24" is not an hour from 0 to 23`},
		{TimeWindow{Hours: "-1"}, `hours: "" is not an hour from 0 to 23`},
		{TimeWindow{Hours: "9-x"}, `hours: "x" is not an hour from 0 to 23`},
		{TimeWindow{Hours: "17-9"}, `hours: range "17-9" ends before it starts`},
		{TimeWindow{TZ: "Mars/Olympus_Mons"}, `tz: unknown time zone "Mars/Olympus_Mons"`},
	}
	for _, tt := range tests {
		_, err := ParseTimeWindow(tt.tw)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseTimeWindow(%+v) error = %v, want %s", tt.tw, err, tt.want)
		}
	}
}
