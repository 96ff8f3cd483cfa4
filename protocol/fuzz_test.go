package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzParseRequest feeds arbitrary frames to ParseRequest. It must never
// panic (the recover guard reports a caught panic as errDecodePanic, which
// fails here), and whatever it accepts must survive a re-encode and
// re-parse unchanged.
//
// The seed corpus in testdata/fuzz/FuzzParseRequest holds real requests;
// regenerate it with KBROKER_WRITE_FUZZ_CORPUS=1 go test -run TestWriteFuzzCorpus.
func FuzzParseRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, frame []byte) {
		hdr, req, err := ParseRequest(frame, supportedAll)
		if errors.Is(err, errDecodePanic) {
			t.Fatalf("decoder panicked: %v", err)
		}
		if err != nil {
			if req != nil {
				t.Fatalf("request returned with error %v", err)
			}
			return
		}
		if req.Key() != hdr.APIKey || req.GetVersion() != hdr.APIVersion {
			t.Fatalf("header %+v, request %s v%d", hdr, kmsg.NameForKey(req.Key()), req.GetVersion())
		}
		once := req.AppendTo(nil)
		again := encodeRequest(req, hdr.CorrelationID, &hdr.ClientID)
		hdr2, req2, err := ParseRequest(again, supportedAll)
		if err != nil {
			t.Fatalf("re-encoded %s v%d does not parse: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
		if hdr2 != hdr {
			t.Fatalf("header %+v became %+v", hdr, hdr2)
		}
		if twice := req2.AppendTo(nil); !bytes.Equal(once, twice) {
			t.Fatalf("%s v%d re-encodes differently:\n%x\n%x", kmsg.NameForKey(req.Key()), req.GetVersion(), once, twice)
		}
	})
}

// TestWriteFuzzCorpus (re)writes the checked-in seed corpus from
// sampleRequests. It only runs when asked to.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("KBROKER_WRITE_FUZZ_CORPUS") == "" {
		t.Skip("set KBROKER_WRITE_FUZZ_CORPUS=1 to rewrite testdata/fuzz/FuzzParseRequest")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParseRequest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, req := range sampleRequests() {
		frame := encodeRequest(req, int32(i+1), strPtr("kbroker-seed"))
		name := fmt.Sprintf("seed-%02d-%s-v%d", i, kmsg.NameForKey(req.Key()), req.GetVersion())
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", frame)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
