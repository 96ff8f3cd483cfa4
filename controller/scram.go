package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ScramUpsertion sets one SCRAM credential of a user
// (AlterUserScramCredentials): the broker keeps the stored form derived
// from the salt and the salted password, never the password.
type ScramUpsertion struct {
	User string
	// Mechanism is sasl.ScramSHA256 or sasl.ScramSHA512; anything else
	// (a mechanism id the broker does not know) is refused.
	Mechanism      string
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// ScramDeletion removes one SCRAM credential of a user.
type ScramDeletion struct {
	User      string
	Mechanism string
}

// ScramResult is the outcome of a request's alterations of one user: all
// of them were applied (Err nil) or none.
type ScramResult struct {
	User string
	Err  error
}

// kafkaError is a Kafka error code with the message Kafka sends with it,
// for responses that carry Kafka's own words.
type kafkaError struct {
	code *kerr.Error
	msg  string
}

func (e *kafkaError) Error() string { return e.msg }
func (e *kafkaError) Unwrap() error { return e.code }

// Kafka's messages (ZkAdminManager.alterUserScramCredentials).
var (
	errEmptyUser         = &kafkaError{kerr.UnacceptableCredential, "Username must not be empty"}
	errUnknownMechanism  = &kafkaError{kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism"}
	errTooFewIterations  = &kafkaError{kerr.UnacceptableCredential, "Too few iterations"}
	errTooManyIterations = &kafkaError{kerr.UnacceptableCredential, "Too many iterations"}
	errAlteredTwice      = &kafkaError{kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"}
	errNoSuchCredential  = &kafkaError{kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"}
)

// isScramMechanism reports whether name is a SCRAM mechanism the broker
// stores credentials for.
func isScramMechanism(name string) bool { return name == sasl.ScramSHA256 || name == sasl.ScramSHA512 }

// checkScramAlterations applies Kafka's checks to a request, in Kafka's
// order (ZkAdminManager.alterUserScramCredentials): an empty user, an
// unknown mechanism or iterations out of bounds fail the user (the last
// such entry of a user names the reason, upsertions after deletions);
// among the other users, one whose user and mechanism appear twice fails
// with DUPLICATE_RESOURCE. Every user fails or succeeds as a whole.
// users lists each user once, in order of first appearance (deletions
// first, as on the wire); failed maps the failed ones to their error.
func checkScramAlterations(upsertions []ScramUpsertion, deletions []ScramDeletion) (users []string, failed map[string]error) {
	failed = map[string]error{}
	seen := map[string]bool{}
	note := func(user string) {
		if !seen[user] {
			seen[user] = true
			users = append(users, user)
		}
	}
	for _, d := range deletions {
		note(d.User)
		switch {
		case d.User == "":
			failed[d.User] = errEmptyUser
		case !isScramMechanism(d.Mechanism):
			failed[d.User] = errUnknownMechanism
		}
	}
	for _, u := range upsertions {
		note(u.User)
		switch {
		case u.User == "":
			failed[u.User] = errEmptyUser
		case !isScramMechanism(u.Mechanism):
			failed[u.User] = errUnknownMechanism
		case u.Iterations < sasl.MinIterations:
			failed[u.User] = errTooFewIterations
		case u.Iterations > sasl.MaxIterations:
			failed[u.User] = errTooManyIterations
		}
	}
	type pair struct{ user, mechanism string }
	pairs := map[pair]int{}
	for _, d := range deletions {
		pairs[pair{d.User, d.Mechanism}]++
	}
	for _, u := range upsertions {
		pairs[pair{u.User, u.Mechanism}]++
	}
	for p, n := range pairs {
		if _, bad := failed[p.user]; !bad && n > 1 {
			failed[p.user] = errAlteredTwice
		}
	}
	return users, failed
}

// AlterScramCredentials applies a request's SCRAM credential upsertions
// and deletions (AlterUserScramCredentials), validated as Kafka does; only
// the controller can. Each user's changes are written together (its
// znode, keeping keys other than the altered mechanisms, and a change
// notification) and the new view is published before it returns. The
// results name every user of the request once, in order of first
// appearance; the error is only NOT_CONTROLLER.
func (c *Cluster) AlterScramCredentials(upsertions []ScramUpsertion, deletions []ScramDeletion) ([]ScramResult, error) {
	var res []ScramResult
	err := c.withActive(func(a *active) error {
		res = a.alterScramCredentials(upsertions, deletions)
		return nil
	})
	return res, err
}

func (a *active) alterScramCredentials(upsertions []ScramUpsertion, deletions []ScramDeletion) []ScramResult {
	users, failed := checkScramAlterations(upsertions, deletions)
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	next := a.md.clone()
	changed := false
	for _, user := range users {
		if failed[user] != nil {
			continue
		}
		var ups []ScramUpsertion
		var dels []ScramDeletion
		for _, u := range upsertions {
			if u.User == user {
				ups = append(ups, u)
			}
		}
		for _, d := range deletions {
			if d.User == user {
				dels = append(dels, d)
			}
		}
		configs, err := a.writeScramLocked(ctx, user, ups, dels)
		if err != nil {
			failed[user] = err
			continue
		}
		if next.UserConfigs == nil {
			next.UserConfigs = map[string]map[string]string{}
		}
		next.UserConfigs[user] = configs
		if len(configs) == 0 {
			delete(next.UserConfigs, user)
		}
		changed = true
		a.c.logger.Info("altered SCRAM credentials", "user", user, "upserted", mechanismsOf(ups), "deleted", mechanismsOfDeletions(dels))
	}
	if changed {
		if len(next.UserConfigs) == 0 {
			next.UserConfigs = nil
		}
		a.publishLocked(next)
	}
	out := make([]ScramResult, 0, len(users))
	for _, user := range users {
		out = append(out, ScramResult{User: user, Err: failed[user]})
	}
	return out
}

// writeScramLocked applies one user's alterations to its stored config,
// read fresh so that keys other tools wrote (quotas) are kept, and writes
// it conditionally on the version read, trying again a few times if
// another writer came in between. It returns the config written.
func (a *active) writeScramLocked(ctx context.Context, user string, ups []ScramUpsertion, dels []ScramDeletion) (map[string]string, error) {
	for attempt := 0; attempt < 3; attempt++ {
		current, version, err := a.c.store.UserConfig(ctx, user)
		if errors.Is(err, zk.ErrMalformed) {
			return nil, fmt.Errorf("%w: the stored config of user %q is damaged (see the controller's log); fix or delete it first", kerr.UnknownServerError, user)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: reading the config of user %q: %v", kerr.UnknownServerError, user, err)
		}
		configs := maps.Clone(current)
		if configs == nil {
			configs = map[string]string{}
		}
		for _, d := range dels {
			if _, ok := configs[d.Mechanism]; !ok {
				return nil, errNoSuchCredential
			}
			delete(configs, d.Mechanism)
		}
		for _, u := range ups {
			cred, err := sasl.NewScramCredential(u.Mechanism, u.Salt, u.SaltedPassword, u.Iterations)
			if err != nil {
				// sasl's messages name what is wrong (an empty salt),
				// never a value.
				return nil, fmt.Errorf("%w: %v", kerr.UnacceptableCredential, err)
			}
			configs[u.Mechanism] = cred.String()
		}
		err = a.c.store.SetUserConfig(ctx, a.epochZkVersion, user, configs, version)
		if errors.Is(err, zk.ErrVersionConflict) {
			continue
		}
		if err != nil {
			return nil, a.storeErr(err)
		}
		return configs, nil
	}
	return nil, fmt.Errorf("%w: the config of user %q kept changing under the alteration; try again", kerr.UnknownServerError, user)
}

func mechanismsOf(ups []ScramUpsertion) []string {
	out := make([]string, 0, len(ups))
	for _, u := range ups {
		out = append(out, u.Mechanism)
	}
	return out
}

func mechanismsOfDeletions(dels []ScramDeletion) []string {
	out := make([]string, 0, len(dels))
	for _, d := range dels {
		out = append(out, d.Mechanism)
	}
	return out
}
