package zk

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// bulkReadMin is the fewest reads worth a bulk read session (a session's
// creation and close are two ZooKeeper transactions).
const bulkReadMin = 256

// topicReaders bounds the topics ReadTopics reads at once when it falls
// back to one request per znode.
const topicReaders = 8

// readMany answers ops on a new bulk read session (multiread.go) with the
// server the Store's session uses.
func (s *Store) readMany(ctx context.Context, ops []readOp) ([]znodeRead, error) {
	b, err := s.openBulkReader(ctx)
	if err != nil {
		return nil, err
	}
	defer b.close()
	return b.read(ctx, ops)
}

// openBulkReader opens a bulk read session with the server the Store's
// session uses.
func (s *Store) openBulkReader(ctx context.Context) (*bulkReader, error) {
	server := s.conn.Server()
	if s.bulkServer != "" {
		server = s.bulkServer
	}
	if server == "" {
		return nil, errors.New("no ZooKeeper server connected")
	}
	return dialBulkReader(ctx, server, s.sessionTimeout, "/")
}

// TopicRead is one topic as ReadTopics found it.
type TopicRead struct {
	Assignment TopicAssignment
	Configs    map[string]string        // overrides, empty for none
	States     map[int32]PartitionState // partitions without a state znode are absent
	// Err is this topic's own failure: ErrTopicNotFound (deleted
	// meanwhile) or ErrMalformed (a damaged znode); the fields after the
	// damaged znode's are then unset.
	Err error
}

// ReadTopics reads the topics' assignments, config overrides and partition
// states: a new controller's reads (Kafka's initializeControllerContext).
// It reads them all in two rounds of multiRead requests on a bulk read
// session, the znodes of every topic, then every partition's state; if
// that fails, topic by topic on the Store's session, topicReaders at a
// time. The error is a failure that is not one topic's own.
func (s *Store) ReadTopics(ctx context.Context, names []string) (map[string]TopicRead, error) {
	out, err := s.readTopicsBulk(ctx, names)
	if err == nil || ctx.Err() != nil {
		return out, err
	}
	s.logger.Info("bulk read of topics failed; reading one znode per request", "topics", len(names), "err", err)
	return s.readTopicsEach(ctx, names)
}

func (s *Store) readTopicsBulk(ctx context.Context, names []string) (map[string]TopicRead, error) {
	out := make(map[string]TopicRead, len(names))
	if len(names) == 0 {
		return out, nil
	}
	b, err := s.openBulkReader(ctx)
	if err != nil {
		return nil, err
	}
	defer b.close()
	ops := make([]readOp, 0, 3*len(names))
	for _, n := range names {
		ops = append(ops, readOp{path: s.abs(TopicPath(n))}, readOp{path: s.abs(TopicConfigPath(n))},
			readOp{path: s.abs(TopicPartitionsPath(n)), children: true})
	}
	res, err := b.read(ctx, ops)
	if err != nil {
		return nil, err
	}
	type stateRef struct {
		topic     string
		partition int32
	}
	var stateOps []readOp
	var refs []stateRef
	for i, n := range names {
		assignment, config, children := res[3*i], res[3*i+1], res[3*i+2]
		var tr TopicRead
		switch {
		case errors.Is(assignment.err, ErrNoNode):
			out[n] = TopicRead{Err: fmt.Errorf("topic %q: %w", n, ErrTopicNotFound)}
			continue
		case assignment.err != nil:
			return nil, fmt.Errorf("read %s: %w", s.abs(TopicPath(n)), assignment.err)
		case config.err != nil && !errors.Is(config.err, ErrNoNode):
			return nil, fmt.Errorf("read %s: %w", s.abs(TopicConfigPath(n)), config.err)
		case children.err != nil && !errors.Is(children.err, ErrNoNode):
			return nil, fmt.Errorf("list %s: %w", s.abs(TopicPartitionsPath(n)), children.err)
		}
		if tr.Assignment, err = DecodeTopicAssignment(n, assignment.data); err != nil {
			out[n] = TopicRead{Err: s.malformedAt(err)}
			continue
		}
		partitions, err := s.partitionNumbers(n, children.children)
		if err != nil {
			tr.Err = err
			out[n] = tr
			continue
		}
		tr.Configs = map[string]string{}
		if config.err == nil {
			if tr.Configs, err = DecodeTopicConfig(n, config.data); err != nil {
				tr.Err = s.malformedAt(err)
				out[n] = tr
				continue
			}
		}
		tr.States = make(map[int32]PartitionState, len(partitions))
		for _, p := range partitions {
			stateOps = append(stateOps, readOp{path: s.abs(PartitionStatePath(n, p))})
			refs = append(refs, stateRef{n, p})
		}
		out[n] = tr
	}
	if len(stateOps) == 0 {
		return out, nil
	}
	res, err = b.read(ctx, stateOps)
	if err != nil {
		return nil, err
	}
	for i, ref := range refs {
		tr := out[ref.topic]
		if tr.Err != nil {
			continue
		}
		st, ok, err := s.decodeStateRead(ref.topic, ref.partition, res[i])
		switch {
		case errors.Is(err, ErrMalformed):
			tr.Err = err
			out[ref.topic] = tr
		case err != nil:
			return nil, err
		case ok:
			tr.States[ref.partition] = st
		}
	}
	return out, nil
}

// eachBounded calls fn on every item, at most limit at a time, and returns
// the results and errors in the items' order. The reads of one Store go
// out together on its one session (ZooKeeper answers them in order), as
// Kafka's KafkaZkClient sends its reads asynchronously: a new controller of
// thousands of partitions would otherwise wait a round trip for each.
func eachBounded[T, R any](items []T, limit int, fn func(T) (R, error)) ([]R, []error) {
	out := make([]R, len(items))
	errs := make([]error, len(items))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, it := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i], errs[i] = fn(it)
		})
	}
	wg.Wait()
	return out, errs
}

// readTopicsEach is ReadTopics one getData per znode.
func (s *Store) readTopicsEach(ctx context.Context, names []string) (map[string]TopicRead, error) {
	reads, errs := eachBounded(names, topicReaders, func(n string) (TopicRead, error) { return s.readTopic(ctx, n) })
	out := make(map[string]TopicRead, len(names))
	for i, n := range names {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out[n] = reads[i]
	}
	return out, nil
}

// readTopic reads one topic on the Store's session; the topic's own
// failures are in the TopicRead, others are the error.
func (s *Store) readTopic(ctx context.Context, name string) (TopicRead, error) {
	var tr TopicRead
	var err error
	own := func(err error) bool {
		return errors.Is(err, ErrTopicNotFound) || errors.Is(err, ErrNoNode) || errors.Is(err, ErrMalformed)
	}
	if tr.Assignment, err = s.TopicAssignment(ctx, name); err != nil {
		if errors.Is(err, ErrNoNode) {
			err = fmt.Errorf("topic %q: %w", name, ErrTopicNotFound)
		}
		if own(err) {
			return TopicRead{Err: err}, nil
		}
		return TopicRead{}, err
	}
	var partitions []int32
	names, err := s.children(ctx, TopicPartitionsPath(name))
	if err == nil {
		partitions, err = s.partitionNumbers(name, names)
	}
	if err == nil {
		tr.States, err = s.partitionStatesEach(ctx, name, partitions)
	}
	if err == nil {
		tr.Configs, err = s.TopicConfig(ctx, name)
	}
	if own(err) {
		tr.Err = err
		return tr, nil
	}
	return tr, err
}
