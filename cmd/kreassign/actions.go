//lint:file-ignore ST1005 error messages are kafka-reassign-partitions.sh's, word for word

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kbroker/kbroker/internal/rebalance"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tool runs one action against a cluster.
type tool struct {
	o   *options
	cl  *kgo.Client
	adm *kadm.Client
	out io.Writer
}

// cluster is what Metadata says of the brokers and the topics asked for.
type cluster struct {
	brokers    map[int32]rebalance.Broker
	assignment rebalance.Assignment
	missing    []string // topics asked for that do not exist
}

// describe sends a fresh Metadata request (franz-go's kadm.Metadata may
// answer from a cache, which --wait must not) for topics, or every topic
// (internal ones included) when topics is nil.
func (t *tool) describe(ctx context.Context, topics []string) (*cluster, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	if topics != nil && len(topics) == 0 {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	resp, err := req.RequestWith(ctx, t.cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	c := &cluster{brokers: map[int32]rebalance.Broker{}, assignment: rebalance.Assignment{}}
	for _, b := range resp.Brokers {
		rack := ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		c.brokers[b.NodeID] = rebalance.Broker{ID: b.NodeID, Rack: rack}
	}
	for _, rt := range resp.Topics {
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				c.missing = append(c.missing, name)
				continue
			}
			return nil, fmt.Errorf("metadata of topic %s: %s", name, errorName(err, ""))
		}
		ps := map[int32][]int32{}
		for _, p := range rt.Partitions {
			ps[p.Partition] = slices.Clone(p.Replicas)
		}
		c.assignment[name] = ps
	}
	return c, nil
}

// errorName formats a Kafka error as its protocol name and message (the
// broker's, else the code's description).
func errorName(err error, message string) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if message == "" {
			message = ke.Description
		}
		return ke.Message + ": " + message
	}
	if message != "" {
		return err.Error() + ": " + message
	}
	return err.Error()
}

// requestError formats an error of a whole admin request.
func requestError(what string, err error) error {
	var em *kadm.ErrAndMessage
	if errors.As(err, &em) {
		return fmt.Errorf("%s: %s", what, errorName(em.Err, em.ErrMessage))
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fmt.Errorf("%s: %s", what, errorName(ke, ""))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// reassignments lists every reassignment in progress (a null topic list,
// as Kafka's listPartitionReassignments()). kadm's method returns nothing
// for an empty set, so the request is built here.
func (t *tool) reassignments(ctx context.Context) (map[string]map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, t.cl)
	if err != nil {
		return nil, requestError("ListPartitionReassignments", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return nil, fmt.Errorf("ListPartitionReassignments: %s", errorName(err, msg))
	}
	out := map[string]map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
	for _, rt := range resp.Topics {
		if out[rt.Topic] == nil {
			out[rt.Topic] = map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
		}
		for _, p := range rt.Partitions {
			out[rt.Topic][p.Partition] = p
		}
	}
	return out, nil
}

// planOnto resolves the brokers to spread over: --brokers, else every
// registered broker; minus the drained one.
func (t *tool) planOnto(c *cluster) ([]rebalance.Broker, error) {
	ids := t.o.brokers
	if ids == nil {
		ids = slices.Sorted(maps.Keys(c.brokers))
	}
	var out []rebalance.Broker
	for _, id := range ids {
		if t.o.action == actDrain && id == t.o.drain {
			continue
		}
		b, ok := c.brokers[id]
		if !ok {
			return nil, fmt.Errorf("Unknown broker id %d (registered: %s)", id, joinIDs(slices.Sorted(maps.Keys(c.brokers))))
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, errors.New("no broker left to place replicas on")
	}
	return out, nil
}

// generate plans a reassignment (--generate, --drain) and prints it.
func (t *tool) generate(ctx context.Context) (int, error) {
	topics := t.o.topics
	if t.o.topicsFile != "" {
		data, err := os.ReadFile(t.o.topicsFile)
		if err != nil {
			return exitError, err
		}
		if topics, err = parseTopicsToMove(data); err != nil {
			return exitError, err
		}
	}
	c, err := t.describe(ctx, topics)
	if err != nil {
		return exitError, err
	}
	if len(c.missing) > 0 {
		return exitError, fmt.Errorf("Topic %s not found.", c.missing[0])
	}
	onto, err := t.planOnto(c)
	if err != nil {
		return exitError, err
	}
	plan, err := rebalance.Compute(c.assignment, onto, rebalance.Options{
		ReplicationFactor: t.o.rf, DisableRackAware: t.o.disableRackAware,
	})
	if err != nil {
		return exitError, err
	}
	changed := rebalance.Diff(c.assignment, plan.Proposed)
	before := rebalance.Assignment{}
	for topic, ps := range changed {
		before[topic] = map[int32][]int32{}
		for p := range ps {
			before[topic][p] = c.assignment[topic][p]
		}
	}
	proposed := formatReassignment(changed)
	// Only the partitions that change are listed (Kafka's planner lists
	// every partition of the topics because it moves nearly all of them;
	// listing unchanged ones would make --execute start no-op
	// reassignments).
	fmt.Fprintf(t.out, "Current partition replica assignment\n%s\n\n", formatReassignment(before))
	fmt.Fprintf(t.out, "Proposed partition reassignment configuration\n%s\n\n", proposed)
	printSummary(t.out, c.assignment, plan, changed.Partitions(), onto)
	if inProgress, err := t.reassignments(ctx); err != nil {
		fmt.Fprintf(t.out, "\nWarning: could not list the reassignments in progress (%v); the plan starts from the replicas Metadata lists.\n", err)
	} else if n := countPartitions(inProgress); n > 0 {
		fmt.Fprintf(t.out, "\nWarning: %d partition reassignments are in progress; the plan starts from the replicas Metadata lists for them (adding ones included).\n", n)
	}
	if t.o.outputFile != "" {
		if err := os.WriteFile(t.o.outputFile, []byte(proposed+"\n"), 0o644); err != nil {
			return exitError, err
		}
	}
	return exitOK, nil
}

func countPartitions[V any](m map[string]map[int32]V) int {
	n := 0
	for _, ps := range m {
		n += len(ps)
	}
	return n
}

// printSummary writes what the plan copies and each broker's load before
// and after.
func printSummary(w io.Writer, current rebalance.Assignment, plan *rebalance.Plan, changed int, onto []rebalance.Broker) {
	fmt.Fprintf(w, "Summary: %d of %d partitions change; %d replicas to copy, %d to delete; %d preferred leaders change\n",
		changed, current.Partitions(), plan.Moves, plan.Removed, plan.LeaderChanges)
	racks := map[int32]string{}
	for _, b := range onto {
		racks[b.ID] = b.Rack
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "broker\track\treplicas before\tafter\tleaders before\tafter\t")
	for _, id := range slices.Sorted(maps.Keys(plan.Before)) {
		rack, in := racks[id]
		switch {
		case !in:
			rack = "(not in plan)"
		case rack == "":
			rack = "-"
		}
		b, a := plan.Before[id], plan.After[id]
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t\n", id, rack, b.Replicas, a.Replicas, b.Leaders, a.Leaders)
	}
	tw.Flush()
}

func joinIDs(ids []int32) string {
	var s []string
	for _, id := range ids {
		s = append(s, strconv.Itoa(int(id)))
	}
	return strings.Join(s, ",")
}

// readTargets reads --reassignment-json-file.
func (t *tool) readTargets() ([]target, error) {
	data, err := os.ReadFile(t.o.reassignmentFile)
	if err != nil {
		return nil, err
	}
	return parseReassignment(data)
}

func targetTopics(ts []target) []string {
	set := map[string]bool{}
	for _, t := range ts {
		set[t.Topic] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func sortTargets(ts []target) {
	slices.SortFunc(ts, func(a, b target) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
}

// execute starts the reassignment of --reassignment-json-file, as Kafka's
// executeAssignment: refuse while others are in progress (unless
// --additional), check the brokers and partitions exist, print the current
// assignment for rollback, send all partitions in one request.
func (t *tool) execute(ctx context.Context) (int, error) {
	targets, err := t.readTargets()
	if err != nil {
		return exitError, err
	}
	if err := validateForExecute(targets); err != nil {
		return exitError, err
	}
	if !t.o.additional {
		current, err := t.reassignments(ctx)
		if err != nil {
			return exitError, err
		}
		if len(current) > 0 {
			return exitError, errors.New("Cannot execute because there is an existing partition assignment.  Use --additional to override this and create a new partition assignment in addition to the existing one. The --additional flag can also be used to change the throttle by resubmitting the current reassignment.")
		}
	}
	c, err := t.describe(ctx, targetTopics(targets))
	if err != nil {
		return exitError, err
	}
	for _, tg := range targets {
		for _, b := range tg.Replicas {
			if _, ok := c.brokers[b]; !ok {
				return exitError, fmt.Errorf("Unknown broker id %d", b)
			}
		}
	}
	var missing []string
	before := rebalance.Assignment{}
	for _, tg := range targets {
		rs, ok := c.assignment[tg.Topic][tg.Partition]
		if !ok {
			missing = append(missing, tg.name())
			continue
		}
		if before[tg.Topic] == nil {
			before[tg.Topic] = map[int32][]int32{}
		}
		before[tg.Topic][tg.Partition] = rs
	}
	if len(missing) > 0 {
		return exitError, fmt.Errorf("Unable to find partition: %s", strings.Join(missing, ", "))
	}
	fmt.Fprintf(t.out, "Current partition replica assignment\n\n%s\n\nSave this to use as the --reassignment-json-file option during rollback\n", formatReassignment(before))
	if t.o.throttle > 0 {
		if err := t.setThrottles(ctx, before, targets); err != nil {
			return exitError, err
		}
	}

	var req kadm.AlterPartitionAssignmentsReq
	for _, tg := range targets {
		req.Assign(tg.Topic, tg.Partition, slices.Clone(tg.Replicas))
	}
	resps, err := t.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return exitError, requestError("AlterPartitionReassignments", err)
	}
	sortTargets(targets)
	started, failures := splitAnswers(targets, resps)
	if len(started) > 0 {
		fmt.Fprintf(t.out, "Successfully started partition reassignment%s for %s\n", plural(len(started)), strings.Join(started, ","))
	}
	if len(failures) > 0 {
		return exitError, fmt.Errorf("Error reassigning partition(s):\n%s", strings.Join(failures, "\n"))
	}
	if t.o.wait {
		return t.waitAndClear(ctx, targets)
	}
	return exitOK, nil
}

// waitAndClear waits for the targets as waitFor, then removes the
// replication throttles (unless --preserve-throttles) once all are done,
// as Kafka's --verify does.
func (t *tool) waitAndClear(ctx context.Context, targets []target) (int, error) {
	code, err := t.waitFor(ctx, targets)
	if code != exitOK || err != nil {
		return code, err
	}
	return t.clearWhenDone(ctx, targets)
}

// clearWhenDone removes the throttles after a complete reassignment.
func (t *tool) clearWhenDone(ctx context.Context, targets []target) (int, error) {
	if t.o.preserveThrottles {
		return exitOK, nil
	}
	c, err := t.describe(ctx, targetTopics(targets))
	if err != nil {
		return exitError, err
	}
	if err := t.clearThrottles(ctx, slices.Sorted(maps.Keys(c.brokers)), targets); err != nil {
		return exitError, err
	}
	return exitOK, nil
}

// splitAnswers sorts an AlterPartitionReassignments answer into the
// partitions it accepted and, with the reason, those it did not.
func splitAnswers(targets []target, resps kadm.AlterPartitionAssignmentsResponses) (ok, failures []string) {
	for _, tg := range targets {
		r, answered := resps[tg.Topic][tg.Partition]
		switch {
		case !answered:
			failures = append(failures, tg.name()+": no answer for this partition")
		case r.Err != nil:
			failures = append(failures, tg.name()+": "+errorName(r.Err, r.ErrMessage))
		default:
			ok = append(ok, tg.name())
		}
	}
	return ok, failures
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// partState is where one partition of a reassignment file stands.
type partState struct {
	target  target
	current []int32 // replicas now (during a reassignment: all of them)
	ongoing bool    // listed by ListPartitionReassignments
}

func (s partState) complete() bool { return !s.ongoing && slices.Equal(s.current, s.target.Replicas) }

// states finds where each target stands, as Kafka's
// findPartitionReassignmentStates: in progress if the controller lists
// it; otherwise done, with the replicas Metadata gives (none for a topic
// or partition that does not exist).
func (t *tool) states(ctx context.Context, targets []target) ([]partState, error) {
	ongoing, err := t.reassignments(ctx)
	if err != nil {
		return nil, err
	}
	var lookUp []string
	for _, tg := range targets {
		if _, ok := ongoing[tg.Topic][tg.Partition]; !ok && !slices.Contains(lookUp, tg.Topic) {
			lookUp = append(lookUp, tg.Topic)
		}
	}
	c := &cluster{assignment: rebalance.Assignment{}}
	if len(lookUp) > 0 {
		if c, err = t.describe(ctx, lookUp); err != nil {
			return nil, err
		}
	}
	var out []partState
	for _, tg := range targets {
		if r, ok := ongoing[tg.Topic][tg.Partition]; ok {
			out = append(out, partState{target: tg, current: r.Replicas, ongoing: true})
			continue
		}
		out = append(out, partState{target: tg, current: c.assignment[tg.Topic][tg.Partition]})
	}
	return out, nil
}

// statusText is Kafka's partitionReassignmentStatesToString.
func statusText(states []partState) string {
	lines := []string{"Status of partition reassignment:"}
	for _, s := range states {
		switch {
		case s.ongoing:
			lines = append(lines, fmt.Sprintf("Reassignment of partition %s is still in progress.", s.target.name()))
		case slices.Equal(s.current, s.target.Replicas):
			lines = append(lines, fmt.Sprintf("Reassignment of partition %s is completed.", s.target.name()))
		default:
			lines = append(lines, fmt.Sprintf("There is no active reassignment of partition %s, but replica set is %s rather than %s.",
				s.target.name(), joinIDs(s.current), joinIDs(s.target.Replicas)))
		}
	}
	return strings.Join(lines, "\n")
}

func countComplete(states []partState) int {
	n := 0
	for _, s := range states {
		if s.complete() {
			n++
		}
	}
	return n
}

// verify reports where each partition of the file stands (and with --wait
// polls until all are complete).
func (t *tool) verify(ctx context.Context) (int, error) {
	targets, err := t.readTargets()
	if err != nil {
		return exitError, err
	}
	sortTargets(targets)
	if t.o.wait {
		return t.waitAndClear(ctx, targets)
	}
	states, err := t.states(ctx, targets)
	if err != nil {
		return exitError, err
	}
	fmt.Fprintln(t.out, statusText(states))
	if countComplete(states) < len(states) {
		return exitIncomplete, nil
	}
	return t.clearWhenDone(ctx, targets)
}

// waitFor polls the targets' states every --interval until all are
// complete or ctx (bounded by --timeout) ends. A failed poll (a controller
// moving, a broker restarting) is reported and retried.
func (t *tool) waitFor(ctx context.Context, targets []target) (int, error) {
	start := time.Now()
	lastDone, lastErr := -1, ""
	var states []partState
	for {
		st, err := t.states(ctx, targets)
		switch {
		case err != nil && ctx.Err() == nil:
			if err.Error() != lastErr {
				fmt.Fprintf(t.out, "%s: poll failed, retrying: %v\n", time.Since(start).Round(time.Second), err)
				lastErr = err.Error()
			}
		case err == nil:
			states, lastErr = st, ""
			done := countComplete(states)
			if done != lastDone {
				fmt.Fprintf(t.out, "%s: %d of %d partition reassignments complete\n", time.Since(start).Round(time.Second), done, len(states))
				lastDone = done
			}
			if done == len(states) {
				fmt.Fprintln(t.out, statusText(states))
				return exitOK, nil
			}
		}
		timer := time.NewTimer(t.o.interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			if states != nil {
				fmt.Fprintln(t.out, statusText(states))
			}
			return exitIncomplete, fmt.Errorf("gave up after %v: %d of %d partition reassignments not complete", time.Since(start).Round(time.Second), len(targets)-max(lastDone, 0), len(targets))
		case <-timer.C:
		}
	}
}

// cancel cancels the reassignments of the file that are in progress.
func (t *tool) cancel(ctx context.Context) (int, error) {
	targets, err := t.readTargets()
	if err != nil {
		return exitError, err
	}
	sortTargets(targets)
	ongoing, err := t.reassignments(ctx)
	if err != nil {
		return exitError, err
	}
	var req kadm.AlterPartitionAssignmentsReq
	var active []target
	for _, tg := range targets {
		if _, ok := ongoing[tg.Topic][tg.Partition]; ok {
			req.CancelAssign(tg.Topic, tg.Partition)
			active = append(active, tg)
		}
	}
	if len(active) == 0 {
		fmt.Fprintln(t.out, "None of the specified partition reassignments are active.")
		return exitOK, nil
	}
	resps, err := t.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return exitError, requestError("AlterPartitionReassignments", err)
	}
	cancelled, failures := splitAnswers(active, resps)
	if len(cancelled) > 0 {
		fmt.Fprintf(t.out, "Successfully cancelled partition reassignment%s for: %s\n", plural(len(cancelled)), strings.Join(cancelled, ","))
	}
	if len(failures) > 0 {
		return exitError, fmt.Errorf("Error cancelling partition reassignment%s for:\n%s", plural(len(failures)), strings.Join(failures, "\n"))
	}
	return exitOK, nil
}

// list prints the reassignments in progress as Kafka's
// curReassignmentsToString.
func (t *tool) list(ctx context.Context) (int, error) {
	ongoing, err := t.reassignments(ctx)
	if err != nil {
		return exitError, err
	}
	fmt.Fprintln(t.out, listText(ongoing))
	return exitOK, nil
}

func listText(ongoing map[string]map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition) string {
	var lines []string
	for _, topic := range slices.Sorted(maps.Keys(ongoing)) {
		for _, p := range slices.Sorted(maps.Keys(ongoing[topic])) {
			r := ongoing[topic][p]
			line := fmt.Sprintf("%s: replicas: %s.", tpName(topic, p), joinIDs(r.Replicas))
			if len(r.AddingReplicas) > 0 {
				line += fmt.Sprintf(" adding: %s.", joinIDs(r.AddingReplicas))
			}
			if len(r.RemovingReplicas) > 0 {
				line += fmt.Sprintf(" removing: %s.", joinIDs(r.RemovingReplicas))
			}
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return "No partition reassignments found."
	}
	return "Current partition reassignments:\n" + strings.Join(lines, "\n")
}
