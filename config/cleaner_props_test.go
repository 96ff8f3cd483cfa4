package config

import (
	"math"
	"testing"
	"time"
)

func TestLogCleanerProperties(t *testing.T) {
	d := Default()
	if !d.LogCleanerEnable || d.LogCleanerThreads != 1 || d.LogCleanerDedupeBufferSize != 128<<20 ||
		d.LogCleanerIOMaxBytesPerSecond != math.MaxFloat64 || d.LogCleanerBackoff != 15*time.Second {
		t.Fatalf("defaults %+v", d)
	}
	c, _, err := Load("", []string{"log.cleaner.enable=false", "log.cleaner.threads=3", "log.cleaner.dedupe.buffer.size=1048576",
		"log.cleaner.io.max.bytes.per.second=5e6", "log.cleaner.backoff.ms=250", "log.cleaner.min.cleanable.ratio=0.1",
		"log.cleaner.delete.retention.ms=1000", "log.cleaner.min.compaction.lag.ms=5", "log.cleaner.max.compaction.lag.ms=60000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.LogCleanerEnable || c.LogCleanerThreads != 3 || c.LogCleanerDedupeBufferSize != 1<<20 || c.LogCleanerIOMaxBytesPerSecond != 5e6 ||
		c.LogCleanerBackoff != 250*time.Millisecond || c.LogCleanerMinCleanableRatio != 0.1 {
		t.Fatalf("loaded %+v", c)
	}
	// The topic configs' defaults follow the broker's.
	eff := c.EffectiveTopicConfig(nil)
	for name, want := range map[string]string{"min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "1000",
		"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "60000"} {
		if eff[name] != want {
			t.Errorf("%s = %q, want %q", name, eff[name], want)
		}
	}
	if eff := Default().EffectiveTopicConfig(nil); eff["min.cleanable.dirty.ratio"] != "0.5" || eff["delete.retention.ms"] != "86400000" ||
		eff["max.compaction.lag.ms"] != "9223372036854775807" {
		t.Errorf("Kafka's defaults: %v %v %v", eff["min.cleanable.dirty.ratio"], eff["delete.retention.ms"], eff["max.compaction.lag.ms"])
	}
	if _, _, err := Load("", []string{"log.cleaner.min.cleanable.ratio=1.5"}); err == nil {
		t.Error("ratio 1.5 accepted")
	}
}
