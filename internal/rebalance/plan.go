// Package rebalance computes partition reassignment plans: given where every
// replica is now and the brokers to spread over, where each should be so
// that the cluster is balanced, rack-aware, and as little data as possible
// is copied. It is pure (no I/O, no clock, no randomness): the same input
// gives the same plan, so a plan can be reviewed, printed and re-derived.
//
// The plan is built in phases, each keeping what the earlier ones
// established:
//
//  1. validity: replicas on brokers outside the set are dropped, replication
//     factors raised or lowered, and every missing replica added on the
//     least loaded broker of the least used rack;
//  2. rack spread: within each partition, replicas move from a rack holding
//     two more of them than another rack to that rack (Kafka's rack-aware
//     rule: no two replicas on one rack while there are racks enough);
//  3. replica balance per topic, then overall: a replica moves from the
//     most to the least loaded broker (or along a chain of moves when no
//     single move keeps the rack spread), preferring replicas that are new
//     anyway, then followers, so that leaders stay where they are;
//  4. preferred leader balance per topic, then overall: only the order of
//     replicas changes (the first replica is the preferred leader), which
//     copies no data.
//
// Every transfer moves load from a broker to one with at least two fewer,
// so the sum of squared loads falls with each step and the phases end.
// Transfers are chosen between the most and the least loaded brokers
// first, which moves no more replicas than the excess above the target
// (the lower bound) when nothing but balance constrains the plan.
package rebalance

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Assignment maps topic -> partition -> replica broker ids. The first
// replica of a partition is its preferred leader.
type Assignment map[string]map[int32][]int32

// Clone returns a deep copy of a.
func (a Assignment) Clone() Assignment {
	out := make(Assignment, len(a))
	for t, ps := range a {
		cp := make(map[int32][]int32, len(ps))
		for p, rs := range ps {
			cp[p] = slices.Clone(rs)
		}
		out[t] = cp
	}
	return out
}

// Partitions returns the number of partitions in a.
func (a Assignment) Partitions() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// Diff returns the partitions of to whose replica list (order included)
// differs from from's: the reassignments to execute to get from from to to.
func Diff(from, to Assignment) Assignment {
	out := Assignment{}
	for t, ps := range to {
		for p, rs := range ps {
			if slices.Equal(from[t][p], rs) {
				continue
			}
			if out[t] == nil {
				out[t] = map[int32][]int32{}
			}
			out[t][p] = slices.Clone(rs)
		}
	}
	return out
}

// Broker is a broker to place replicas on.
type Broker struct {
	ID   int32
	Rack string // "" when the broker has no broker.rack
}

// Options tune a plan.
type Options struct {
	// ReplicationFactor, when > 0, is every partition's replica count in
	// the plan (raising or lowering it); 0 keeps each partition's.
	ReplicationFactor int
	// DisableRackAware ignores racks, as kafka-reassign-partitions.sh's
	// --disable-rack-aware. Without it, either every broker has a rack or
	// none has.
	DisableRackAware bool
}

// Load is what a broker holds in an assignment.
type Load struct {
	Replicas int // replicas hosted
	Leaders  int // partitions whose preferred leader it is
}

// Plan is a computed reassignment.
type Plan struct {
	// Proposed has every partition of the current assignment with its
	// planned replicas (Diff(current, Proposed) has those that change).
	Proposed Assignment
	// Moves counts replicas placed on a broker that did not hold them: the
	// partition copies the reassignment makes.
	Moves int
	// Removed counts replicas deleted from a broker.
	Removed int
	// LeaderChanges counts partitions whose preferred leader changes.
	LeaderChanges int
	// Before and After are the loads of every broker that appears in the
	// current assignment or in the given broker set.
	Before, After map[int32]Load
}

// Loads returns the replica and preferred-leader count of every broker in
// a, plus a zero entry for each of also not in a.
func Loads(a Assignment, also ...int32) map[int32]Load {
	out := map[int32]Load{}
	for _, id := range also {
		out[id] = Load{}
	}
	for _, ps := range a {
		for _, rs := range ps {
			for i, b := range rs {
				l := out[b]
				l.Replicas++
				if i == 0 {
					l.Leaders++
				}
				out[b] = l
			}
		}
	}
	return out
}

// InvalidReplicationFactorError is returned when the replication factor
// asked for cannot be met by the brokers given.
type InvalidReplicationFactorError struct {
	ReplicationFactor, Brokers int
}

func (e *InvalidReplicationFactorError) Error() string {
	// Kafka's message for the same condition (AdminUtils).
	return fmt.Sprintf("Replication factor: %d larger than available brokers: %d.", e.ReplicationFactor, e.Brokers)
}

// ErrMixedRacks is Kafka's refusal to plan rack-aware when only some
// brokers have a rack.
//
//lint:ignore ST1005 Kafka's message, word for word
var ErrMixedRacks = errors.New("Not all brokers have rack information. Add --disable-rack-aware in command line to make replica assignment without rack information.")

// Compute plans the reassignment of current onto brokers. Topics not in
// current are not touched (pass only the topics to move).
func Compute(current Assignment, brokers []Broker, opts Options) (*Plan, error) {
	if len(brokers) == 0 {
		return nil, errors.New("no brokers to assign replicas to")
	}
	if opts.ReplicationFactor < 0 {
		return nil, fmt.Errorf("replication factor %d: must be positive", opts.ReplicationFactor)
	}
	s, err := newState(brokers, opts)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range brokers {
		ids = append(ids, b.ID)
	}
	topics := slices.Sorted(maps.Keys(current))
	for _, name := range topics {
		ts := &topicState{name: name}
		for _, p := range slices.Sorted(maps.Keys(current[name])) {
			rs := current[name][p]
			want := len(rs)
			if opts.ReplicationFactor > 0 {
				want = opts.ReplicationFactor
			}
			if want == 0 {
				return nil, fmt.Errorf("partition %s-%d has no replicas: give a replication factor", name, p)
			}
			if want > len(s.brokers) {
				return nil, &InvalidReplicationFactorError{ReplicationFactor: want, Brokers: len(s.brokers)}
			}
			pt := &part{topic: ts, id: p, want: want, orig: map[int32]bool{}, origLeader: -1}
			for i, b := range rs {
				if b < 0 {
					return nil, fmt.Errorf("partition %s-%d: invalid broker id %d", name, p, b)
				}
				if pt.orig[b] {
					return nil, fmt.Errorf("partition %s-%d: broker %d listed twice", name, p, b)
				}
				pt.orig[b] = true
				if i == 0 {
					pt.origLeader = b
				}
			}
			pt.replicas = slices.Clone(rs)
			ts.parts = append(ts.parts, pt)
		}
		s.topics = append(s.topics, ts)
	}

	s.dropOutside()
	for _, ts := range s.topics {
		s.resize(ts)
		s.index(ts)
	}
	for _, ts := range s.topics {
		s.spreadRacks(ts)
		s.balanceReplicas(ts)
		s.saveCopies(ts)
	}
	s.balanceReplicasOverall()
	s.saveCopiesOverall()
	for _, ts := range s.topics {
		s.saveCopies(ts)
		s.balanceLeaders(ts)
	}
	s.balanceLeadersOverall()
	for _, ts := range s.topics {
		s.saveLeaderChanges(ts)
	}

	plan := &Plan{Proposed: Assignment{}}
	for _, ts := range s.topics {
		ps := map[int32][]int32{}
		for _, pt := range ts.parts {
			ps[pt.id] = slices.Clone(pt.replicas)
			for _, b := range pt.replicas {
				if !pt.orig[b] {
					plan.Moves++
				}
			}
			plan.Removed += len(pt.orig) - (len(pt.replicas) - countNew(pt))
			if pt.replicas[0] != pt.origLeader {
				plan.LeaderChanges++
			}
		}
		plan.Proposed[ts.name] = ps
	}
	plan.Before = Loads(current, ids...)
	var before []int32
	for id := range plan.Before {
		before = append(before, id)
	}
	plan.After = Loads(plan.Proposed, before...)
	return plan, nil
}

func countNew(pt *part) int {
	n := 0
	for _, b := range pt.replicas {
		if !pt.orig[b] {
			n++
		}
	}
	return n
}

// part is one partition being planned.
type part struct {
	topic      *topicState
	id         int32
	want       int            // replication factor in the plan
	replicas   []int32        // current plan; [0] is the preferred leader
	orig       map[int32]bool // brokers that held it before the plan
	origLeader int32          // preferred leader before the plan (-1: none)
}

func (p *part) has(b int32) bool { return slices.Contains(p.replicas, b) }

// topicState holds one topic's partitions and per-broker loads.
type topicState struct {
	name    string
	parts   []*part
	count   map[int32]int // replicas per broker
	leaders map[int32]int // preferred leaders per broker

	// Set by index once the partitions have their replication factor:
	// where the plan differs from the original, and where bestMove's
	// search for an unchanged partition resumes.
	missing, newAt map[int32]map[*part]bool
	cursor         int
}

// state is the plan under construction.
type state struct {
	brokers  []int32          // the brokers to spread over, ascending
	allowed  map[int32]bool   // the same, as a set
	rackOf   map[int32]string // rack key; every broker its own rack when racks are off
	racks    []string         // rack keys, ascending
	inRack   map[string][]int32
	topics   []*topicState
	overall  map[int32]int // replicas per broker, all topics
	overallL map[int32]int // preferred leaders per broker, all topics
}

func newState(brokers []Broker, opts Options) (*state, error) {
	s := &state{allowed: map[int32]bool{}, rackOf: map[int32]string{}, inRack: map[string][]int32{}}
	withRack := 0
	for _, b := range brokers {
		if b.ID < 0 {
			return nil, fmt.Errorf("invalid broker id %d", b.ID)
		}
		if s.allowed[b.ID] {
			return nil, fmt.Errorf("broker list contains duplicate entries: %d", b.ID)
		}
		s.allowed[b.ID] = true
		s.brokers = append(s.brokers, b.ID)
		if b.Rack != "" {
			withRack++
		}
	}
	rackAware := !opts.DisableRackAware && withRack > 0
	if rackAware && withRack != len(brokers) {
		return nil, ErrMixedRacks
	}
	slices.Sort(s.brokers)
	for _, b := range brokers {
		key := "\x00broker-" + strconv.Itoa(int(b.ID)) // cannot collide with a real rack name
		if rackAware {
			key = b.Rack
		}
		s.rackOf[b.ID] = key
	}
	for _, id := range s.brokers {
		r := s.rackOf[id]
		if len(s.inRack[r]) == 0 {
			s.racks = append(s.racks, r)
		}
		s.inRack[r] = append(s.inRack[r], id)
	}
	slices.Sort(s.racks)
	return s, nil
}

// recount recomputes every load from the partitions.
func (s *state) recount() {
	s.overall, s.overallL = map[int32]int{}, map[int32]int{}
	for _, ts := range s.topics {
		ts.count, ts.leaders = map[int32]int{}, map[int32]int{}
		for _, pt := range ts.parts {
			for i, b := range pt.replicas {
				ts.count[b]++
				s.overall[b]++
				if i == 0 {
					ts.leaders[b]++
					s.overallL[b]++
				}
			}
		}
	}
}

// dropOutside removes every replica on a broker outside the set.
func (s *state) dropOutside() {
	for _, ts := range s.topics {
		for _, pt := range ts.parts {
			pt.replicas = slices.DeleteFunc(pt.replicas, func(b int32) bool { return !s.allowed[b] })
		}
	}
	s.recount()
}

// rackCounts returns how many of p's replicas each rack holds.
func (s *state) rackCounts(p *part) map[string]int {
	rc := map[string]int{}
	for _, b := range p.replicas {
		rc[s.rackOf[b]]++
	}
	return rc
}

// resize trims or fills ts's partitions to their replication factor.
func (s *state) resize(ts *topicState) {
	for _, pt := range ts.parts {
		for len(pt.replicas) > pt.want {
			s.removeOne(pt)
		}
		for len(pt.replicas) < pt.want {
			s.addOne(pt)
		}
	}
}

// removeOne deletes the replica whose loss best keeps the plan balanced:
// from the rack holding most of the partition, a follower before the
// leader, from the most loaded broker.
func (s *state) removeOne(p *part) {
	rc := s.rackCounts(p)
	ts := p.topic
	best := -1
	better := func(i, j int) bool { // is replica i a better victim than j?
		bi, bj := p.replicas[i], p.replicas[j]
		if a, b := rc[s.rackOf[bi]], rc[s.rackOf[bj]]; a != b {
			return a > b
		}
		if (i == 0) != (j == 0) {
			return j == 0
		}
		if a, b := ts.count[bi], ts.count[bj]; a != b {
			return a > b
		}
		if a, b := s.overall[bi], s.overall[bj]; a != b {
			return a > b
		}
		return bi > bj
	}
	for i := range p.replicas {
		if best < 0 || better(i, best) {
			best = i
		}
	}
	b := p.replicas[best]
	s.unplace(p, b, best == 0)
	p.replicas = slices.Delete(p.replicas, best, best+1)
	if best == 0 && len(p.replicas) > 0 {
		s.placeLeader(p, p.replicas[0])
	}
}

// addOne appends a replica on the broker of the least used rack with the
// fewest replicas of the topic, then overall.
func (s *state) addOne(p *part) {
	rc := s.rackCounts(p)
	ts := p.topic
	best := int32(-1)
	for _, b := range s.brokers {
		if p.has(b) {
			continue
		}
		if best < 0 {
			best = b
			continue
		}
		if less3(key(rc[s.rackOf[b]], ts.count[b], s.overall[b]), key(rc[s.rackOf[best]], ts.count[best], s.overall[best])) {
			best = b
		}
	}
	p.replicas = append(p.replicas, best)
	ts.count[best]++
	s.overall[best]++
	if len(p.replicas) == 1 {
		s.placeLeader(p, best)
	}
}

// key orders candidates lexicographically by small non-negative counts.
func key(a, b, c int) [3]int { return [3]int{a, b, c} }

func less3(x, y [3]int) bool {
	return slices.Compare(x[:], y[:]) < 0
}

func (s *state) unplace(p *part, b int32, leader bool) {
	ts := p.topic
	ts.count[b]--
	s.overall[b]--
	if leader {
		ts.leaders[b]--
		s.overallL[b]--
	}
}

func (s *state) placeLeader(p *part, b int32) {
	p.topic.leaders[b]++
	s.overallL[b]++
}

// canMove tells whether p's replica on from may move to to without making
// the partition's rack spread worse.
func (s *state) canMove(p *part, from, to int32) bool {
	if !s.allowed[to] || p.has(to) || !p.has(from) {
		return false
	}
	rf, rt := s.rackOf[from], s.rackOf[to]
	if rf == rt || len(s.racks) == len(s.brokers) {
		return true // same rack, or every broker its own rack
	}
	// Counted in place: this runs for every candidate of every transfer.
	nf, nt := 0, 0
	for _, b := range p.replicas {
		switch s.rackOf[b] {
		case rf:
			nf++
		case rt:
			nt++
		}
	}
	return nt+1 <= nf
}

// move replaces p's replica on from with to, in the same position (so a
// moved leader's replacement becomes the preferred leader).
func (s *state) move(p *part, from, to int32) {
	s.track(p, false)
	defer s.track(p, true)
	i := slices.Index(p.replicas, from)
	s.unplace(p, from, i == 0)
	p.replicas[i] = to
	p.topic.count[to]++
	s.overall[to]++
	if i == 0 {
		s.placeLeader(p, to)
	}
}

// moveCost is the change in copied replicas if p's replica moves from
// from to to: +1 for taking an original replica away, -1 for putting one
// back where it was. Moving a replica the plan added anyway is free.
func moveCost(p *part, from, to int32) int {
	c := 0
	if p.orig[from] {
		c++
	}
	if p.orig[to] {
		c--
	}
	return c
}

// spreadRacks moves replicas within each partition of ts from a rack with
// at least two more of them than another rack with a free broker.
func (s *state) spreadRacks(ts *topicState) {
	if len(s.racks) == len(s.brokers) {
		return // every broker its own rack: distinct brokers are spread
	}
	for _, p := range ts.parts {
		for {
			rc := s.rackCounts(p)
			var bestFrom, bestTo int32 = -1, -1
			var bestKey [3]int
			for _, from := range p.replicas {
				for _, to := range s.brokers {
					if p.has(to) || rc[s.rackOf[to]]+2 > rc[s.rackOf[from]] {
						continue
					}
					leader := 0
					if p.replicas[0] == from {
						leader = 1
					}
					// Prefer the widest rack gap, then a follower, then
					// the emptiest destination, then the fullest source.
					k := [3]int{-(rc[s.rackOf[from]] - rc[s.rackOf[to]]), leader, ts.count[to] - ts.count[from]}
					if bestFrom < 0 || less3(k, bestKey) {
						bestFrom, bestTo, bestKey = from, to, k
					}
				}
			}
			if bestFrom < 0 {
				break
			}
			s.move(p, bestFrom, bestTo)
		}
	}
}

// step is one edit of a chain: partition p's replica (or, for leader
// chains, preferred leadership) goes from one broker to another.
type step struct {
	p        *part
	from, to int32
}

// chain finds, by breadth-first search over brokers, the shortest chain
// of edits from a broker in srcs to a broker accepted by isDst, where
// edges(u) lists the edits possible from u. Intermediate brokers give one
// and take one, so only the ends' loads change.
func (s *state) chain(srcs []int32, isDst func(src, b int32) bool, edges func(u int32) []step) []step {
	for _, src := range srcs {
		prev := map[int32]step{src: {}}
		queue := []int32{src}
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, e := range edges(u) {
				if _, seen := prev[e.to]; seen {
					continue
				}
				prev[e.to] = e
				if isDst(src, e.to) {
					var path []step
					for b := e.to; b != src; b = prev[b].from {
						path = append(path, prev[b])
					}
					slices.Reverse(path)
					return path
				}
				queue = append(queue, e.to)
			}
		}
	}
	return nil
}

// applyChain applies path's replica moves if each is still allowed when
// its turn comes (two edits of one partition may conflict), and reports
// whether it did; a failed chain is undone.
func (s *state) applyChain(path []step) bool {
	for i, st := range path {
		if !s.canMove(st.p, st.from, st.to) {
			for j := i - 1; j >= 0; j-- {
				s.move(path[j].p, path[j].to, path[j].from)
			}
			return false
		}
		s.move(st.p, st.from, st.to)
	}
	return true
}

// byLoad returns the brokers sorted by load descending (ties: ascending
// id) and the max and min loads.
func (s *state) byLoad(load map[int32]int) ([]int32, int, int) {
	order := slices.Clone(s.brokers)
	slices.SortStableFunc(order, func(a, b int32) int { return load[b] - load[a] })
	return order, load[order[0]], load[order[len(order)-1]]
}

// balanceReplicas evens ts's replica counts per broker.
func (s *state) balanceReplicas(ts *topicState) {
	s.balanceLoop(ts.count, func(u, v int32) (step, int, bool) {
		return s.bestMove([]*topicState{ts}, u, v)
	}, func(u int32) []step {
		var out []step
		for _, p := range ts.parts {
			if !p.has(u) {
				continue
			}
			for _, v := range s.brokers {
				if s.canMove(p, u, v) {
					out = append(out, step{p, u, v})
				}
			}
		}
		return out
	}, s.applyChain, func(st step) { s.move(st.p, st.from, st.to) })
}

// balanceReplicasOverall evens the replica counts over all topics,
// moving only replicas of topics where the source holds more than the
// destination, so that per-topic balance is kept.
func (s *state) balanceReplicasOverall() {
	if len(s.topics) < 2 {
		return
	}
	topics := func(u, v int32) []*topicState {
		var out []*topicState
		for _, ts := range s.topics {
			if ts.count[u] > ts.count[v] {
				out = append(out, ts)
			}
		}
		return out
	}
	s.balanceLoop(s.overall, func(u, v int32) (step, int, bool) {
		return s.bestMove(topics(u, v), u, v)
	}, func(u int32) []step {
		var out []step
		for _, ts := range s.topics {
			for _, p := range ts.parts {
				if !p.has(u) {
					continue
				}
				for _, v := range s.brokers {
					if ts.count[u] > ts.count[v] && s.canMove(p, u, v) {
						out = append(out, step{p, u, v})
					}
				}
			}
		}
		return out
	}, s.applyChain, func(st step) { s.move(st.p, st.from, st.to) })
}

// bestMove picks, among the partitions of topics, the move of a replica
// from u to v that copies least, then moves a follower rather than the
// leader (then the lowest topic and partition, for a deterministic plan).
// Only partitions the plan already changed can make a move free or save a
// copy (they are indexed); any other candidate costs one copy, so the
// first unchanged follower found will do, searched from where the last
// search stopped: a transfer costs O(changed) rather than O(partitions).
func (s *state) bestMove(topics []*topicState, u, v int32) (step, int, bool) {
	var best step
	var bestKey [4]int
	found := false
	consider := func(ti int, p *part) {
		if !s.canMove(p, u, v) {
			return
		}
		leader := 0
		if p.replicas[0] == u {
			leader = 1
		}
		k := [4]int{moveCost(p, u, v), leader, ti, int(p.id)}
		if !found || slices.Compare(k[:], bestKey[:]) < 0 {
			best, bestKey, found = step{p, u, v}, k, true
		}
	}
	for ti, ts := range topics {
		for p := range ts.missing[v] {
			consider(ti, p)
		}
		for p := range ts.newAt[u] {
			consider(ti, p)
		}
	}
	if found && bestKey[0] <= 0 {
		return best, bestKey[0], true
	}
	var fallback step // an unchanged partition led by u
	haveFallback := false
	for _, ts := range topics {
		n := len(ts.parts)
		for i := range n {
			j := (ts.cursor + i) % n
			p := ts.parts[j]
			if !s.canMove(p, u, v) {
				continue
			}
			if p.replicas[0] == u {
				if !haveFallback {
					fallback, haveFallback = step{p, u, v}, true
				}
				continue
			}
			ts.cursor = (j + 1) % n
			return step{p, u, v}, moveCost(p, u, v), true
		}
	}
	if haveFallback {
		return fallback, moveCost(fallback.p, u, v), true
	}
	return best, bestKey[0], found
}

// index records, for the partitions of ts, where the plan differs from the
// original: ts.missing[b] holds the partitions b held and no longer holds
// (though it may), ts.newAt[b] those it holds that it did not. bestMove
// looks for free or saving moves only there; move keeps it current.
func (s *state) index(ts *topicState) {
	ts.missing, ts.newAt = map[int32]map[*part]bool{}, map[int32]map[*part]bool{}
	for _, p := range ts.parts {
		s.track(p, true)
	}
}

// track adds p to (add) or removes it from its topic's index.
func (s *state) track(p *part, add bool) {
	ts := p.topic
	if ts.missing == nil {
		return
	}
	set := func(m map[int32]map[*part]bool, b int32) {
		if !add {
			delete(m[b], p)
			return
		}
		if m[b] == nil {
			m[b] = map[*part]bool{}
		}
		m[b][p] = true
	}
	for b := range p.orig {
		if s.allowed[b] && !p.has(b) {
			set(ts.missing, b)
		}
	}
	for _, b := range p.replicas {
		if !p.orig[b] {
			set(ts.newAt, b)
		}
	}
}

// balanceLoop transfers load between brokers until no broker has two more
// than another it can reach: first single edits between the most and the
// least loaded brokers (the cheapest first), then chains.
func (s *state) balanceLoop(load map[int32]int,
	direct func(u, v int32) (step, int, bool),
	edges func(u int32) []step,
	applyChain func([]step) bool,
	apply func(step),
) {
	failed := map[[2]int32]bool{} // chains that could not be applied at these loads
	for {
		order, maxLoad, minLoad := s.byLoad(load)
		if maxLoad-minLoad < 2 {
			return
		}
		done := false
		// Widest gap first: moving from the fullest to the emptiest never
		// moves a replica that a later step would have to move again.
		for gap := maxLoad - minLoad; gap >= 2 && !done; gap-- {
			var best step
			bestCost, found := 0, false
			for _, u := range order {
				for _, v := range order {
					if load[u]-load[v] != gap {
						continue
					}
					st, cost, ok := direct(u, v)
					if ok && (!found || cost < bestCost) {
						best, bestCost, found = st, cost, true
					}
				}
			}
			if found {
				apply(best)
				done = true
			}
		}
		if done {
			continue
		}
		for _, u := range order {
			if load[u]-minLoad < 2 {
				break
			}
			path := s.chain([]int32{u}, func(src, b int32) bool { return load[b] <= load[src]-2 }, edges)
			if path == nil {
				continue
			}
			k := [2]int32{u, path[len(path)-1].to}
			if failed[k] {
				continue
			}
			if applyChain(path) {
				done = true
				clear(failed)
				break
			}
			failed[k] = true
		}
		if !done {
			return
		}
	}
}

// switchLeader makes to (a replica of p) its preferred leader by swapping
// it with the current first replica.
func (s *state) switchLeader(p *part, to int32) {
	i := slices.Index(p.replicas, to)
	from := p.replicas[0]
	p.replicas[0], p.replicas[i] = to, from
	p.topic.leaders[from]--
	s.overallL[from]--
	p.topic.leaders[to]++
	s.overallL[to]++
}

func (s *state) canLead(p *part, from, to int32) bool {
	return len(p.replicas) > 0 && p.replicas[0] == from && from != to && p.has(to)
}

// leaderCost is the change in preferred-leader moves if p's leadership
// goes from from to to.
func leaderCost(p *part, from, to int32) int {
	c := 0
	if p.origLeader == from {
		c++
	}
	if p.origLeader == to {
		c--
	}
	return c
}

func (s *state) bestLeaderSwitch(parts []*part, u, v int32) (step, int, bool) {
	var best step
	bestCost, found := 0, false
	for _, p := range parts {
		if !s.canLead(p, u, v) {
			continue
		}
		if c := leaderCost(p, u, v); !found || c < bestCost {
			best, bestCost, found = step{p, u, v}, c, true
		}
	}
	return best, bestCost, found
}

func (s *state) applyLeaderChain(path []step) bool {
	for i, st := range path {
		if !s.canLead(st.p, st.from, st.to) {
			for j := i - 1; j >= 0; j-- {
				s.switchLeader(path[j].p, path[j].from)
			}
			return false
		}
		s.switchLeader(st.p, st.to)
	}
	return true
}

// balanceLeaders evens ts's preferred leaders per broker by reordering
// replicas.
func (s *state) balanceLeaders(ts *topicState) {
	s.balanceLoop(ts.leaders, func(u, v int32) (step, int, bool) {
		return s.bestLeaderSwitch(ts.parts, u, v)
	}, func(u int32) []step {
		var out []step
		for _, p := range ts.parts {
			if len(p.replicas) == 0 || p.replicas[0] != u {
				continue
			}
			for _, v := range p.replicas[1:] {
				out = append(out, step{p, u, v})
			}
		}
		return out
	}, s.applyLeaderChain, func(st step) { s.switchLeader(st.p, st.to) })
}

// balanceLeadersOverall evens preferred leaders over all topics, switching
// only within topics where the source leads more than the destination.
func (s *state) balanceLeadersOverall() {
	if len(s.topics) < 2 {
		return
	}
	s.balanceLoop(s.overallL, func(u, v int32) (step, int, bool) {
		var parts []*part
		for _, ts := range s.topics {
			if ts.leaders[u] > ts.leaders[v] {
				parts = append(parts, ts.parts...)
			}
		}
		return s.bestLeaderSwitch(parts, u, v)
	}, func(u int32) []step {
		var out []step
		for _, ts := range s.topics {
			for _, p := range ts.parts {
				if len(p.replicas) == 0 || p.replicas[0] != u {
					continue
				}
				for _, v := range p.replicas[1:] {
					if ts.leaders[u] > ts.leaders[v] {
						out = append(out, step{p, u, v})
					}
				}
			}
		}
		return out
	}, s.applyLeaderChain, func(st step) { s.switchLeader(st.p, st.to) })
}

// cancelCycles lowers the cost of a plan without changing any broker's
// load: it looks for a cycle of edits u1->u2->...->u1 (each broker gives
// one and takes one) whose costs add up below zero, with Bellman-Ford over
// the brokers (edge u->v weighs the cheapest edit from u to v), applies it,
// and repeats. This finds the copies a greedy balance wasted, e.g. when a
// lowered replication factor kept a replica whose broker then had to take
// a copy elsewhere.
func (s *state) cancelCycles(parts []*part, edits func(p *part, emit func(st step, cost int)), applyChain func([]step) bool, undo func([]step), total func() int) {
	n := len(s.brokers)
	idx := map[int32]int{}
	for i, b := range s.brokers {
		idx[b] = i
	}
	const none = 1 << 30
	for range 10 * n * n { // each round saves at least one; bounded anyway
		w := make([][]int, n)
		via := make([][]step, n)
		for i := range w {
			w[i] = slices.Repeat([]int{none}, n)
			via[i] = make([]step, n)
		}
		for _, p := range parts {
			edits(p, func(st step, cost int) {
				u, v := idx[st.from], idx[st.to]
				if cost < w[u][v] {
					w[u][v], via[u][v] = cost, st
				}
			})
		}
		dist := make([]int, n)
		pred := slices.Repeat([]int{-1}, n)
		relaxed := -1
		for range n {
			relaxed = -1
			for u := range n {
				for v := range n {
					if w[u][v] != none && dist[u]+w[u][v] < dist[v] {
						dist[v], pred[v], relaxed = dist[u]+w[u][v], u, v
					}
				}
			}
			if relaxed < 0 {
				return
			}
		}
		x := relaxed
		for range n {
			x = pred[x]
		}
		var cycle []step
		for v := x; ; {
			u := pred[v]
			cycle = append(cycle, via[u][v])
			v = u
			if v == x {
				break
			}
		}
		slices.Reverse(cycle)
		before := total()
		if !applyChain(cycle) {
			return
		}
		if total() >= before {
			undo(cycle)
			return
		}
	}
}

// copies counts the replicas of parts on brokers that did not hold them.
func copies(parts []*part) int {
	n := 0
	for _, p := range parts {
		n += countNew(p)
	}
	return n
}

// leaderMoves counts the partitions of parts whose preferred leader changed.
func leaderMoves(parts []*part) int {
	n := 0
	for _, p := range parts {
		if len(p.replicas) > 0 && p.replicas[0] != p.origLeader {
			n++
		}
	}
	return n
}

// saveCopies cancels wasteful move cycles within ts.
func (s *state) saveCopies(ts *topicState) {
	s.cancelCycles(ts.parts, func(p *part, emit func(step, int)) {
		for _, u := range p.replicas {
			for _, v := range s.brokers {
				if s.canMove(p, u, v) {
					emit(step{p, u, v}, moveCost(p, u, v))
				}
			}
		}
	}, s.applyChain, func(path []step) {
		for j := len(path) - 1; j >= 0; j-- {
			s.move(path[j].p, path[j].to, path[j].from)
		}
	}, func() int { return copies(ts.parts) })
}

// saveLeaderChanges cancels wasteful leadership cycles within ts.
func (s *state) saveLeaderChanges(ts *topicState) {
	s.cancelCycles(ts.parts, func(p *part, emit func(step, int)) {
		if len(p.replicas) == 0 {
			return
		}
		for _, v := range p.replicas[1:] {
			emit(step{p, p.replicas[0], v}, leaderCost(p, p.replicas[0], v))
		}
	}, s.applyLeaderChain, func(path []step) {
		for j := len(path) - 1; j >= 0; j-- {
			s.switchLeader(path[j].p, path[j].from)
		}
	}, func() int { return leaderMoves(ts.parts) })
}

// saveCopiesOverall cancels wasteful move cycles across topics: a cycle may
// hand a topic's extra replica (the +1 of an uneven share) from one broker
// to another and another topic's back, which keeps every broker's total.
// A cycle that would leave any topic less balanced than before is undone.
func (s *state) saveCopiesOverall() {
	if len(s.topics) < 2 {
		return
	}
	var all []*part
	for _, ts := range s.topics {
		all = append(all, ts.parts...)
	}
	spreads := func() []int {
		var out []int
		for _, ts := range s.topics {
			_, hi, lo := s.byLoad(ts.count)
			out = append(out, hi-lo)
		}
		return out
	}
	s.cancelCycles(all, func(p *part, emit func(step, int)) {
		ts := p.topic
		for _, u := range p.replicas {
			for _, v := range s.brokers {
				if ts.count[u] > ts.count[v] && s.canMove(p, u, v) {
					emit(step{p, u, v}, moveCost(p, u, v))
				}
			}
		}
	}, func(path []step) bool {
		before := spreads()
		if !s.applyChain(path) {
			return false
		}
		for i, d := range spreads() {
			if d > max(before[i], 1) {
				for j := len(path) - 1; j >= 0; j-- {
					s.move(path[j].p, path[j].to, path[j].from)
				}
				return false
			}
		}
		return true
	}, func(path []step) {
		for j := len(path) - 1; j >= 0; j-- {
			s.move(path[j].p, path[j].to, path[j].from)
		}
	}, func() int { return copies(all) })
}
