package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterClientQuotas: v0-1
//
// Behaviour:
// * The controller validates and applies the request (controller
//   AlterClientQuotas: Kafka's ClientQuotaControlManager checks, each
//   INVALID_REQUEST with Kafka's message: an unknown quota key, a value
//   that is zero, negative or not a number, a fractional or too large byte
//   rate, a key or an entity twice, an empty or unknown entity type).
//   Entities are written as ZooKeeper-mode Kafka writes them
//   (/config/users/<u>, /config/clients/<c>, /config/users/<u>/clients/<c>,
//   <default> for a null name) with a change notification, each on its
//   own. validate_only checks without writing.
// * One result per entry, in request order, naming the entity as sent
//   (Kafka answers per distinct entity, in no particular order).
// * IP entities are refused (INVALID_REQUEST): kbroker keeps no IP
//   quotas. So is a user or client id literally named <default>, which
//   kbroker could not tell from the default entity.
// * On another broker the request is forwarded to the controller over the
//   broker's controller connection and answered once this broker's own
//   view shows every applied entry (bounded by forwardTimeout, then
//   answered anyway: the change is made, the view follows), so a
//   DescribeClientQuotas here right after sees it.
// * No controller reachable: NOT_CONTROLLER for every entry.
// * Authorization, on the broker the client talks to, before forwarding:
//   AlterConfigs on the cluster, else every entry gets
//   CLUSTER_AUTHORIZATION_FAILED and nothing changes.
//
// Version notes:
// * v1: flexible

func init() {
	registerAPI(kmsg.AlterClientQuotas.Int16(), 0, 1, handleAlterClientQuotas)
}

func handleAlterClientQuotas(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	if !b.authorizeCluster(rc, acl.OpAlterConfigs) {
		resp.Entries = quotaResults(req, func(int) error { return errClusterRefused })
		return resp, nil
	}
	alts := quotaAlterations(req)
	errs, err := b.controller.AlterClientQuotas(alts, req.ValidateOnly)
	switch {
	case errors.Is(err, kerr.NotController):
		resp.Entries = b.forwardClientQuotas(ctx, req, alts)
	case err != nil:
		resp.Entries = quotaResults(req, func(int) error { return err })
	default:
		resp.Entries = quotaResults(req, func(i int) error { return errs[i] })
	}
	return resp, nil
}

// quotaAlterations turns a request into the controller's terms.
func quotaAlterations(req *kmsg.AlterClientQuotasRequest) []controller.QuotaAlteration {
	out := make([]controller.QuotaAlteration, len(req.Entries))
	for i, e := range req.Entries {
		for _, p := range e.Entity {
			out[i].Entity = append(out[i].Entity, controller.QuotaEntityPart{Type: p.Type, Name: p.Name})
		}
		for _, op := range e.Ops {
			out[i].Ops = append(out[i].Ops, controller.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
	}
	return out
}

// quotaResults answers each entry of req with errOf(its index).
func quotaResults(req *kmsg.AlterClientQuotasRequest, errOf func(int) error) []kmsg.AlterClientQuotasResponseEntry {
	out := make([]kmsg.AlterClientQuotasResponseEntry, len(req.Entries))
	for i, e := range req.Entries {
		r := kmsg.NewAlterClientQuotasResponseEntry()
		r.ErrorCode, r.ErrorMessage = errorCodeAndMessage(errOf(i))
		for _, p := range e.Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = p.Type, p.Name
			r.Entity = append(r.Entity, re)
		}
		out[i] = r
	}
	return out
}

// forwardClientQuotas sends the request to the controller and waits
// (bounded) until this broker's view shows what the controller applied.
func (b *Broker) forwardClientQuotas(ctx context.Context, req *kmsg.AlterClientQuotasRequest, alts []controller.QuotaAlteration) []kmsg.AlterClientQuotasResponseEntry {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	failAll := func(err error) []kmsg.AlterClientQuotasResponseEntry {
		return quotaResults(req, func(int) error { return err })
	}
	kresp, ctrl, err := b.forwardToController(ctx, "altering client quotas", req)
	if err != nil {
		return failAll(err)
	}
	results := kresp.(*kmsg.AlterClientQuotasResponse).Entries
	if len(results) != len(req.Entries) {
		return failAll(fmt.Errorf("%w: controller %d answered %d entries to %d", kerr.UnknownServerError, ctrl, len(results), len(req.Entries)))
	}
	if req.ValidateOnly {
		return results
	}
	var applied []controller.QuotaAlteration
	for i, r := range results {
		if r.ErrorCode == 0 {
			applied = append(applied, alts[i])
		}
	}
	b.awaitView(ctx, ctrl, "client quotas altered", func(md *controller.Metadata) bool { return quotaViewShows(md, applied) })
	return results
}

// quotaViewShows reports whether md shows every alteration applied: each
// set key at its value, each removed key gone.
func quotaViewShows(md *controller.Metadata, alts []controller.QuotaAlteration) bool {
	for _, alt := range alts {
		e, err := controller.ParseQuotaEntity(alt.Entity)
		if err != nil {
			continue // the controller applied it, so it parses; be safe
		}
		configs := md.EntityConfig(e)
		for _, op := range alt.Ops {
			stored, ok := configs[op.Key]
			if op.Remove {
				if ok {
					return false
				}
				continue
			}
			v, err := strconv.ParseFloat(stored, 64)
			if !ok || err != nil || v != float64(int64(op.Value+1e-6)) && v != op.Value {
				return false
			}
		}
	}
	return true
}
