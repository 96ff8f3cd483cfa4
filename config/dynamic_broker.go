package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// DynamicBrokerConfigDef is a broker config kbroker changes at run time
// from /config/brokers (AlterConfigs / IncrementalAlterConfigs on a BROKER
// resource), as Kafka's DynamicBrokerConfig does.
type DynamicBrokerConfigDef struct {
	Name    string
	Type    string // Kafka's ConfigDef type name
	Default string // Kafka's default, as DescribeConfigs shows it
	Doc     string
}

// unlimitedRate is Kafka's default for a replication throttle: Long.MaxValue
// bytes per second, which never throttles.
const unlimitedRate = math.MaxInt64

// dynamicBrokerConfigs are the broker configs kbroker applies dynamically.
// Kafka has more; kbroker refuses the others rather than store values it
// would not honour.
var dynamicBrokerConfigs = []DynamicBrokerConfigDef{
	{Name: "follower.replication.throttled.rate", Type: "LONG", Default: strconv.FormatInt(unlimitedRate, 10),
		Doc: "The bytes per second a follower may fetch for the replicas its topics list in follower.replication.throttled.replicas while they are out of sync."},
	{Name: "leader.replication.throttled.rate", Type: "LONG", Default: strconv.FormatInt(unlimitedRate, 10),
		Doc: "The bytes per second a leader may send to out-of-sync followers of the replicas its topics list in leader.replication.throttled.replicas."},
}

// DynamicBrokerConfigs lists the broker configs kbroker changes at run
// time, sorted by name.
func DynamicBrokerConfigs() []DynamicBrokerConfigDef { return slices.Clone(dynamicBrokerConfigs) }

// DynamicBrokerConfigDefFor returns the dynamic broker config named name.
func DynamicBrokerConfigDefFor(name string) (DynamicBrokerConfigDef, bool) {
	for _, d := range dynamicBrokerConfigs {
		if d.Name == name {
			return d, true
		}
	}
	return DynamicBrokerConfigDef{}, false
}

// CheckDynamicBrokerConfigs checks a broker entity's dynamic configs as
// Kafka's DynamicBrokerConfig.validate would, for the configs kbroker
// supports: every name is one of them, every value parses. The error
// says what is wrong (the caller answers INVALID_REQUEST with it, as
// Kafka's ZooKeeper-mode admin manager does).
func CheckDynamicBrokerConfigs(configs map[string]string) error {
	var unsupported []string
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		d, ok := DynamicBrokerConfigDefFor(name)
		if !ok {
			unsupported = append(unsupported, name)
			continue
		}
		if d.Type == "LONG" {
			v, err := strconv.ParseInt(strings.TrimSpace(configs[name]), 10, 64)
			if err != nil {
				return fmt.Errorf("invalid value %s for configuration %s: not a number of type LONG", configs[name], name)
			}
			if v < 0 {
				return fmt.Errorf("invalid value %s for configuration %s: value must be at least 0", configs[name], name)
			}
		}
	}
	if len(unsupported) > 0 {
		return fmt.Errorf("cannot update these configs dynamically: %s (kbroker changes only %s at run time; set others in server.properties or with --override and restart)",
			strings.Join(unsupported, ", "), strings.Join(dynamicBrokerConfigNames(), ", "))
	}
	return nil
}

func dynamicBrokerConfigNames() []string {
	out := make([]string, len(dynamicBrokerConfigs))
	for i, d := range dynamicBrokerConfigs {
		out[i] = d.Name
	}
	return out
}
