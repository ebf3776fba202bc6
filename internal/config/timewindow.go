package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is a parsed allowedTimes window: the weekdays and hours (0-23) it
// allows, in its time zone.
type Window struct {
	Days     [7]bool // indexed by time.Weekday
	Hours    [24]bool
	Location *time.Location
}

// Contains reports whether t falls inside the window.
func (w Window) Contains(t time.Time) bool {
	t = t.In(w.Location)
	return w.Days[t.Weekday()] && w.Hours[t.Hour()]
}

var dayNames = map[string]time.Weekday{
	"sun": time.Sunday, "sunday": time.Sunday,
	"mon": time.Monday, "monday": time.Monday,
	"tue": time.Tuesday, "tues": time.Tuesday, "tuesday": time.Tuesday,
	"wed": time.Wednesday, "wednesday": time.Wednesday,
	"thu": time.Thursday, "thur": time.Thursday, "thurs": time.Thursday, "thursday": time.Thursday,
	"fri": time.Friday, "friday": time.Friday,
	"sat": time.Saturday, "saturday": time.Saturday,
}

// ParseTimeWindow parses days ("weekdays", "weekends", "mon-thu", "mon,wed"),
// hours ("10-20", "5,6,7", "9-12,14") and tz (IANA name, case-insensitive,
// default UTC). Empty days or hours mean every day or every hour.
func ParseTimeWindow(tw TimeWindow) (Window, error) {
	var w Window
	loc, err := loadLocation(tw.TZ)
	if err != nil {
		return w, err
	}
	w.Location = loc
	if len(splitList(tw.Days)) == 0 {
		for i := range w.Days {
			w.Days[i] = true
		}
	}
	for _, part := range splitList(tw.Days) {
		switch part {
		case "weekdays":
			for d := time.Monday; d <= time.Friday; d++ {
				w.Days[d] = true
			}
			continue
		case "weekends":
			w.Days[time.Saturday], w.Days[time.Sunday] = true, true
			continue
		}
		from, to, isRange := strings.Cut(part, "-")
		a, ok := dayNames[from]
		if !ok {
			return w, fmt.Errorf("days: unknown day %q (use mon..sun, monday..sunday, weekdays, weekends)", from)
		}
		b := a
		if isRange {
			if b, ok = dayNames[to]; !ok {
				return w, fmt.Errorf("days: unknown day %q", to)
			}
		}
		for d := a; ; d = (d + 1) % 7 {
			w.Days[d] = true
			if d == b {
				break
			}
		}
	}
	if len(splitList(tw.Hours)) == 0 {
		for i := range w.Hours {
			w.Hours[i] = true
		}
	}
	for _, part := range splitList(tw.Hours) {
		from, to, isRange := strings.Cut(part, "-")
		a, err := parseHour(from)
		if err != nil {
			return w, err
		}
		b := a
		if isRange {
			if b, err = parseHour(to); err != nil {
				return w, err
			}
			if b < a {
				return w, fmt.Errorf("hours: range %q ends before it starts", part)
			}
		}
		for h := a; h <= b; h++ {
			w.Hours[h] = true
		}
	}
	return w, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(strings.ToLower(s), ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseHour(s string) (int, error) {
	h, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || h < 0 || h > 23 {
		return 0, fmt.Errorf("hours: %q is not an hour from 0 to 23", s)
	}
	return h, nil
}

func loadLocation(tz string) (*time.Location, error) {
	if tz == "" || strings.EqualFold(tz, "utc") {
		return time.UTC, nil
	}
	if loc, err := time.LoadLocation(tz); err == nil {
		return loc, nil
	}
	// IANA names are case-sensitive on disk; accept any case like Prodvana does.
	parts := strings.Split(tz, "/")
	for i, p := range parts {
		words := strings.Split(strings.ToLower(p), "_")
		for j, w := range words {
			if w != "" {
				words[j] = strings.ToUpper(w[:1]) + w[1:]
			}
		}
		parts[i] = strings.Join(words, "_")
	}
	loc, err := time.LoadLocation(strings.Join(parts, "/"))
	if err != nil {
		return nil, fmt.Errorf("tz: unknown time zone %q", tz)
	}
	return loc, nil
}
