package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-3
//
// Behaviour:
// * The advertised keys and ranges come from the registered handlers.
// * A request at an unknown version is answered by conn.go at v0 with
//   UNSUPPORTED_VERSION and the ranges (the response header is always v0).
//
// Version notes:
// * v1: ThrottleMillis
// * v3: flexible; client software name and version; the features: Kafka's
//   transaction.version, supported 0-2 and finalized at
//   kbroker.transaction.version (clients use transactions v2, KIP-890
//   part 2, when it is 2), with the broker's start time as the epoch.

func init() { registerAPI(kmsg.ApiVersions.Int16(), 0, 3, handleAPIVersions) }

func handleAPIVersions(_ context.Context, b *Broker, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiVersionKeys()
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, maxTransactionVersion
	resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	if level := b.cfg.TransactionVersion; level > 0 {
		// As Kafka: only levels above 0 are finalized, with the minimum
		// level (deprecated) equal to the level.
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, level, level
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		resp.FinalizedFeaturesEpoch = b.featuresEpoch
	}
	return resp, nil
}

// Kafka's transaction.version feature: level 2 is transactions v2.
const (
	transactionVersionFeature       = "transaction.version"
	maxTransactionVersion     int16 = 2
)

// txnV2 reports whether a request at version of a transactions v2 API
// (Produce v12+, TxnOffsetCommit v5+, EndTxn v5+, with their first v2
// versions in fromVersion) runs under transactions v2. As in Kafka the
// version alone decides, whatever this broker finalizes: a client uses
// those versions for transactions only after seeing the feature on some
// broker (Kafka's clients cap them below otherwise), and a broker of the
// same cluster with the feature at a lower level must still serve it.
func txnV2(version, fromVersion int16) bool {
	return version >= fromVersion
}

func apiVersionKeys() []kmsg.ApiVersionsResponseApiKey {
	all := supportedAPIs()
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(all))
	for _, a := range all {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey = a.key
		k.MinVersion = a.minVersion
		k.MaxVersion = a.maxVersion
		keys = append(keys, k)
	}
	return keys
}
