package server

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds what AlterConfigs (33) and IncrementalAlterConfigs (44)
// share: checking a config resource, turning a request's entries into a
// topic's new overrides, validating them, and handing them to the
// controller. The handlers differ only in how they compute the new overrides.

// configChange computes a topic's new overrides from its current ones
// (a private copy the function may modify and return) and the effective
// values (overrides merged over the broker defaults).
type configChange func(current, effective map[string]string) (map[string]string, error)

// alterConfigResource applies change to one config resource of an
// AlterConfigs or IncrementalAlterConfigs request. entries is how many
// config entries the resource carries (broker resources accept none).
func (b *Broker) alterConfigResource(rtype kmsg.ConfigResourceType, name string, entries int, change configChange, validateOnly bool) error {
	switch rtype {
	case kmsg.ConfigResourceTypeTopic:
		return b.changeTopicConfigs(name, change, validateOnly)
	case kmsg.ConfigResourceTypeBroker:
		if err := b.checkBrokerResource(name); err != nil {
			return err
		}
		return b.changeBrokerConfigs(name, change, validateOnly)
	default:
		return fmt.Errorf("%w: altering configs is only supported for topics and brokers, not resource type %s", kerr.InvalidRequest, rtype)
	}
}

// checkBrokerResource checks a BROKER resource name: empty (the cluster-wide
// default) or this broker's id, as Kafka's ConfigHelper. The controller
// also takes the id of any broker in its view: another broker forwards
// the changes of its own dynamic configs there (brokerconfigs.go).
func (b *Broker) checkBrokerResource(name string) error {
	if name == "" {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return fmt.Errorf("%w: broker id must be an integer, but it is: %q", kerr.InvalidRequest, name)
	}
	if int32(id) == b.self.ID {
		return nil
	}
	if b.controller != nil && b.controller.IsController() && knownBroker(b.controller.Metadata(), int32(id)) {
		return nil
	}
	return fmt.Errorf("%w: unexpected broker id, expected %d or empty string, but received %s", kerr.InvalidRequest, b.self.ID, name)
}

// changeTopicConfigs replaces topic's overrides with what change computes,
// after validating every resulting override. With validateOnly it changes
// nothing. The broker's metadata subscriber applies the new settings to the
// topic's partitions before the controller returns.
func (b *Broker) changeTopicConfigs(topic string, change configChange, validateOnly bool) error {
	apply := func(overrides map[string]string) (map[string]string, error) {
		current := maps.Clone(overrides)
		if current == nil {
			current = map[string]string{}
		}
		next, err := change(current, b.cfg.EffectiveTopicConfig(overrides))
		if err != nil {
			return nil, err
		}
		return b.normalizeTopicOverrides(next)
	}
	// The controller runs the read-modify-write under its lock, so two
	// concurrent incremental changes cannot lose one another.
	err := b.controller.UpdateTopicConfigs(topic, apply, validateOnly)
	if !errors.Is(err, kerr.NotController) {
		return err
	}
	// Another broker is the controller: Kafka's ZooKeeper-mode brokers
	// change a topic's configs wherever the request lands, so this one
	// computes them from its view and forwards them.
	t := b.controller.Metadata().Topics[topic]
	if t == nil {
		return fmt.Errorf("%w: topic %q does not exist", kerr.UnknownTopicOrPartition, topic)
	}
	next, err := apply(t.Configs)
	if err != nil || validateOnly {
		return err
	}
	return b.forwardConfigs(kmsg.ConfigResourceTypeTopic, topic, next, func(md *controller.Metadata) bool {
		nt := md.Topics[topic]
		return nt == nil || maps.Equal(nt.Configs, next) || (len(nt.Configs) == 0 && len(next) == 0)
	})
}

// normalizeTopicOverrides checks a topic's overrides as Kafka does and
// returns them in Kafka's canonical form; a refusal is INVALID_CONFIG with
// Kafka's message.
func (b *Broker) normalizeTopicOverrides(overrides map[string]string) (map[string]string, error) {
	out, err := b.cfg.NormalizeTopicOverrides(overrides)
	if err != nil {
		return nil, invalidConfig{err}
	}
	return out, nil
}

// invalidConfig is INVALID_CONFIG with Kafka's message alone (no code
// name prefix), as Kafka's ConfigException message.
type invalidConfig struct{ err error }

func (e invalidConfig) Error() string   { return e.err.Error() }
func (e invalidConfig) Unwrap() []error { return []error{kerr.InvalidConfig, e.err} }

// duplicateNames returns the names that occur more than once.
func duplicateNames(names []string) []string {
	seen := make(map[string]int, len(names))
	var dups []string
	for _, n := range names {
		seen[n]++
		if seen[n] == 2 {
			dups = append(dups, n)
		}
	}
	return dups
}

// configResourceKey identifies a resource, to find resources named twice
// in one request.
// configResourceChange is one resource of an AlterConfigs or
// IncrementalAlterConfigs request.
type configResourceChange struct {
	rtype   kmsg.ConfigResourceType
	name    string
	entries int
	change  configChange
}

// alterConfigResources applies each resource's change and returns its
// error (nil for success), in request order; a resource named twice fails
// every copy, as Kafka does. refused, asked after the duplicate check,
// returns why the principal may not change a resource, nil when it may (a
// nil refused lets every change through).
func (b *Broker) alterConfigResources(resources []configResourceChange, validateOnly bool, refused func(kmsg.ConfigResourceType, string) error) []error {
	seen := make(map[configResourceKey]int, len(resources))
	for _, r := range resources {
		seen[configResourceKey{r.rtype, r.name}]++
	}
	errs := make([]error, len(resources))
	for i, r := range resources {
		if seen[configResourceKey{r.rtype, r.name}] > 1 {
			errs[i] = errDuplicateResource
			continue
		}
		if refused != nil {
			if errs[i] = refused(r.rtype, r.name); errs[i] != nil {
				continue
			}
		}
		errs[i] = b.alterConfigResource(r.rtype, r.name, r.entries, r.change, validateOnly)
	}
	return errs
}

// errorCodeAndMessage is a response's error code and message for err.
func errorCodeAndMessage(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	return protocol.ErrorCode(err), &msg
}

type configResourceKey struct {
	rtype kmsg.ConfigResourceType
	name  string
}

// errDuplicateResource answers every copy of a resource named twice in one
// request, as Kafka does: applying one copy and not the other would
// depend on order.
var errDuplicateResource = fmt.Errorf("%w: each resource must appear at most once in a request", kerr.InvalidRequest)

// replaceConfigs is AlterConfigs' change: the request's entries become the
// whole set of overrides. Entries with a null value are skipped, as Kafka's
// ZooKeeper-mode broker does.
func replaceConfigs(entries []kmsg.AlterConfigsRequestResourceConfig) configChange {
	return func(_, _ map[string]string) (map[string]string, error) {
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name
		}
		if dups := duplicateNames(names); len(dups) > 0 {
			return nil, fmt.Errorf("%w: error due to duplicate config keys: %s", kerr.InvalidRequest, strings.Join(dups, ", "))
		}
		next := make(map[string]string, len(entries))
		for _, e := range entries {
			if e.Value != nil {
				next[e.Name] = *e.Value
			}
		}
		return next, nil
	}
}

// incrementalConfigs is IncrementalAlterConfigs' change: SET, DELETE,
// APPEND and SUBTRACT applied to the current overrides.
func incrementalConfigs(ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) configChange {
	return func(current, effective map[string]string) (map[string]string, error) {
		return applyConfigOps(current, effective, ops)
	}
}

// applyConfigOps applies IncrementalAlterConfigs operations to a topic's
// overrides (modified in place and returned), as Kafka's ZooKeeper-mode
// ConfigAdminManager does:
//   - SET sets the override; DELETE removes it (deleting an override that is
//     not set is no error);
//   - APPEND and SUBTRACT work on list configs only (INVALID_REQUEST for
//     others, INVALID_CONFIG for unknown names). They start from the
//     override, else the effective default; APPEND adds the values not
//     already present, SUBTRACT removes the given values;
//   - a name may appear only once per resource (INVALID_REQUEST).
//
// Values are validated afterwards, on the resulting overrides.
func applyConfigOps(overrides, effective map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = op.Name
	}
	if dups := duplicateNames(names); len(dups) > 0 {
		return nil, fmt.Errorf("%w: error due to duplicate config keys: %s", kerr.InvalidRequest, strings.Join(dups, ", "))
	}
	for _, op := range ops {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return nil, fmt.Errorf("%w: null value not supported for config %s", kerr.InvalidRequest, op.Name)
			}
			overrides[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(overrides, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			verb := "append"
			if op.Op == kmsg.IncrementalAlterConfigOpSubtract {
				verb = "subtract"
			}
			def, known := config.TopicConfigDefFor(op.Name)
			if !known {
				return nil, invalidConfig{&config.TopicConfigError{Message: "Unknown topic config name: " + op.Name}}
			}
			if def.Type != "LIST" {
				return nil, fmt.Errorf("%w: config value %s is not allowed for config key: %s", kerr.InvalidRequest, verb, op.Name)
			}
			if op.Value == nil {
				return nil, fmt.Errorf("%w: null value not supported for config %s", kerr.InvalidRequest, op.Name)
			}
			old, ok := overrides[op.Name]
			if !ok {
				old = effective[op.Name]
			}
			list := config.SplitList(old)
			for _, v := range config.SplitList(*op.Value) {
				if op.Op == kmsg.IncrementalAlterConfigOpAppend {
					if !slices.Contains(list, v) {
						list = append(list, v)
					}
				} else {
					list = slices.DeleteFunc(list, func(s string) bool { return s == v })
				}
			}
			overrides[op.Name] = strings.Join(list, ",")
		default:
			return nil, fmt.Errorf("%w: unknown config operation %d for config %s", kerr.InvalidRequest, op.Op, op.Name)
		}
	}
	return overrides, nil
}

// configTypes maps Kafka's ConfigDef type names to DescribeConfigs' types.
var configTypes = map[string]kmsg.ConfigType{
	"BOOLEAN": kmsg.ConfigTypeBoolean,
	"STRING":  kmsg.ConfigTypeString,
	"INT":     kmsg.ConfigTypeInt,
	"SHORT":   kmsg.ConfigTypeShort,
	"LONG":    kmsg.ConfigTypeLong,
	"DOUBLE":  kmsg.ConfigTypeDouble,
	"LIST":    kmsg.ConfigTypeList,
	"CLASS":   kmsg.ConfigTypeClass,
}

// topicConfigInfo is what DescribeConfigs v3+ says about a config beyond
// its value: Kafka's type and a short documentation line.
type topicConfigInfo struct {
	typ kmsg.ConfigType
	doc string
}

// topicConfigInfoFor returns the type and documentation of a topic config.
func topicConfigInfoFor(name string) topicConfigInfo {
	d, _ := config.TopicConfigDefFor(name)
	return topicConfigInfo{typ: configTypes[d.Type], doc: d.Doc}
}

// knownBroker reports whether the view lists broker id.
func knownBroker(md *controller.Metadata, id int32) bool {
	_, ok := md.Broker(id)
	return ok
}
