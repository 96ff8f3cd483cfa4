package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v0-4
//
// Behaviour:
// * TOPIC: every topic config kbroker knows, with its effective value.
//   A topic override has source DYNAMIC_TOPIC_CONFIG; otherwise the value
//   comes from the broker property named in config.TopicConfigs, with
//   source STATIC_BROKER_CONFIG when that property differs from its
//   default (set in the file or by --override), else DEFAULT_CONFIG.
//   Synonyms list the override, then the broker property, as Kafka does.
//   Invalid name: INVALID_TOPIC_EXCEPTION; unknown topic:
//   UNKNOWN_TOPIC_OR_PARTITION.
// * BROKER: this broker's id lists the broker properties (all read-only:
//   there are no dynamic broker configs), sourced as above; an unset
//   property (Kafka's null) has a null value. The empty name asks for the
//   cluster-wide dynamic defaults, of which kbroker has none, so it is
//   answered with no configs, as Kafka with none set. Another broker's
//   id, or a name that is not a number: INVALID_REQUEST.
// * ConfigNames filters the configs (null: all).
// * Other resource types: INVALID_REQUEST.
// * Authorization (ConfigHelper.handleDescribeConfigsRequest):
//   DescribeConfigs (or AlterConfigs) on the topic for a topic, on the
//   cluster for a broker, else TOPIC_AUTHORIZATION_FAILED or
//   CLUSTER_AUTHORIZATION_FAILED and no configs, whether or not the topic
//   exists.
//
// Version notes:
// * v1: IncludeSynonyms; Source and ConfigSynonyms in the response
//   (v0 has only IsDefault)
// * v2: ThrottleMillis
// * v3: IncludeDocumentation; ConfigType and Documentation
// * v4: flexible versions

func init() { registerAPI(kmsg.DescribeConfigs.Int16(), 0, 4, handleDescribeConfigs) }

func handleDescribeConfigs(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	opts := describeOptions{synonyms: req.IncludeSynonyms, docs: req.IncludeDocumentation}

	for _, rr := range req.Resources {
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType = rr.ResourceType
		r.ResourceName = rr.ResourceName
		var (
			configs []kmsg.DescribeConfigsResponseResourceConfig
			err     error
		)
		err = b.configsRefusal(rc, acl.OpDescribeConfigs, rr.ResourceType, rr.ResourceName)
		switch {
		case err != nil:
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			configs, err = b.describeTopicConfigs(rr.ResourceName, opts)
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			configs, err = b.describeBrokerConfigs(rr.ResourceName, opts)
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			configs, err = b.describeGroupConfigs(ctx, rr.ResourceName, opts) // share_group_configs.go
		default:
			err = fmt.Errorf("%w: describing configs is only supported for topics and brokers, not resource type %s", kerr.InvalidRequest, rr.ResourceType)
		}
		if err != nil {
			r.ErrorCode = protocol.ErrorCode(err)
			msg := err.Error()
			r.ErrorMessage = &msg
		} else {
			r.Configs = filterConfigs(configs, rr.ConfigNames)
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

// describeOptions are the request's per-request flags.
type describeOptions struct {
	synonyms bool // v1+
	docs     bool // v3+
}

// describedConfig is one config with its synonyms, most specific first;
// its source is the first synonym's.
type describedConfig struct {
	name     string
	value    string
	readOnly bool
	synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	info     topicConfigInfo
}

func synonym(name, value string, source kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name = name
	s.Value = &value
	s.Source = source
	return s
}

func (d describedConfig) entry(opts describeOptions) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = d.name
	value := d.value
	c.Value = &value
	c.ReadOnly = d.readOnly
	c.Source = kmsg.ConfigSourceDefaultConfig
	if len(d.synonyms) > 0 {
		c.Source = d.synonyms[0].Source
	}
	// v0's IsDefault: not set for this resource specifically.
	c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig || c.Source == kmsg.ConfigSourceStaticBrokerConfig
	if opts.synonyms {
		c.ConfigSynonyms = d.synonyms
	}
	c.ConfigType = d.info.typ
	if opts.docs && d.info.doc != "" {
		doc := d.info.doc
		c.Documentation = &doc
	}
	return c
}

// describeTopicConfigs lists a topic's effective configs.
func (b *Broker) describeTopicConfigs(topic string, opts describeOptions) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if err := protocol.ValidTopicName(topic); err != nil {
		return nil, err
	}
	t, ok := b.controller.Metadata().Topics[topic]
	if !ok {
		return nil, fmt.Errorf("%w: topic %q does not exist", kerr.UnknownTopicOrPartition, topic)
	}
	return topicConfigEntries(b.cfg, newBrokerProperties(b.cfg), t.Configs, opts), nil
}

// brokerProperties are the broker's effective properties by Kafka name and
// what is needed to describe them.
type brokerProperties struct {
	values   map[string]string
	defaults map[string]string // the values of config.Default()
	docs     map[string]string
}

func newBrokerProperties(cfg config.Config) brokerProperties {
	p := brokerProperties{
		values:   cfg.Properties(),
		defaults: config.Default().Properties(),
		docs:     make(map[string]string),
	}
	for _, d := range config.Docs() {
		p.docs[d.Name] = d.Doc
	}
	return p
}

// source is where a broker property's value comes from. config.Config
// does not record which keys were given, so a property is static when its
// value differs from the default: one set explicitly to its default value
// is reported as DEFAULT_CONFIG.
func (p brokerProperties) source(name string) kmsg.ConfigSource {
	if def, ok := p.defaults[name]; ok && def == p.values[name] {
		return kmsg.ConfigSourceDefaultConfig
	}
	return kmsg.ConfigSourceStaticBrokerConfig
}

// topicConfigEntries describes a topic's configs given the broker config,
// the broker's properties and the topic's overrides. Synonyms are Kafka's:
// the topic override (DYNAMIC_TOPIC_CONFIG), the broker property when set
// (STATIC_BROKER_CONFIG), then the property's default (DEFAULT_CONFIG);
// a config without a broker property has only its override.
func topicConfigEntries(cfg config.Config, props brokerProperties, overrides map[string]string, opts describeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(config.TopicConfigs()))
	defaults := config.Default()
	for _, def := range config.TopicConfigs() {
		name := def.Name
		value, set := overrides[name]
		if !set {
			value = def.Default(cfg)
		}
		d := describedConfig{name: name, value: value, info: topicConfigInfoFor(name)}
		if set {
			d.synonyms = append(d.synonyms, synonym(name, value, kmsg.ConfigSourceDynamicTopicConfig))
		}
		if def.BrokerSource != "" {
			if _, known := props.values[def.BrokerSource]; known && props.source(def.BrokerSource) == kmsg.ConfigSourceStaticBrokerConfig {
				d.synonyms = append(d.synonyms, synonym(def.BrokerSource, def.Default(cfg), kmsg.ConfigSourceStaticBrokerConfig))
			}
			d.synonyms = append(d.synonyms, synonym(def.BrokerSource, def.Default(defaults), kmsg.ConfigSourceDefaultConfig))
		}
		out = append(out, d.entry(opts))
	}
	return out
}

// describeBrokerConfigs lists this broker's properties.
func (b *Broker) describeBrokerConfigs(name string, opts describeOptions) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if err := b.checkBrokerResource(name); err != nil {
		return nil, err
	}
	md := b.controller.Metadata()
	if name == "" {
		// The cluster-wide dynamic broker defaults that are set.
		return dynamicBrokerConfigEntries(md.BrokerConfigs[controller.DefaultBrokerEntity], nil, true, opts), nil
	}
	entries := brokerConfigEntries(newBrokerProperties(b.cfg), opts)
	id := strconv.Itoa(int(b.self.ID))
	if name != id { // the controller describing another broker (checked above)
		id = name
	}
	entries = append(entries, dynamicBrokerConfigEntries(md.BrokerConfigs[id], md.BrokerConfigs[controller.DefaultBrokerEntity], false, opts)...)
	slices.SortFunc(entries, func(x, y kmsg.DescribeConfigsResponseResourceConfig) int { return strings.Compare(x.Name, y.Name) })
	return entries, nil
}

// dynamicBrokerConfigEntries describes the dynamic broker configs: for a
// broker, each of them, from its own value (DYNAMIC_BROKER_CONFIG), else
// the cluster-wide one (DYNAMIC_DEFAULT_BROKER_CONFIG), else Kafka's
// default, with those synonyms in that order; for the cluster-wide
// resource (onlySet), only the defaults that are set.
func dynamicBrokerConfigEntries(own, clusterDefault map[string]string, onlySet bool, opts describeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	out := []kmsg.DescribeConfigsResponseResourceConfig{}
	for _, def := range config.DynamicBrokerConfigs() {
		var syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		if v, ok := own[def.Name]; ok {
			syns = append(syns, synonym(def.Name, v, kmsg.ConfigSourceDynamicBrokerConfig))
		}
		if onlySet && len(syns) == 0 {
			continue
		}
		if v, ok := clusterDefault[def.Name]; ok {
			syns = append(syns, synonym(def.Name, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig))
		}
		if onlySet {
			syns[0].Source = kmsg.ConfigSourceDynamicDefaultBrokerConfig
		}
		syns = append(syns, synonym(def.Name, def.Default, kmsg.ConfigSourceDefaultConfig))
		d := describedConfig{name: def.Name, value: *syns[0].Value, synonyms: syns,
			info: topicConfigInfo{typ: configTypes[def.Type], doc: def.Doc}}
		out = append(out, d.entry(opts))
	}
	return out
}

// brokerConfigEntries describes broker properties: read-only, each its
// own only synonym.
func brokerConfigEntries(props brokerProperties, opts describeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	// Types of broker properties that supply a topic default.
	types := make(map[string]kmsg.ConfigType)
	for _, d := range config.TopicConfigs() {
		if d.BrokerSource != "" {
			types[d.BrokerSource] = topicConfigInfoFor(d.Name).typ
		}
	}
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(props.values))
	for _, name := range slices.Sorted(maps.Keys(props.values)) {
		value := props.values[name]
		d := describedConfig{
			name:     name,
			value:    value,
			readOnly: true,
			synonyms: []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{synonym(name, value, props.source(name))},
			info:     topicConfigInfo{typ: types[name], doc: props.docs[name]},
		}
		c := d.entry(opts)
		if value == "" { // unset: Kafka's null
			c.Value = nil
			c.ConfigSynonyms = nil
			if opts.synonyms {
				c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{}
			}
		}
		out = append(out, c)
	}
	return out
}

// filterConfigs keeps the configs named in names; nil names keeps all.
func filterConfigs(configs []kmsg.DescribeConfigsResponseResourceConfig, names []string) []kmsg.DescribeConfigsResponseResourceConfig {
	if names == nil {
		return configs
	}
	return slices.DeleteFunc(configs, func(c kmsg.DescribeConfigsResponseResourceConfig) bool {
		return !slices.Contains(names, c.Name)
	})
}
