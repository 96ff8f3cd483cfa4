package config

import (
	"testing"
	"time"
)

// Kafka's client quota sampling: 11 windows of 1 s unless set.
func TestQuotaWindowProperties(t *testing.T) {
	if c := Default(); c.QuotaWindowNum != 11 || c.QuotaWindowSize != time.Second {
		t.Fatalf("defaults %d x %v", c.QuotaWindowNum, c.QuotaWindowSize)
	}
	c, unknown, err := Load("", []string{"quota.window.num=5", "quota.window.size.seconds=2"})
	if err != nil || len(unknown) != 0 || c.QuotaWindowNum != 5 || c.QuotaWindowSize != 2*time.Second {
		t.Fatalf("Load: %d x %v, %v %v", c.QuotaWindowNum, c.QuotaWindowSize, unknown, err)
	}
	for _, bad := range []string{"quota.window.num=0", "quota.window.size.seconds=0"} {
		if _, _, err := Load("", []string{bad}); err == nil {
			t.Errorf("%s accepted (Kafka: atLeast(1))", bad)
		}
	}
}
