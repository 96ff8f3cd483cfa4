package server

// The GROUP config resource (KIP-848 / KIP-932 dynamic group configs) of
// DescribeConfigs and IncrementalAlterConfigs: stored by the group's
// coordinator (coordinator/share_group_config.go). A broker that does not
// coordinate the group forwards the resource to the coordinator (as its
// own single-resource request) after checking the client's authorization
// itself. Names and values are Kafka's GroupConfig: unknown names and bad
// values answer INVALID_CONFIG, APPEND/SUBTRACT INVALID_REQUEST (no group
// config is a list). Described values are the group's override (source
// GROUP_CONFIG) else the broker's group.* default (DEFAULT_CONFIG).
//
// What kbroker honours: share.auto.offset.reset (latest, earliest,
// by_duration:<ISO-8601 duration>), share.record.lock.duration.ms,
// share.isolation.level, share.delivery.count.limit and
// share.partition.max.record.locks, read when a leader loads a share
// partition and when a share session opens on it; share.session.timeout.ms and
// share.heartbeat.interval.ms by the coordinator.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/coordinator"
	"github.com/kbroker/kbroker/internal/isoduration"
)

// groupConfigDef is one group config: its type, the broker default and
// its value check.
type groupConfigDef struct {
	typ   kmsg.ConfigType
	def   func(b *Broker) string
	check func(v string) error
}

func intAtLeast(lo int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < lo {
			return fmt.Errorf("must be an integer >= %d", lo)
		}
		return nil
	}
}

func intBetween(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be an integer from %d to %d", lo, hi)
		}
		return nil
	}
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, ok := range vals {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

// byDurationPrefix starts a share.auto.offset.reset of the by_duration
// kind (KIP-1106): by_duration:<ISO-8601 duration>.
const byDurationPrefix = "by_duration:"

// checkShareAutoOffsetReset is Kafka's ShareGroupAutoOffsetResetStrategy
// validator: latest, earliest, or by_duration with a duration that is
// not negative.
func checkShareAutoOffsetReset(v string) error {
	if _, ok, err := byDuration(v); ok {
		return err
	}
	return oneOf("latest", "earliest")(v)
}

// byDuration reads a share.auto.offset.reset of the by_duration kind: ok
// is false for another kind, err set for a malformed or negative duration.
func byDuration(v string) (d time.Duration, ok bool, err error) {
	rest, ok := strings.CutPrefix(v, byDurationPrefix)
	if !ok {
		return 0, false, nil
	}
	if d, err = isoduration.Parse(rest); err != nil {
		return 0, true, fmt.Errorf("must be 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>': %v", err)
	}
	if d < 0 {
		return 0, true, errors.New("a negative by_duration is not supported")
	}
	return d, true, nil
}

func msString(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

var groupConfigDefs = map[string]groupConfigDef{
	"consumer.session.timeout.ms":    {kmsg.ConfigTypeInt, func(b *Broker) string { return msString(b.cfg.GroupConsumerSessionTimeout) }, intAtLeast(1)},
	"consumer.heartbeat.interval.ms": {kmsg.ConfigTypeInt, func(b *Broker) string { return msString(b.cfg.GroupConsumerHeartbeatInterval) }, intAtLeast(1)},
	"share.session.timeout.ms":       {kmsg.ConfigTypeInt, func(b *Broker) string { return msString(b.cfg.GroupShareSessionTimeout) }, intAtLeast(1)},
	"share.heartbeat.interval.ms":    {kmsg.ConfigTypeInt, func(b *Broker) string { return msString(b.cfg.GroupShareHeartbeatInterval) }, intAtLeast(1)},
	"share.record.lock.duration.ms":  {kmsg.ConfigTypeInt, func(b *Broker) string { return msString(b.cfg.GroupShareRecordLockDuration) }, intAtLeast(1000)},
	"share.auto.offset.reset":        {kmsg.ConfigTypeString, func(*Broker) string { return "latest" }, checkShareAutoOffsetReset},
	// Within the broker's own bounds, which are Kafka's defaults of
	// group.share.{min,max}.delivery.count.limit and
	// group.share.{min,max}.partition.max.record.locks.
	"share.delivery.count.limit":       {kmsg.ConfigTypeInt, func(b *Broker) string { return strconv.Itoa(int(b.cfg.GroupShareDeliveryCountLimit)) }, intBetween(2, 10)},
	"share.partition.max.record.locks": {kmsg.ConfigTypeInt, func(b *Broker) string { return strconv.Itoa(int(b.cfg.GroupSharePartitionMaxLocks)) }, intBetween(100, 10000)},
	"share.isolation.level":            {kmsg.ConfigTypeString, func(*Broker) string { return "read_uncommitted" }, oneOf("read_uncommitted", "read_committed")},
}

// validateGroupConfigOps turns IncrementalAlterConfigs operations on a
// group into changes, with Kafka's errors.
func validateGroupConfigOps(ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) ([]coordinator.ConfigChange, error) {
	seen := map[string]bool{}
	var out []coordinator.ConfigChange
	for _, op := range ops {
		if seen[op.Name] {
			return nil, fmt.Errorf("%w: config %s named twice", kerr.InvalidRequest, op.Name)
		}
		seen[op.Name] = true
		def, ok := groupConfigDefs[op.Name]
		if !ok {
			return nil, fmt.Errorf("%w: unknown group config name: %s", kerr.InvalidConfig, op.Name)
		}
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return nil, fmt.Errorf("%w: null value for %s", kerr.InvalidRequest, op.Name)
			}
			if err := def.check(*op.Value); err != nil {
				return nil, fmt.Errorf("%w: invalid value %s for %s: %v", kerr.InvalidConfig, *op.Value, op.Name, err)
			}
			out = append(out, coordinator.ConfigChange{Name: op.Name, Value: op.Value})
		case kmsg.IncrementalAlterConfigOpDelete:
			out = append(out, coordinator.ConfigChange{Name: op.Name})
		default:
			return nil, fmt.Errorf("%w: operation %d on %s, which is not a list", kerr.InvalidRequest, op.Op, op.Name)
		}
	}
	return out, nil
}

// alterGroupConfigs applies one GROUP resource of an
// IncrementalAlterConfigs (authorized by the caller).
func (b *Broker) alterGroupConfigs(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	if rr.ResourceName == "" {
		return fmt.Errorf("%w: empty group id", kerr.InvalidGroupID)
	}
	changes, err := validateGroupConfigOps(rr.Configs)
	if err != nil || validateOnly {
		return err
	}
	s := b.shareLeader().store.(*coordinatorShareStore)
	return s.retry(ctx, func(ctx context.Context) (int16, error) {
		coord, err := s.coordinatorOf(rr.ResourceName)
		if err != nil {
			return 0, err
		}
		if coord == b.self.ID {
			return b.groups.AlterGroupConfigs(ctx, rr.ResourceName, changes), nil
		}
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.Version = 1 // peer requests carry their version
		req.Resources = append(req.Resources, rr)
		kresp, err := s.peers.request(ctx, coord, req, true)
		if err != nil {
			return 0, err
		}
		resp := kresp.(*kmsg.IncrementalAlterConfigsResponse)
		if len(resp.Resources) != 1 {
			return 0, fmt.Errorf("%w: malformed forwarded answer", kerr.UnknownServerError)
		}
		return resp.Resources[0].ErrorCode, nil
	})
}

// groupConfigOverrides returns group's stored configs from its
// coordinator.
func (b *Broker) groupConfigOverrides(ctx context.Context, group string) (map[string]string, error) {
	s := b.shareLeader().store.(*coordinatorShareStore)
	var out map[string]string
	err := s.retry(ctx, func(ctx context.Context) (int16, error) {
		coord, err := s.coordinatorOf(group)
		if err != nil {
			return 0, err
		}
		if coord == b.self.ID {
			var code int16
			out, code = b.groups.GroupConfigs(group)
			return code, nil
		}
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4 // peer requests carry their version; v1+ answers each config's source
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, rr)
		kresp, err := s.peers.request(ctx, coord, req, true)
		if err != nil {
			return 0, err
		}
		resp := kresp.(*kmsg.DescribeConfigsResponse)
		if len(resp.Resources) != 1 {
			return 0, fmt.Errorf("%w: malformed forwarded answer", kerr.UnknownServerError)
		}
		if resp.Resources[0].ErrorCode != 0 {
			return resp.Resources[0].ErrorCode, nil
		}
		out = map[string]string{}
		for _, c := range resp.Resources[0].Configs {
			if c.Source == kmsg.ConfigSourceGroupConfig && c.Value != nil {
				out[c.Name] = *c.Value
			}
		}
		return 0, nil
	})
	return out, err
}

// describeGroupConfigs answers one GROUP resource of a DescribeConfigs.
func (b *Broker) describeGroupConfigs(ctx context.Context, group string, opts describeOptions) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if group == "" {
		return nil, fmt.Errorf("%w: empty group id", kerr.InvalidGroupID)
	}
	overrides, err := b.groupConfigOverrides(ctx, group)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(groupConfigDefs))
	for n := range groupConfigDefs {
		names = append(names, n)
	}
	sortStrings(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, n := range names {
		def := groupConfigDefs[n]
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.ConfigType = n, def.typ
		v, ok := overrides[n]
		c.Source = kmsg.ConfigSourceGroupConfig
		if !ok {
			v, c.Source = def.def(b), kmsg.ConfigSourceDefaultConfig
		}
		c.Value = kmsg.StringPtr(v)
		if opts.synonyms {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = n, c.Value, c.Source
			c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
		}
		out = append(out, c)
	}
	return out, nil
}

// shareGroupSettings are what a leader loading a share partition reads
// from the group's configs.
type shareGroupSettings struct {
	earliest bool // share.auto.offset.reset=earliest
	// byDuration: share.auto.offset.reset=by_duration:<d> (resetBack
	// is d): the first record at most d old, else the end.
	byDuration    bool
	resetBack     time.Duration
	lockDuration  time.Duration // share.record.lock.duration.ms
	readCommitted bool          // share.isolation.level=read_committed
	deliveryLimit int16         // share.delivery.count.limit
	maxLocks      int64         // share.partition.max.record.locks
}

func (b *Broker) shareGroupSettings(ctx context.Context, group string) (shareGroupSettings, error) {
	st := shareGroupSettings{lockDuration: b.cfg.GroupShareRecordLockDuration,
		deliveryLimit: int16(b.cfg.GroupShareDeliveryCountLimit), maxLocks: int64(b.cfg.GroupSharePartitionMaxLocks)}
	overrides, err := b.groupConfigOverrides(ctx, group)
	if err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) {
			return st, nil
		}
		return st, err
	}
	reset := overrides["share.auto.offset.reset"]
	st.earliest = reset == "earliest"
	if d, ok, err := byDuration(reset); ok && err == nil {
		st.byDuration, st.resetBack = true, d
	}
	st.readCommitted = overrides["share.isolation.level"] == "read_committed"
	if n, err := strconv.ParseInt(overrides["share.delivery.count.limit"], 10, 16); err == nil && n > 0 {
		st.deliveryLimit = int16(n)
	}
	if n, err := strconv.ParseInt(overrides["share.partition.max.record.locks"], 10, 64); err == nil && n > 0 {
		st.maxLocks = n
	}
	if v, ok := overrides["share.record.lock.duration.ms"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			st.lockDuration = time.Duration(n) * time.Millisecond
		}
	}
	return st, nil
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
