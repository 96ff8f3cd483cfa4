package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestAuthorizerProperties(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides []string
		enabled   bool
		class     string
		super     []string
		everyone  bool
		errKey    string // the key a refusal names; "" for success
		errText   string
	}{
		{name: "default: no authorizer", enabled: false},
		{name: "empty class", overrides: []string{"authorizer.class.name="}},
		{name: "ZooKeeper-mode ACL authorizer", overrides: []string{"authorizer.class.name=kafka.security.authorizer.AclAuthorizer"},
			enabled: true, class: "kafka.security.authorizer.AclAuthorizer"},
		{name: "KRaft StandardAuthorizer means the same", overrides: []string{"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
			enabled: true, class: "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
		{name: "pre-2.4 SimpleAclAuthorizer", overrides: []string{"authorizer.class.name=kafka.security.auth.SimpleAclAuthorizer"},
			enabled: true, class: "kafka.security.auth.SimpleAclAuthorizer"},
		{name: "blanks around the class", overrides: []string{"authorizer.class.name=  kafka.security.authorizer.AclAuthorizer "},
			enabled: true, class: "kafka.security.authorizer.AclAuthorizer"},
		{name: "another authorizer is refused", overrides: []string{"authorizer.class.name=com.example.RangerAuthorizer"},
			errKey: "authorizer.class.name", errText: "only Kafka's ACL authorizer"},
		{name: "class names are case-sensitive", overrides: []string{"authorizer.class.name=kafka.security.authorizer.aclauthorizer"},
			errKey: "authorizer.class.name", errText: "kafka.security.authorizer.AclAuthorizer"},
		{name: "super users", overrides: []string{"super.users=User:admin; User:broker"},
			super: []string{"User:admin", "User:broker"}},
		{name: "super users, trailing separator", overrides: []string{"super.users=User:admin;"},
			super: []string{"User:admin"}},
		{name: "super user without a type", overrides: []string{"super.users=admin"},
			errKey: "super.users", errText: "admin"},
		{name: "empty super user between separators", overrides: []string{"super.users=User:a;;User:b"},
			errKey: "super.users"},
		{name: "allow everyone", overrides: []string{"allow.everyone.if.no.acl.found=true"}, everyone: true},
		{name: "allow everyone, Kafka's case-insensitive bool", overrides: []string{"allow.everyone.if.no.acl.found=TRUE"}, everyone: true},
		{name: "allow everyone, not a bool", overrides: []string{"allow.everyone.if.no.acl.found=yes"},
			errKey: "allow.everyone.if.no.acl.found", errText: "true or false"},
	} {
		c, _, err := Load("", tc.overrides)
		if tc.errKey != "" {
			var ve *ValueError
			if !errors.As(err, &ve) || ve.Key != tc.errKey || !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("%s: error %v, want one naming %s with %q", tc.name, err, tc.errKey, tc.errText)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if c.AuthorizerEnabled() != tc.enabled || c.Authorizer != tc.class || !reflect.DeepEqual(c.SuperUsers, tc.super) ||
			c.AllowEveryoneIfNoACLFound != tc.everyone {
			t.Errorf("%s: enabled %v class %q super %q everyone %v; want %v %q %q %v", tc.name,
				c.AuthorizerEnabled(), c.Authorizer, c.SuperUsers, c.AllowEveryoneIfNoACLFound,
				tc.enabled, tc.class, tc.super, tc.everyone)
		}
		// What DescribeConfigs reports loads back to the same settings.
		back, _, err := Load("", []string{"authorizer.class.name=" + c.Properties()["authorizer.class.name"],
			"super.users=" + c.Properties()["super.users"],
			"allow.everyone.if.no.acl.found=" + c.Properties()["allow.everyone.if.no.acl.found"]})
		if err != nil || back.Authorizer != c.Authorizer || !reflect.DeepEqual(back.SuperUsers, c.SuperUsers) ||
			back.AllowEveryoneIfNoACLFound != c.AllowEveryoneIfNoACLFound {
			t.Errorf("%s: round trip through Properties: %v %+v", tc.name, err, back)
		}
	}
}

func TestACLAuthorizerClassesFresh(t *testing.T) {
	// Each call hands out its own slice: no caller can change another's.
	ACLAuthorizerClasses()[0] = "x"
	if ACLAuthorizerClasses()[0] != "kafka.security.authorizer.AclAuthorizer" {
		t.Error("ACLAuthorizerClasses shares its slice")
	}
}
