package server

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handlerFunc serves one decoded request. It returns the response to send,
// or nil for no response (acks=0 produce). An error closes the connection.
type handlerFunc func(ctx context.Context, b *Broker, rc *requestContext, req kmsg.Request) (kmsg.Response, error)

// api is one Kafka API this broker serves: its key, the version range it
// advertises and its handler. Each API's file registers itself in init, so
// ApiVersions is derived from the handlers that exist.
type api struct {
	key        int16
	minVersion int16
	maxVersion int16
	handle     handlerFunc
}

// apis is filled by the init functions of the per-API files and only read
// afterwards.
var apis = map[int16]api{}

func registerAPI(key, minVersion, maxVersion int16, h handlerFunc) {
	if _, dup := apis[key]; dup {
		panic("server: API registered twice: " + kmsg.NameForKey(key))
	}
	apis[key] = api{key: key, minVersion: minVersion, maxVersion: maxVersion, handle: h}
}

// supportedAPIs lists the registered APIs in key order.
func supportedAPIs() []api {
	out := make([]api, 0, len(apis))
	for _, a := range apis {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// versionRange returns the advertised range for key, and whether key is served.
func versionRange(key int16) (minVersion, maxVersion int16, ok bool) {
	a, ok := apis[key]
	return a.minVersion, a.maxVersion, ok
}
