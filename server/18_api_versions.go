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
// * v3: flexible; client software name and version

func init() { registerAPI(kmsg.ApiVersions.Int16(), 0, 3, handleAPIVersions) }

func handleAPIVersions(_ context.Context, _ *Broker, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiVersionKeys()
	return resp, nil
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
