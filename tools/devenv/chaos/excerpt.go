package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// How a violation shows what happened: the lines of the history and the stream around
// it, as offsets from the start of the schedule.

func answerText(e Entry) string {
	switch {
	case e.Code != 0 && e.Problem != "":
		return fmt.Sprintf("%d %s", e.Code, e.Problem)
	case e.Code != 0:
		return fmt.Sprint(e.Code)
	}
	return "no answer: " + e.Err
}

// at is a time as an offset from the start of the schedule.
func (x *indexed) at(t time.Time) string {
	return fmt.Sprintf("%+.3fs", t.Sub(x.in.Run.Started).Seconds())
}

// violation builds a violation with the history excerpt of id between from and to
// (zero from: from the beginning): its operations, the faults of that time, and its
// events, in time order.
func (x *indexed) violation(id, what string, from, to time.Time) Violation {
	type line struct {
		t time.Time
		s string
	}
	var lines []line
	in := func(t time.Time) bool {
		return (from.IsZero() || !t.Before(from.Add(-time.Second))) && !t.After(to.Add(time.Second))
	}
	for _, e := range x.in.History {
		switch {
		case e.Type == "op" && e.ID == id && id != "" && (in(e.Start) || in(e.End)):
			l := fmt.Sprintf("%s..%s  #%d %s %s via %s", x.at(e.Start), x.at(e.End), e.Seq, e.Kind, e.ID, e.Via)
			if e.Proc != "" {
				l += " (" + e.Proc + ")"
			}
			if e.Kind == OpCreate {
				l += " image " + e.Image
			}
			switch {
			case e.Kind == OpForeign:
				l += " " + e.Target + " provider's objects"
				for _, o := range e.Foreign {
					l += " " + o.Kind + "/" + o.Name
				}
				if e.Err != "" {
					l += " err " + e.Err
				}
			case e.Kind == OpHandDelete:
				l += fmt.Sprintf(" -> %d deleted", e.Count)
				if e.Err != "" {
					l += " err " + e.Err
				}
			default:
				l += " -> " + answerText(e)
			}
			lines = append(lines, line{e.Start, l})
		case e.Type == "fault" && (e.ID == id && id != "" || !from.IsZero()) && (in(e.Start) || in(e.End) || (e.Start.Before(from) && e.End.After(to))):
			l := fmt.Sprintf("%s..%s  #%d fault %s %s", x.at(e.Start), x.at(e.End), e.Seq, e.Kind, strings.TrimSpace(e.Proc+" "+e.Target))
			if e.ID != "" {
				l += " (container " + e.ID + ")"
			}
			if e.Detail != "" {
				l += ": " + e.Detail
			}
			if e.Err != "" {
				l += " err " + e.Err
			}
			lines = append(lines, line{e.Start, l})
		case e.Type == "proc" && e.Kind != "started" && in(e.End):
			lines = append(lines, line{e.End, fmt.Sprintf("%s  #%d %s %s", x.at(e.End), e.Seq, e.Proc, e.Kind)})
		}
	}
	if id != "" {
		for _, ev := range x.events[id] {
			if in(ev.Time) {
				lines = append(lines, line{ev.Time, fmt.Sprintf("%s  event seq %d %s %s %q", x.at(ev.Time), ev.Seq, ev.ID, ev.Status, ev.Message)})
			}
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].t.Before(lines[j].t) })
	const most = 40
	if len(lines) > most {
		lines = append(lines[:most/2], append([]line{{s: fmt.Sprintf("… %d lines …", len(lines)-most)}}, lines[len(lines)-most/2:]...)...)
	}
	v := Violation{ID: id, What: what}
	for _, l := range lines {
		v.Excerpt = append(v.Excerpt, l.s)
	}
	return v
}
