package protocol

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka's topic name limits (Topic.java): 249 characters leaves room for a
// partition suffix and the ".deleted" / "-delete" renames within a 255-byte
// file name.
const maxTopicNameLen = 249

// ValidTopicName reports whether name is a legal Kafka topic name: 1 to 249
// characters of [a-zA-Z0-9._-], and not "." or "..". The error wraps
// INVALID_TOPIC_EXCEPTION.
func ValidTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: topic name is empty", kerr.InvalidTopicException)
	case name == "." || name == "..":
		return fmt.Errorf("%w: topic name cannot be %q", kerr.InvalidTopicException, name)
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("%w: topic name is %d characters, max %d", kerr.InvalidTopicException, len(name), maxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q has illegal character %q at %d (allowed: ASCII letters, digits, '.', '_', '-')", kerr.InvalidTopicException, name, c, i)
		}
	}
	return nil
}
