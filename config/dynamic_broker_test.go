package config

import (
	"strings"
	"testing"
)

func TestCheckDynamicBrokerConfigs(t *testing.T) {
	for _, tc := range []struct {
		configs map[string]string
		wantErr string
	}{
		{map[string]string{}, ""},
		{map[string]string{"leader.replication.throttled.rate": "1048576", "follower.replication.throttled.rate": "0"}, ""},
		{map[string]string{"leader.replication.throttled.rate": "-1"}, "at least 0"},
		{map[string]string{"follower.replication.throttled.rate": "fast"}, "LONG"},
		{map[string]string{"log.dirs": "/tmp", "num.io.threads": "4"}, "cannot update these configs dynamically: log.dirs, num.io.threads"},
	} {
		err := CheckDynamicBrokerConfigs(tc.configs)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tc.configs, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: %v, want an error with %q", tc.configs, err, tc.wantErr)
		}
	}
}
