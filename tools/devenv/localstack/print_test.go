package localstack

import (
	"strings"
	"testing"
)

// make run prints each event; one that says again what the container's last one said
// (a resend, a republish) is marked, and so is the same event delivered twice.
func TestEventPrinterMarksRepeats(t *testing.T) {
	var out strings.Builder
	p := &eventPrinter{out: &out, last: map[string]printed{}}
	ev := func(id, container, st, ts, outputs string) string {
		return `{"specversion":"1.0","id":"` + id + `","time":"` + ts + `","data":{"id":"` + container +
			`","status":"` + st + `","message":"m","timestamp":"` + ts + `"` + outputs + `}}`
	}
	for _, e := range []string{
		ev("e1", "web", "RUNNING", "t1", `,"output_spec":{"namespace":"ns","endpoints":[]}`),
		ev("e1", "web", "RUNNING", "t1", `,"output_spec":{"namespace":"ns","endpoints":[]}`),   // retried
		ev("e2", "web", "RUNNING", "t2", `,"output_spec":{"namespace":"ns","endpoints":[]}`),   // the resend
		ev("e3", "web", "RUNNING", "t3", `,"output_spec":{"namespace":"ns","endpoints":[{}]}`), // a change
		ev("e4", "db", "PENDING", "t4", ""),
		ev("e5", "web", "DELETED", "t5", ""),
		ev("e6", "web", "DELETED", "t6", ""), // forgotten at the first DELETED
		`not json`,
	} {
		p.print([]byte(e))
	}
	want := []string{
		"event  t1  web                      RUNNING  m",
		"event  t1  web                      RUNNING  m  (retry)",
		"event  t2  web                      RUNNING  m  (again)",
		"event  t3  web                      RUNNING  m",
		"event  t4  db                       PENDING  m",
		"event  t5  web                      DELETED  m",
		"event  t6  web                      DELETED  m",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
