package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every advertised range must be one kmsg can decode, and start at 0 so
// old clients (librdkafka before 2.11, kafka-python) find the versions they
// probe with.
func TestAdvertisedVersionsDecodable(t *testing.T) {
	for _, a := range supportedAPIs() {
		req := kmsg.RequestForKey(a.key)
		if req == nil {
			t.Fatalf("API %d advertised but unknown to kmsg", a.key)
		}
		if a.maxVersion > req.MaxVersion() {
			t.Errorf("%s: advertised max %d above kmsg's %d", kmsg.NameForKey(a.key), a.maxVersion, req.MaxVersion())
		}
		if a.minVersion != 0 {
			t.Errorf("%s: min version %d, want 0", kmsg.NameForKey(a.key), a.minVersion)
		}
	}
}

// librdkafka before 2.11 checks single versions, not ranges (DESIGN.md §6).
func TestLibrdkafkaVersionProbes(t *testing.T) {
	probes := map[kmsg.Key]int16{
		kmsg.Produce: 0, kmsg.Fetch: 4, kmsg.ApiVersions: 0, kmsg.ListOffsets: 1,
		kmsg.Metadata: 0, kmsg.InitProducerID: 0, kmsg.FindCoordinator: 0,
	}
	for key, v := range probes {
		minV, maxV, ok := versionRange(key.Int16())
		if !ok || v < minV || v > maxV {
			t.Errorf("%s v%d not inside the advertised range [%d, %d] (ok=%v)", kmsg.NameForKey(key.Int16()), v, minV, maxV, ok)
		}
	}
}

// Telemetry APIs must stay unadvertised until implemented (DESIGN.md §6).
func TestUnimplementedAPIsNotAdvertised(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.GetTelemetrySubscriptions, kmsg.PushTelemetry} {
		if _, _, ok := versionRange(key.Int16()); ok {
			t.Errorf("%s is advertised but not implemented", kmsg.NameForKey(key.Int16()))
		}
	}
}
