package zk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"
	aclmodel "github.com/kbroker/kbroker/internal/acl"
)

// ACLs as Kafka's ZooKeeper mode keeps them (ZkData.scala ZkAclStore,
// ZkAclChangeStore; AclAuthorizer's writes). internal/acl owns the paths,
// JSON and notification formats; this file does the I/O:
//
//	/kafka-acl/<Type>/<name>                       literal patterns
//	/kafka-acl-extended/prefixed/<Type>/<name>     prefixed patterns
//	/kafka-acl-changes/acl_changes_<10 digits>     TOPIC:orders
//	/kafka-acl-extended-changes/acl_changes_<...>  {"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}
//
// One znode per resource pattern holds every entry on it, so a change is a
// read-modify-write of that znode, conditional on its version; the
// notification announcing it goes in the same transaction. Kafka's own
// tooling (kafka-acls.sh --authorizer-properties zookeeper.connect=...)
// writes the znode and then the notification, which is how the controller
// learns of changes it did not make.

// aclStoreTypes are the resource types with a directory under each ACL
// root (Kafka's AclEntry.ResourceTypes); Kafka's loadAllAcls reads exactly
// these directories, by their canonical name.
var aclStoreTypes = [...]aclmodel.Resource{
	{Type: aclmodel.ResourceTopic}, {Type: aclmodel.ResourceGroup}, {Type: aclmodel.ResourceCluster},
	{Type: aclmodel.ResourceTransactionalID}, {Type: aclmodel.ResourceDelegationToken}, {Type: aclmodel.ResourceUser},
}

// aclChangeParents are the two notification directories, literal first.
var aclChangeParents = [...]string{aclmodel.LiteralChanges, aclmodel.ExtendedChanges}

// ACLChange is one ACL change notification.
type ACLChange struct {
	// Path is the notification's chroot-relative path, under
	// /kafka-acl-changes or /kafka-acl-extended-changes.
	Path     string
	Resource aclmodel.Resource
	Created  time.Time
}

// ACLChangeSequence splits a notification path into its directory and
// sequence number; ok is false for anything that is not
// <change directory>/acl_changes_<digits>.
func ACLChangeSequence(path string) (parent string, seq int64, ok bool) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", 0, false
	}
	parent = path[:i]
	if !slices.Contains(aclChangeParents[:], parent) {
		return "", 0, false
	}
	digits, found := strings.CutPrefix(path[i+1:], aclmodel.ChangePrefix)
	if !found || digits == "" {
		return "", 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return parent, n, true
}

// ensureACLPaths creates the znodes Kafka's brokers create at start
// (KafkaZkClient.createAclPaths), so the layout looks as Kafka's to
// zkCli.sh and kafka-acls.sh and writes find their parents.
func (s *Store) ensureACLPaths(ctx context.Context) error {
	for _, p := range aclmodel.SetupPaths() {
		err := s.retry(ctx, func() error {
			_, err := s.conn.Create(s.abs(p), nil, 0, acl)
			return err
		})
		if err != nil && !errors.Is(err, gozk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", s.abs(p), err)
		}
	}
	return nil
}

// ACLResources lists the resource patterns that have an ACL znode,
// literal ones first, each store in the order of aclStoreTypes and then
// by name. A child name that is not a valid pattern (a name Kafka would
// not have written) is left out, with a warning.
func (s *Store) ACLResources(ctx context.Context) ([]aclmodel.Resource, error) {
	var out []aclmodel.Resource
	for _, root := range [...]string{aclmodel.LiteralRoot, aclmodel.PrefixedRoot} {
		for _, t := range aclStoreTypes {
			dir := root + "/" + aclmodel.ResourceTypeName(t.Type)
			names, err := s.children(ctx, dir)
			if err != nil {
				return nil, err
			}
			slices.Sort(names)
			for _, n := range names {
				r, err := aclmodel.ParseZNodePath(dir + "/" + n)
				if err == nil {
					err = aclmodel.ValidateName(r.Name)
				}
				if err != nil {
					s.logger.Warn("ignoring an ACL znode that names no valid resource pattern", "path", s.abs(dir+"/"+n), "err", err)
					continue
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// ResourceACLs reads the entries of one resource pattern and its znode
// version, the condition of the next SetResourceACLs; a missing znode has
// no entries, at version -1. A znode that does not decode is an
// ErrMalformed error naming it.
func (s *Store) ResourceACLs(ctx context.Context, r aclmodel.Resource) ([]aclmodel.Entry, int32, error) {
	path, err := aclmodel.ZNodePath(r)
	if err != nil {
		return nil, 0, fmt.Errorf("read ACLs of %s: %w", r, err)
	}
	data, stat, err := s.get(ctx, path)
	if errors.Is(err, ErrNoNode) {
		return nil, -1, nil
	}
	if err != nil {
		return nil, 0, err
	}
	entries, err := aclmodel.DecodeZNode(data)
	if err != nil {
		// The decoder's message quotes the start of the content already;
		// ACL znodes hold no secrets.
		return nil, 0, s.malformedAt(&MalformedError{Path: path, Reason: err.Error(), Data: data})
	}
	return entries, stat.Version, nil
}

// SetResourceACLs replaces the entries of resource pattern r, if its znode
// is still at version (-1: it must not exist), and creates the change
// notification of r's store, in one transaction fenced on the controller
// epoch. No entries deletes the znode, as Kafka does (an absent znode with
// no entries wanted is left alone, without a notification). A changed
// znode is ErrVersionConflict: read it again and redo the change, so an
// entry another tool added meanwhile is kept.
func (s *Store) SetResourceACLs(ctx context.Context, epochZkVersion int32, r aclmodel.Resource, entries []aclmodel.Entry, version int32) error {
	path, err := aclmodel.ZNodePath(r)
	if err != nil {
		return fmt.Errorf("set ACLs of %s: %w", r, err)
	}
	parent, note, err := aclmodel.ChangeNotification(r)
	if err != nil {
		return fmt.Errorf("set ACLs of %s: %w", r, err)
	}
	var op any
	switch {
	case len(entries) == 0 && version < 0:
		return nil
	case len(entries) == 0:
		op = s.deleteOp(path, version)
	case version < 0:
		op = s.createOp(path, aclmodel.EncodeZNode(entries), 0)
	default:
		op = s.setOp(path, aclmodel.EncodeZNode(entries), version)
	}
	noteOp := s.createOp(parent+"/"+aclmodel.ChangePrefix, note, gozk.FlagSequence)
	for attempt := 0; ; attempt++ {
		_, err = s.fencedMulti(ctx, epochZkVersion, op, noteOp)
		var me *MultiError
		if attempt == 0 && errors.As(err, &me) && errors.Is(me.Err, gozk.ErrNoNode) &&
			(me.Index == 1 || me.Index == 0 && version < 0) {
			// A parent is missing: the type directory (or the change
			// directory) was never made or was removed by hand. Kafka's
			// brokers make them at start; make them now and try once more.
			if perr := s.ensureACLPaths(ctx); perr != nil {
				return fmt.Errorf("set ACLs of %s: %w", r, perr)
			}
			continue
		}
		switch {
		case err == nil:
			return nil
		case errors.As(err, &me) && me.Index == 0 && (errors.Is(me.Err, gozk.ErrNodeExists) || errors.Is(me.Err, gozk.ErrBadVersion) || errors.Is(me.Err, gozk.ErrNoNode)):
			return fmt.Errorf("set ACLs of %s at version %d: %w", r, version, ErrVersionConflict)
		default:
			return fmt.Errorf("set ACLs of %s: %w", r, err)
		}
	}
}

// WatchACLChanges delivers the paths of the notifications under both
// change directories (chroot-relative, sorted: literal ones first, each
// directory in sequence order), now and after every change of either's
// children, until ctx ends; then it closes the channel. Only the latest
// list is kept for a slow reader; notifications stay until purged, so none
// is missed. It first makes Kafka's ACL directories where missing, as
// Kafka's brokers do at start.
func (s *Store) WatchACLChanges(ctx context.Context) (<-chan []string, error) {
	if err := s.ensureACLPaths(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var lists [len(aclChangeParents)]<-chan []string
	for i, parent := range aclChangeParents {
		ch, err := watchLoop(ctx, s, func() ([]string, <-chan gozk.Event, error) {
			names, _, ev, err := s.conn.ChildrenW(s.abs(parent))
			if errors.Is(err, gozk.ErrNoNode) {
				// Deleted by hand: create it again rather than fail
				// every controller takeover.
				if _, cerr := s.conn.Create(s.abs(parent), nil, 0, acl); cerr != nil && !errors.Is(cerr, gozk.ErrNodeExists) {
					return nil, nil, cerr
				}
				names, _, ev, err = s.conn.ChildrenW(s.abs(parent))
			}
			if err != nil {
				return nil, nil, err
			}
			paths := make([]string, 0, len(names))
			for _, n := range names {
				paths = append(paths, parent+"/"+n)
			}
			slices.Sort(paths)
			return paths, ev, nil
		}, slices.Equal)
		if err != nil {
			cancel()
			return nil, err
		}
		lists[i] = ch
	}
	// Both loops deliver their first list at once.
	var latest [len(aclChangeParents)][]string
	for i, ch := range lists {
		latest[i] = <-ch
	}
	joined := func() []string { return slices.Concat(latest[:]...) }
	out := make(chan []string, 1)
	out <- joined()
	go func() {
		defer close(out)
		defer cancel()
		for {
			var ok bool
			select {
			case latest[0], ok = <-lists[0]:
			case latest[1], ok = <-lists[1]:
			}
			if !ok {
				return // ctx ended or the Store closed
			}
			v := joined()
			select {
			case out <- v:
			default:
				// Replace the unread, older list; only this goroutine sends.
				select {
				case <-out:
				default:
				}
				out <- v
			}
		}
	}()
	return out, nil
}

// ACLChange reads one notification; ErrNoNode if it was purged. A
// notification that does not decode is an ErrMalformed error (with its
// creation time set, so it can still be purged).
func (s *Store) ACLChange(ctx context.Context, path string) (ACLChange, error) {
	parent, _, ok := ACLChangeSequence(path)
	if !ok {
		return ACLChange{}, fmt.Errorf("read ACL change %s: not an ACL change notification", path)
	}
	data, stat, err := s.get(ctx, path)
	if err != nil {
		return ACLChange{}, err
	}
	c := ACLChange{Path: path, Created: time.UnixMilli(stat.Ctime)}
	c.Resource, err = aclmodel.ParseChangeNotification(parent, data)
	if err != nil {
		return c, s.malformedAt(&MalformedError{Path: path, Reason: err.Error(), Data: data})
	}
	return c, nil
}

// DeleteACLChanges removes notifications everyone has seen (Kafka's
// ZkNodeChangeNotificationListener purges those older than 15 minutes),
// fenced on the controller epoch; already deleted ones are fine.
func (s *Store) DeleteACLChanges(ctx context.Context, epochZkVersion int32, paths []string) error {
	for _, p := range paths {
		if _, _, ok := ACLChangeSequence(p); !ok {
			return fmt.Errorf("delete ACL change %s: not an ACL change notification", p)
		}
		_, err := s.fencedMulti(ctx, epochZkVersion, s.deleteOp(p, -1))
		if err != nil && !errors.Is(err, gozk.ErrNoNode) {
			return fmt.Errorf("delete ACL change notification %s: %w", p, err)
		}
	}
	return nil
}
