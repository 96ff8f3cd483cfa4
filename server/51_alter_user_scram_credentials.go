package server

import (
	"context"
	"errors"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterUserScramCredentials: v0
//
// Behaviour:
// * The controller validates and applies the request (controller
//   AlterScramCredentials: Kafka's checks and messages, ZooKeeper mode's
//   /config/users/<user> with a change notification). Every user of the
//   request gets one result; a user's alterations succeed or fail together.
// * On another broker the request is forwarded to the controller over the
//   broker's controller connection; the answer is given once this broker's
//   own view shows the change (bounded by forwardTimeout, then answered
//   anyway: the change is made, the view follows), so a client may log in
//   here with the new credential as soon as it has the answer.
// * No controller reachable: NOT_CONTROLLER for every user (franz-go then
//   looks for the controller and retries).
// * Authorization, on the broker the client talks to, before forwarding:
//   Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every user
//   (each once) and nothing changes.
//
// Version notes:
// * v0: flexible

func init() {
	registerAPI(kmsg.AlterUserSCRAMCredentials.Int16(), 0, 0, handleAlterUserSCRAMCredentials)
}

func handleAlterUserSCRAMCredentials(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !b.authorizeCluster(rc, acl.OpAlter) {
		resp.Results = scramResultsForAll(req, errClusterRefused)
		return resp, nil
	}
	ups, dels := scramAlterations(req)
	results, err := b.controller.AlterScramCredentials(ups, dels)
	switch {
	case errors.Is(err, kerr.NotController):
		resp.Results = b.forwardScramAlterations(ctx, req, ups, dels)
	case err != nil:
		resp.Results = scramResultsForAll(req, err)
	default:
		for _, r := range results {
			rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			rr.User = r.User
			rr.ErrorCode, rr.ErrorMessage = errorCodeAndMessage(r.Err)
			resp.Results = append(resp.Results, rr)
		}
	}
	return resp, nil
}

// scramAlterations turns a request into the controller's terms; an unknown
// mechanism id becomes "" (refused by the controller).
func scramAlterations(req *kmsg.AlterUserSCRAMCredentialsRequest) ([]controller.ScramUpsertion, []controller.ScramDeletion) {
	ups := make([]controller.ScramUpsertion, 0, len(req.Upsertions))
	for _, u := range req.Upsertions {
		ups = append(ups, controller.ScramUpsertion{User: u.Name, Mechanism: scramMechanismName(u.Mechanism),
			Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	dels := make([]controller.ScramDeletion, 0, len(req.Deletions))
	for _, d := range req.Deletions {
		dels = append(dels, controller.ScramDeletion{User: d.Name, Mechanism: scramMechanismName(d.Mechanism)})
	}
	return ups, dels
}

// scramResultsForAll fails every user of the request (each once, in order
// of first appearance) with err.
func scramResultsForAll(req *kmsg.AlterUserSCRAMCredentialsRequest, err error) []kmsg.AlterUserSCRAMCredentialsResponseResult {
	var out []kmsg.AlterUserSCRAMCredentialsResponseResult
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		rr.User = user
		rr.ErrorCode, rr.ErrorMessage = errorCodeAndMessage(err)
		out = append(out, rr)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return out
}

// forwardScramAlterations sends the request to the controller and waits
// (bounded) until this broker's view shows what the controller applied.
func (b *Broker) forwardScramAlterations(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest, ups []controller.ScramUpsertion, dels []controller.ScramDeletion) []kmsg.AlterUserSCRAMCredentialsResponseResult {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	kresp, ctrl, err := b.forwardToController(ctx, "altering SCRAM credentials", req)
	if err != nil {
		return scramResultsForAll(req, err)
	}
	results := kresp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results
	var applied []string
	for _, r := range results {
		if r.ErrorCode == 0 {
			applied = append(applied, r.User)
		}
	}
	want := expectedScramConfigs(applied, ups, dels)
	b.awaitView(ctx, ctrl, "SCRAM credentials altered", func(md *controller.Metadata) bool { return scramViewShows(md.UserConfigs, want) })
	return results
}

// expectedScramConfigs is what the view must show for users once their
// alterations are applied: per user and mechanism, the stored credential
// ("" for a deleted one, which must be absent).
func expectedScramConfigs(users []string, ups []controller.ScramUpsertion, dels []controller.ScramDeletion) map[string]map[string]string {
	want := map[string]map[string]string{}
	for _, user := range users {
		want[user] = map[string]string{}
	}
	for _, d := range dels {
		if w, ok := want[d.User]; ok {
			w[d.Mechanism] = ""
		}
	}
	for _, u := range ups {
		w, ok := want[u.User]
		if !ok {
			continue
		}
		// The same derivation the controller made: deterministic, so the
		// stored form is known without asking for it.
		if cred, err := sasl.NewScramCredential(u.Mechanism, u.Salt, u.SaltedPassword, u.Iterations); err == nil {
			w[u.Mechanism] = cred.String()
		}
	}
	return want
}

// scramViewShows reports whether configs has every expected credential
// (and none of the deleted ones).
func scramViewShows(configs map[string]map[string]string, want map[string]map[string]string) bool {
	for user, mechs := range want {
		for mech, stored := range mechs {
			have, ok := configs[user][mech]
			if stored == "" && ok || stored != "" && have != stored {
				return false
			}
		}
	}
	return true
}
