package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACLs (/kafka-acl/<Type>/<name> and /kafka-acl-extended/prefixed/...,
// one record per resource pattern) reach every broker in the cluster view.
// The controller loads them with the rest, changes them for CreateAcls
// and DeleteAcls, as Kafka's ZooKeeper-mode AclAuthorizer does (a
// read-modify-write of each resource pattern's record, conditional on its
// version, announced by a change notification), and follows the change
// notifications of both stores so that ACLs written by kafka-acls.sh
// --authorizer-properties zookeeper.connect=... are in the next view.

// aclWriteAttempts bounds the read-modify-write of one resource pattern
// when another writer keeps changing it in between (Kafka's
// maxUpdateRetries is 10, with a random backoff; another writer here is a
// person running kafka-acls.sh, so a few immediate attempts suffice).
const aclWriteAttempts = 5

// ACLDeletion is the outcome of one DeleteAcls filter.
type ACLDeletion struct {
	// Err fails the whole filter (one Kafka refuses, or no controller);
	// Deleted is then empty.
	Err error
	// Deleted are the bindings the filter matched, each once (a binding
	// several filters match is reported under the first), in the view's
	// order. A binding with Err is still there: its resource pattern's
	// write failed.
	Deleted []DeletedACL
}

// DeletedACL is one binding a DeleteAcls filter matched.
type DeletedACL struct {
	Binding acl.Binding
	Err     error
}

// CreateACLs adds bindings (CreateAcls); only the controller can. Each
// binding gets an error or nil, in order: a binding Kafka refuses is
// INVALID_REQUEST with acl.ValidateBinding's message, one already present
// is no error. Bindings on the same resource pattern are written together
// (one record per pattern) and succeed or fail together. The new view is
// published before it returns. On a broker that is not the controller
// every error is NOT_CONTROLLER.
func (c *Cluster) CreateACLs(bindings []acl.Binding) []error {
	var errs []error
	err := c.withActive(func(a *active) error {
		errs = a.createACLs(bindings)
		return nil
	})
	if err != nil {
		errs = make([]error, len(bindings))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// DeleteACLs removes the bindings each filter matches (DeleteAcls); only
// the controller can. It returns one ACLDeletion per filter, in order: a
// filter with an unknown element is refused (INVALID_REQUEST); the others
// list the bindings they removed. The new view is published before it
// returns. The error is only NOT_CONTROLLER.
func (c *Cluster) DeleteACLs(filters []acl.Filter) ([]ACLDeletion, error) {
	var res []ACLDeletion
	err := c.withActive(func(a *active) error {
		res = a.deleteACLs(filters)
		return nil
	})
	return res, err
}

// invalidACLError turns acl's validation error into INVALID_REQUEST with
// the message Kafka's client shows.
func invalidACLError(err error) error {
	var ie *acl.InvalidRequestError
	if errors.As(err, &ie) {
		return &kafkaError{kerr.InvalidRequest, ie.Message}
	}
	return &kafkaError{kerr.InvalidRequest, strings.TrimPrefix(err.Error(), "acl: ")}
}

func (a *active) createACLs(bindings []acl.Binding) []error {
	errs := make([]error, len(bindings))
	// The valid bindings by resource pattern, patterns in order of first
	// appearance (AclAuthorizer.createAcls groups them the same way).
	var order []acl.Resource
	byResource := map[acl.Resource][]int{}
	for i, b := range bindings {
		if err := acl.ValidateBinding(b); err != nil {
			errs[i] = invalidACLError(err)
			continue
		}
		if _, ok := byResource[b.Resource]; !ok {
			order = append(order, b.Resource)
		}
		byResource[b.Resource] = append(byResource[b.Resource], i)
	}
	if len(order) == 0 {
		return errs
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	written := map[acl.Resource][]acl.Entry{}
	for _, r := range order {
		idx := byResource[r]
		entries, err := a.updateResourceACLsLocked(ctx, r, func(current []acl.Entry) []acl.Entry {
			next := slices.Clone(current)
			for _, i := range idx {
				if !slices.Contains(next, bindings[i].Entry) {
					next = append(next, bindings[i].Entry)
				}
			}
			return next
		})
		if err != nil {
			a.c.logger.Warn("creating ACLs failed", "resource", r.String(), "err", err)
			for _, i := range idx {
				errs[i] = err
			}
			continue
		}
		written[r] = entries
	}
	a.publishACLsLocked(written)
	return errs
}

func (a *active) deleteACLs(filters []acl.Filter) []ACLDeletion {
	out := make([]ACLDeletion, len(filters))
	var valid []int // indexes of the filters that are not refused
	for i, f := range filters {
		if err := f.Validate(); err != nil {
			out[i].Err = invalidACLError(err)
			continue
		}
		valid = append(valid, i)
	}
	if len(valid) == 0 {
		return out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	// The resource patterns to visit: those whose known bindings some
	// filter matches, and those a filter names exactly, which may hold
	// ACLs the view has not caught up with (AclAuthorizer.deleteAcls).
	candidates := map[acl.Resource]bool{}
	for _, b := range a.md.ACLs {
		for _, i := range valid {
			if filters[i].Matches(b) {
				candidates[b.Resource] = true
				break
			}
		}
	}
	for _, i := range valid {
		for _, r := range filters[i].ExactResources() {
			if _, err := acl.ZNodePath(r); err == nil {
				candidates[r] = true
			}
		}
	}
	validFilters := make([]acl.Filter, len(valid))
	for k, i := range valid {
		validFilters[k] = filters[i]
	}
	written := map[acl.Resource][]acl.Entry{}
	for _, r := range slices.SortedFunc(maps.Keys(candidates), compareResources) {
		// deleted[k] are the bindings of r that valid filter k removes,
		// decided on the entries read for the write (a retry after a
		// conflict decides again); nil if it never came to that.
		var deleted [][]acl.Binding
		entries, err := a.updateResourceACLsLocked(ctx, r, func(current []acl.Entry) []acl.Entry {
			var kept []acl.Binding
			deleted, kept = acl.DeleteMatches(resourceBindings(r, current), validFilters)
			next := make([]acl.Entry, 0, len(kept))
			for _, b := range kept {
				next = append(next, b.Entry)
			}
			return next
		})
		if err != nil {
			a.c.logger.Warn("deleting ACLs failed", "resource", r.String(), "err", err)
			if deleted == nil {
				// Failed before deciding (the record could not be read):
				// report what the view says the filters match, so the
				// failure is not silent.
				var known []acl.Binding
				for _, b := range a.md.ACLs {
					if b.Resource == r {
						known = append(known, b)
					}
				}
				deleted, _ = acl.DeleteMatches(known, validFilters)
			}
		} else {
			written[r] = entries
		}
		for k, bs := range deleted {
			for _, b := range bs {
				out[valid[k]].Deleted = append(out[valid[k]].Deleted, DeletedACL{Binding: b, Err: err})
			}
		}
	}
	for i := range out {
		slices.SortFunc(out[i].Deleted, func(x, y DeletedACL) int { return acl.CompareBindings(x.Binding, y.Binding) })
	}
	a.publishACLsLocked(written)
	return out
}

// updateResourceACLsLocked is AclAuthorizer.updateResourceAcls: it reads
// the entries of r fresh from the store (so entries another tool wrote
// meanwhile are kept), applies change and writes the result conditionally
// on the version read, reading again if another writer came in between.
// An unchanged set is not written. It returns r's entries afterwards.
func (a *active) updateResourceACLsLocked(ctx context.Context, r acl.Resource, change func(current []acl.Entry) []acl.Entry) ([]acl.Entry, error) {
	for attempt := 0; attempt < aclWriteAttempts; attempt++ {
		current, version, err := a.c.store.ResourceACLs(ctx, r)
		if errors.Is(err, zk.ErrMalformed) {
			return nil, fmt.Errorf("%w: the stored ACLs of %s are damaged (see the controller's log); fix or delete the record first", kerr.UnknownServerError, r)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: reading the ACLs of %s: %v", kerr.UnknownServerError, r, err)
		}
		next := change(current)
		if sameEntries(current, next) {
			return current, nil
		}
		err = a.c.store.SetResourceACLs(ctx, a.epochZkVersion, r, next, version)
		if errors.Is(err, zk.ErrVersionConflict) {
			continue
		}
		if err != nil {
			if err = a.storeErr(err); !errors.Is(err, kerr.NotController) {
				err = fmt.Errorf("%w: writing the ACLs of %s: %v", kerr.UnknownServerError, r, err)
			}
			return nil, err
		}
		a.c.logger.Info("updated ACLs", "resource", r.String(), "entries", len(next), "previously", len(current))
		return next, nil
	}
	return nil, fmt.Errorf("%w: the ACLs of %s kept changing under the update; try again", kerr.UnknownServerError, r)
}

// publishACLsLocked publishes a view whose ACLs of each resource pattern
// in written are the given entries, if that changes the view.
func (a *active) publishACLsLocked(written map[acl.Resource][]acl.Entry) {
	if len(written) == 0 {
		return
	}
	bindings := withResourceACLs(a.md.ACLs, written)
	if slices.Equal(bindings, a.md.ACLs) {
		return
	}
	next := a.md.clone()
	next.ACLs = bindings
	a.publishLocked(next)
}

// readACLs reads the ACLs of resources (nil: every resource pattern with
// ACLs) over known, the bindings as last seen, and returns the result,
// sorted; known is not modified. A damaged record must not fail a
// takeover (every broker in turn would win, fail and resign), so its
// pattern keeps its known entries, and the record is named in the log.
func (a *active) readACLs(ctx context.Context, known []acl.Binding, resources []acl.Resource) ([]acl.Binding, error) {
	base := known
	if resources == nil {
		var err error
		if resources, err = a.c.store.ACLResources(ctx); err != nil {
			return nil, err
		}
		base = nil
	}
	read := make(map[acl.Resource][]acl.Entry, len(resources))
	for _, r := range resources {
		entries, _, err := a.c.store.ResourceACLs(ctx, r)
		if errors.Is(err, zk.ErrMalformed) {
			a.c.logger.Error("malformed ACL record; keeping the resource's ACLs as last known until it is fixed", "resource", r.String(), "err", err)
			var kept []acl.Entry
			for _, b := range known {
				if b.Resource == r {
					kept = append(kept, b.Entry)
				}
			}
			read[r] = kept
			continue
		}
		if err != nil {
			return nil, err
		}
		read[r] = entries
	}
	return withResourceACLs(base, read), nil
}

// resourceBindings are the bindings of entries on r.
func resourceBindings(r acl.Resource, entries []acl.Entry) []acl.Binding {
	out := make([]acl.Binding, len(entries))
	for i, e := range entries {
		out[i] = acl.Binding{Resource: r, Entry: e}
	}
	return out
}

// withResourceACLs returns bindings with the entries of each resource
// pattern in replace instead of its own (none: the pattern goes), sorted,
// each once; nil when empty. bindings is not modified.
func withResourceACLs(bindings []acl.Binding, replace map[acl.Resource][]acl.Entry) []acl.Binding {
	out := make([]acl.Binding, 0, len(bindings))
	for _, b := range bindings {
		if _, ok := replace[b.Resource]; !ok {
			out = append(out, b)
		}
	}
	for r, entries := range replace {
		for _, e := range entries {
			out = append(out, acl.Binding{Resource: r, Entry: e})
		}
	}
	return sortBindings(out)
}

// sortBindings sorts bindings in place into the view's order and drops
// repeats; nil when empty.
func sortBindings(bindings []acl.Binding) []acl.Binding {
	slices.SortFunc(bindings, acl.CompareBindings)
	bindings = slices.Compact(bindings)
	if len(bindings) == 0 {
		return nil
	}
	return bindings
}

// compareResources orders resource patterns as acl.CompareBindings does.
func compareResources(x, y acl.Resource) int {
	return cmp.Or(cmp.Compare(x.Type, y.Type), cmp.Compare(x.Pattern, y.Pattern), strings.Compare(x.Name, y.Name))
}

// sameEntries compares two entry lists as sets.
func sameEntries(x, y []acl.Entry) bool {
	set := make(map[acl.Entry]bool, len(x))
	for _, e := range x {
		set[e] = true
	}
	for _, e := range y {
		if !set[e] {
			return false
		}
	}
	other := make(map[acl.Entry]bool, len(y))
	for _, e := range y {
		other[e] = true
	}
	return len(set) == len(other)
}

// aclRecord is one binding as the embedded node's state file and the
// view's UpdateMetadata tag carry it: explicit keys and Kafka's wire
// codes, so the form stays put whatever acl's Go types become.
type aclRecord struct {
	ResourceType int8   `json:"resource_type"`
	Name         string `json:"name"`
	PatternType  int8   `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    int8   `json:"operation"`
	Permission   int8   `json:"permission"`
}

func (r aclRecord) binding() acl.Binding {
	return acl.Binding{
		Resource: acl.Resource{Type: kmsg.ACLResourceType(r.ResourceType), Name: r.Name, Pattern: kmsg.ACLResourcePatternType(r.PatternType)},
		Entry: acl.Entry{Principal: r.Principal, Host: r.Host,
			Operation: kmsg.ACLOperation(r.Operation), Permission: kmsg.ACLPermissionType(r.Permission)},
	}
}

func aclRecords(bindings []acl.Binding) []aclRecord {
	if len(bindings) == 0 {
		return nil
	}
	out := make([]aclRecord, len(bindings))
	for i, b := range bindings {
		out[i] = aclRecord{ResourceType: int8(b.Type), Name: b.Name, PatternType: int8(b.Pattern),
			Principal: b.Principal, Host: b.Host, Operation: int8(b.Operation), Permission: int8(b.Permission)}
	}
	return out
}

// watchACLChanges starts watching both ACL change directories and returns
// the first list (the notifications already there, whose changes the load
// that follows reads anyway) and the channel of the later ones. It records
// the newest sequence number of each directory as handled.
func (a *active) watchACLChanges(ctx, loadCtx context.Context) ([]string, <-chan []string, error) {
	changes, err := a.c.store.WatchACLChanges(ctx)
	if err != nil {
		return nil, nil, err
	}
	select {
	case pending := <-changes: // the first list is there at once
		a.aclChangeSeq = newestACLChanges(pending)
		return pending, changes, nil
	case <-loadCtx.Done():
		return nil, nil, fmt.Errorf("watching ACL changes: %w", loadCtx.Err())
	}
}

// followACLChanges handles the ACL change notification lists until the
// controller stops; the first (pending) one only records creation times
// (and purges): its changes were loaded.
func (a *active) followACLChanges(pending []string, changes <-chan []string) {
	defer a.wg.Done()
	a.onACLChanges(pending)
	for {
		select {
		case <-a.ctx.Done():
			return
		case paths, ok := <-changes:
			if !ok {
				return
			}
			a.onACLChanges(paths)
		}
	}
}

// onACLChanges handles the current list of ACL change notifications: the
// resource patterns named by notifications newer than the last handled
// (per directory) are read again and, if their ACLs changed, published in
// a new view. Notifications older than configChangeExpiry (Kafka's 15
// minutes) are deleted.
func (a *active) onACLChanges(paths []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	store := a.c.store
	seen := make(map[string]time.Time, len(paths))
	newest := maps.Clone(a.aclChangeSeq)
	if newest == nil {
		newest = map[string]int64{}
	}
	handled := func(parent string) int64 {
		if seq, ok := a.aclChangeSeq[parent]; ok {
			return seq
		}
		return -1
	}
	var resources []acl.Resource
	all := false
	for _, p := range paths {
		parent, seq, ok := zk.ACLChangeSequence(p)
		if !ok {
			continue // not a notification: not ours to judge
		}
		fresh := seq > handled(parent)
		if created, known := a.aclChanges[p]; known && !fresh {
			seen[p] = created
			continue
		}
		change, err := store.ACLChange(ctx, p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue // purged meanwhile
		case errors.Is(err, zk.ErrMalformed):
			if fresh {
				a.c.logger.Warn("malformed ACL change notification; reading every ACL again", "notification", p, "err", err)
				all = true
			}
		case err != nil:
			if a.ctx.Err() == nil {
				a.c.logger.Error("reading an ACL change notification failed; the next change retries", "notification", p, "err", err)
			}
			return
		case fresh && !slices.Contains(resources, change.Resource):
			resources = append(resources, change.Resource)
		}
		seen[p] = change.Created
		if fresh {
			newest[parent] = max(newest[parent], seq)
		}
	}
	a.aclChanges = seen
	if all || len(resources) > 0 {
		if all {
			resources = nil
		}
		bindings, err := a.readACLs(ctx, a.md.ACLs, resources)
		if err != nil {
			if a.ctx.Err() == nil {
				a.c.logger.Error("reading changed ACLs failed; the next change retries", "err", err)
			}
			return // newest not recorded: the next list handles these again
		}
		if !slices.Equal(bindings, a.md.ACLs) {
			next := a.md.clone()
			next.ACLs = bindings
			names := make([]string, 0, len(resources))
			for _, r := range resources {
				names = append(names, r.String())
			}
			a.c.logger.Info("ACLs changed in ZooKeeper; publishing them", "resources", names, "all", all, "bindings", len(bindings))
			a.publishLocked(next)
		}
	}
	a.aclChangeSeq = newest
	if expired := expiredConfigChanges(seen, time.Now()); len(expired) > 0 {
		if err := store.DeleteACLChanges(ctx, a.epochZkVersion, expired); err != nil && a.ctx.Err() == nil {
			a.c.logger.Warn("purging old ACL change notifications failed", "err", err)
		}
	}
}

// newestACLChanges is the highest sequence number of each change
// directory among notification paths.
func newestACLChanges(paths []string) map[string]int64 {
	out := map[string]int64{}
	for _, p := range paths {
		if parent, seq, ok := zk.ACLChangeSequence(p); ok {
			if cur, seen := out[parent]; !seen || seq > cur {
				out[parent] = seq
			}
		}
	}
	return out
}
