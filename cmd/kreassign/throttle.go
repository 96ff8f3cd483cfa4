//lint:file-ignore ST1005 messages are kafka-reassign-partitions.sh's, word for word

package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kbroker/kbroker/internal/rebalance"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Replication throttles as kafka-reassign-partitions.sh sets them
// (ReassignPartitionsCommand.modifyTopicThrottles and
// modifyInterBrokerThrottle): --execute --throttle N lists, on each moving
// partition's topic, its current replicas as leader-throttled and the
// replicas it adds as follower-throttled, and sets
// leader.replication.throttled.rate and follower.replication.throttled.rate
// to N on every broker the moves touch; --verify removes both once every
// partition is done (unless --preserve-throttles).

// throttleKeys are the broker configs a throttle sets and a clear removes.
var throttleKeys = []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate", "replica.alter.log.dirs.io.max.bytes.per.second"}

// topicThrottleKeys are the topic configs naming throttled replicas.
var topicThrottleKeys = []string{"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}

// throttledReplicas computes, per topic, the leader-throttled replicas
// (every current replica of a moving partition) and the follower-throttled
// ones (the replicas a move adds), as "partition:broker" lists in
// partition then broker order; and the brokers the moves touch.
func throttledReplicas(before rebalance.Assignment, targets []target) (leader, follower map[string]string, brokers []int32) {
	lead, follow := map[string][]string{}, map[string][]string{}
	touched := map[int32]bool{}
	ts := slices.Clone(targets)
	sortTargets(ts)
	for _, tg := range ts {
		current := before[tg.Topic][tg.Partition]
		if slices.Equal(current, tg.Replicas) {
			continue // not moving
		}
		for _, b := range current {
			lead[tg.Topic] = append(lead[tg.Topic], fmt.Sprintf("%d:%d", tg.Partition, b))
			touched[b] = true
		}
		for _, b := range tg.Replicas {
			touched[b] = true
			if !slices.Contains(current, b) {
				follow[tg.Topic] = append(follow[tg.Topic], fmt.Sprintf("%d:%d", tg.Partition, b))
			}
		}
	}
	leader, follower = map[string]string{}, map[string]string{}
	for t, l := range lead {
		leader[t] = strings.Join(l, ",")
	}
	for t, l := range follow {
		follower[t] = strings.Join(l, ",")
	}
	return leader, follower, slices.Sorted(maps.Keys(touched))
}

// setThrottles applies the throttle of --throttle to the moves of targets.
func (t *tool) setThrottles(ctx context.Context, before rebalance.Assignment, targets []target) error {
	leader, follower, brokers := throttledReplicas(before, targets)
	for _, topic := range slices.Sorted(maps.Keys(leader)) {
		cfgs := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: topicThrottleKeys[0], Value: kadm.StringPtr(leader[topic])}}
		if f, ok := follower[topic]; ok {
			cfgs = append(cfgs, kadm.AlterConfig{Op: kadm.SetConfig, Name: topicThrottleKeys[1], Value: kadm.StringPtr(f)})
		}
		if err := alterOK(t.adm.AlterTopicConfigs(ctx, cfgs, topic)); err != nil {
			return fmt.Errorf("setting the throttled replicas of topic %s: %w", topic, err)
		}
	}
	rate := strconv.FormatInt(t.o.throttle, 10)
	for _, b := range brokers {
		cfgs := []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: throttleKeys[0], Value: kadm.StringPtr(rate)},
			{Op: kadm.SetConfig, Name: throttleKeys[1], Value: kadm.StringPtr(rate)},
		}
		if err := alterOK(t.adm.AlterBrokerConfigs(ctx, cfgs, b)); err != nil {
			return fmt.Errorf("setting the throttle rate of broker %d: %w", b, err)
		}
	}
	fmt.Fprintf(t.out, "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.\n")
	fmt.Fprintf(t.out, "The inter-broker throttle limit was set to %d B/s\n", t.o.throttle)
	return nil
}

// clearThrottles removes the throttle rates from every broker and the
// throttled replicas from the topics of targets (Kafka's
// clearAllThrottles).
func (t *tool) clearThrottles(ctx context.Context, brokers []int32, targets []target) error {
	fmt.Fprintf(t.out, "Clearing broker-level throttles on brokers %s\n", joinIDs(brokers))
	for _, b := range brokers {
		var cfgs []kadm.AlterConfig
		for _, k := range throttleKeys {
			cfgs = append(cfgs, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
		if err := alterOK(t.adm.AlterBrokerConfigs(ctx, cfgs, b)); err != nil {
			return fmt.Errorf("clearing the throttle rates of broker %d: %w", b, err)
		}
	}
	topics := targetTopics(targets)
	slices.Sort(topics)
	fmt.Fprintf(t.out, "Clearing topic-level throttles on topic(s) %s\n", strings.Join(topics, ","))
	for _, topic := range topics {
		var cfgs []kadm.AlterConfig
		for _, k := range topicThrottleKeys {
			cfgs = append(cfgs, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
		err := alterOK(t.adm.AlterTopicConfigs(ctx, cfgs, topic))
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			continue // deleted meanwhile: nothing left to clear
		}
		if err != nil {
			return fmt.Errorf("clearing the throttled replicas of topic %s: %w", topic, err)
		}
	}
	return nil
}

// alterOK folds an alter-configs answer into one error.
func alterOK(resps kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return err
	}
	for _, r := range resps {
		if r.Err != nil {
			return fmt.Errorf("%w (%s)", r.Err, errorName(r.Err, r.ErrMessage))
		}
	}
	return nil
}
