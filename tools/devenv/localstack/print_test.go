package localstack

import (
	"strconv"
	"strings"
	"testing"
)

// make run prints each event; one that says again what the container's last one said
// (a resend, a republish) is marked, and so is the same event delivered twice. Its
// time is printed in UTC with milliseconds, whatever the width of the event's, so the
// columns line up.
func TestEventPrinterMarksRepeats(t *testing.T) {
	var out strings.Builder
	p := &eventPrinter{out: &out, last: map[string]printed{}}
	ev := func(id, container, st, ts, outputs string) string {
		return `{"specversion":"1.0","id":"` + id + `","time":"` + ts + `","data":{"id":"` + container +
			`","status":"` + st + `","message":"m","timestamp":"` + ts + `"` + outputs + `}}`
	}
	// The events' times, as the publisher writes them: RFC 3339 with nanoseconds, their
	// trailing zeros dropped, so of varying width; one with an offset.
	const (
		t1 = "2026-05-04T10:20:30.1Z"
		t2 = "2026-05-04T10:20:45.123456789Z"
		t3 = "2026-05-04T10:20:46Z"
		t4 = "2026-05-04T12:20:47.05+02:00"
		t5 = "2026-05-04T10:20:48.999999Z"
	)
	for _, e := range []string{
		ev("e1", "web", "RUNNING", t1, `,"output_spec":{"namespace":"ns","endpoints":[]}`),
		ev("e1", "web", "RUNNING", t1, `,"output_spec":{"namespace":"ns","endpoints":[]}`),   // retried
		ev("e2", "web", "RUNNING", t2, `,"output_spec":{"namespace":"ns","endpoints":[]}`),   // the resend
		ev("e3", "web", "RUNNING", t3, `,"output_spec":{"namespace":"ns","endpoints":[{}]}`), // a change
		ev("e4", "db", "PENDING", t4, ""),
		ev("e5", "web", "DELETED", t5, ""),
		ev("e6", "web", "DELETED", "t6", ""), // forgotten at the first DELETED
		`not json`,
	} {
		p.print([]byte(e))
	}
	want := []string{
		"event  2026-05-04T10:20:30.100Z  web                      RUNNING  m",
		"event  2026-05-04T10:20:30.100Z  web                      RUNNING  m  (retry)",
		"event  2026-05-04T10:20:45.123Z  web                      RUNNING  m  (again)",
		"event  2026-05-04T10:20:46.000Z  web                      RUNNING  m",
		"event  2026-05-04T10:20:47.050Z  db                       PENDING  m",
		"event  2026-05-04T10:20:48.999Z  web                      DELETED  m",
		"event  t6                        web                      DELETED  m",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Whatever the width of an event's time, the container, status and message start in
// the same column on every line.
func TestEventPrinterAlignsColumns(t *testing.T) {
	var out strings.Builder
	p := &eventPrinter{out: &out, last: map[string]printed{}}
	for i, ts := range []string{"2026-05-04T10:20:30Z", "2026-05-04T10:20:30.1Z", "2026-05-04T10:20:30.123456789Z",
		"2026-05-04T10:20:30.12+01:00", "2026-05-04T10:20:30.999999999-07:00"} {
		p.print([]byte(`{"id":"e` + strconv.Itoa(i) + `","time":"` + ts + `","data":{"id":"c` + strconv.Itoa(i) +
			`","status":"RUNNING","message":"m"}}`))
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("printed %d lines, want 5:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		if strings.Index(l, " c") != strings.Index(lines[0], " c") || strings.Index(l, "RUNNING") != strings.Index(lines[0], "RUNNING") {
			t.Errorf("columns do not line up:\n%s", out.String())
			break
		}
	}
}
