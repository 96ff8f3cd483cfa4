package controller

import "time"

// phaseClock times the steps of a new controller's takeover for its "now
// controller" log line: a failover's time until every partition is led
// again is the ZooKeeper session timeout plus these steps, and the line
// says which of them grew.
type phaseClock struct {
	last  time.Time
	attrs []any
}

func newPhaseClock() *phaseClock { return &phaseClock{last: time.Now()} }

// mark ends the step called name: its duration is the time since the
// previous mark. A nil clock (a decision outside a takeover) records
// nothing.
func (p *phaseClock) mark(name string) {
	if p == nil {
		return
	}
	now := time.Now()
	p.attrs = append(p.attrs, name+"_ms", now.Sub(p.last).Milliseconds())
	p.last = now
}

// note adds a figure (a count) to the line.
func (p *phaseClock) note(name string, value int) {
	if p == nil {
		return
	}
	p.attrs = append(p.attrs, name, value)
}
