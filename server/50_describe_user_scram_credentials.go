package server

import (
	"context"
	"maps"
	"slices"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeUserScramCredentials: v0
//
// Behaviour:
// * Answered from this broker's cluster view (the controller publishes
//   /config/users to every broker), so any broker answers.
// * Users null or empty: every user with a SCRAM credential, sorted.
// * Named users, each answered once in request order: RESOURCE_NOT_FOUND
//   "Attempt to describe nonexistent user." for one without a SCRAM
//   credential (quotas alone do not count); DUPLICATE_RESOURCE for one
//   named more than once (Kafka's ScramImage.describe).
// * Each credential is its mechanism id (1 SCRAM-SHA-256, 2 SCRAM-SHA-512)
//   and iterations; a stored value that does not parse fails its user with
//   UNKNOWN_SERVER_ERROR (the value is never echoed).
// * Authorization: Describe on the cluster, else
//   CLUSTER_AUTHORIZATION_FAILED at the top level and in one result per
//   named user, without the user's name (DescribeUserScramCredentialsRequest
//   .getErrorResponse).
//
// Version notes:
// * v0: flexible

func init() {
	registerAPI(kmsg.DescribeUserSCRAMCredentials.Int16(), 0, 0, handleDescribeUserSCRAMCredentials)
}

func handleDescribeUserSCRAMCredentials(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !b.authorizeCluster(rc, acl.OpDescribe) {
		resp.ErrorCode, resp.ErrorMessage = errorCodeAndMessage(errClusterRefused)
		for range req.Users {
			r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.ErrorCode, r.ErrorMessage = resp.ErrorCode, resp.ErrorMessage
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	configs := b.controller.Metadata().UserConfigs
	if len(req.Users) == 0 {
		for _, user := range slices.Sorted(maps.Keys(configs)) {
			if r, ok := describeUserScram(user, configs[user]); ok {
				resp.Results = append(resp.Results, r)
			}
		}
		return resp, nil
	}
	named := make(map[string]int, len(req.Users))
	for _, u := range req.Users {
		named[u.Name]++
	}
	answered := make(map[string]bool, len(named))
	for _, u := range req.Users {
		if answered[u.Name] {
			continue
		}
		answered[u.Name] = true
		r, ok := describeUserScram(u.Name, configs[u.Name])
		switch {
		case named[u.Name] > 1:
			r = kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.User = u.Name
			setScramDescribeError(&r, kerr.DuplicateResource, "Cannot describe SCRAM credentials for the same user twice in a single request: "+u.Name)
		case !ok:
			setScramDescribeError(&r, kerr.ResourceNotFound, "Attempt to describe nonexistent user.")
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// describeUserScram describes one user's SCRAM credentials from its
// config; ok is false if it has none.
func describeUserScram(user string, configs map[string]string) (kmsg.DescribeUserSCRAMCredentialsResponseResult, bool) {
	r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
	r.User = user
	found := false
	for _, m := range scramMechanisms {
		stored, ok := configs[m.name]
		if !ok {
			continue
		}
		found = true
		cred, err := sasl.ParseCredential(m.name, stored)
		if err != nil {
			// The SASL lookup logs the damaged value (once); here the
			// client only learns that something is wrong.
			setScramDescribeError(&r, kerr.UnknownServerError, "The stored "+m.name+" credential of the user is malformed; alter it again")
			return r, true
		}
		info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		info.Mechanism, info.Iterations = m.id, cred.Iterations
		r.CredentialInfos = append(r.CredentialInfos, info)
	}
	return r, found
}

func setScramDescribeError(r *kmsg.DescribeUserSCRAMCredentialsResponseResult, code *kerr.Error, msg string) {
	r.ErrorCode, r.ErrorMessage, r.CredentialInfos = code.Code, &msg, nil
}
