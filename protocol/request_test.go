package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func wantHeaderVersion(req kmsg.Request) int16 {
	switch {
	case req.Key() == 7 && req.GetVersion() == 0:
		return 0
	case req.IsFlexible():
		return 2
	}
	return 1
}

func TestParseRequestRoundTrip(t *testing.T) {
	for _, req := range sampleRequests() {
		name := kmsg.NameForKey(req.Key())
		for _, clientID := range []*string{strPtr("client-1"), strPtr(""), nil} {
			frame := encodeRequest(req, 77, clientID)
			hdr, got, err := ParseRequest(frame, supportedAll)
			if err != nil {
				t.Fatalf("%s v%d: %v", name, req.GetVersion(), err)
			}
			wantID := ""
			if clientID != nil && wantHeaderVersion(req) > 0 {
				wantID = *clientID
			}
			want := RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: 77, ClientID: wantID, HeaderVersion: wantHeaderVersion(req)}
			if hdr != want {
				t.Errorf("%s v%d: header %+v, want %+v", name, req.GetVersion(), hdr, want)
			}
			if got.Key() != req.Key() || got.GetVersion() != req.GetVersion() {
				t.Errorf("%s v%d: got %s v%d", name, req.GetVersion(), kmsg.NameForKey(got.Key()), got.GetVersion())
			}
			if a, b := got.AppendTo(nil), req.AppendTo(nil); !bytes.Equal(a, b) {
				t.Errorf("%s v%d: body re-encodes differently:\n got %x\nwant %x", name, req.GetVersion(), a, b)
			}
		}
	}
}

// The parser must agree with what a real client library writes.
func TestParseRequestMatchesKmsgFormatter(t *testing.T) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kgo"))
	for _, req := range sampleRequests() {
		if req.Key() == 7 && req.GetVersion() == 0 {
			// kmsg's formatter writes only the header for
			// ControlledShutdown v0 (no body, no size); nothing to
			// compare against.
			continue
		}
		frame := f.AppendRequest(nil, req, 5)[4:]
		hdr, _, err := ParseRequest(frame, supportedAll)
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
		if hdr.HeaderVersion != wantHeaderVersion(req) || hdr.CorrelationID != 5 {
			t.Errorf("%s v%d: header %+v", kmsg.NameForKey(req.Key()), req.GetVersion(), hdr)
		}
	}
}

func TestParseRequestSkipsHeaderTags(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	b := binary.BigEndian.AppendUint16(nil, 3)
	b = binary.BigEndian.AppendUint16(b, 12)
	b = binary.BigEndian.AppendUint32(b, 9)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 'c')
	b = append(b, 2, 0, 3, 'a', 'b', 'c', 5, 0) // two tags: 0 (3 bytes), 5 (empty)
	b = req.AppendTo(b)
	hdr, got, err := ParseRequest(b, supportedAll)
	if err != nil {
		t.Fatal(err)
	}
	if hdr.ClientID != "c" || got.(*kmsg.MetadataRequest).Topics != nil {
		t.Errorf("header %+v, request %+v", hdr, got)
	}
}

func TestParseRequestUnknownAPI(t *testing.T) {
	// Key 71 (GetTelemetrySubscriptions) is known to kmsg but not served;
	// 9999 is known to nobody.
	only := func(key int16) (int16, int16, bool) {
		if key == 18 {
			return 0, 3, true
		}
		return 0, 0, false
	}
	for _, key := range []int16{71, 9999, -1} {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, 0)
		b = binary.BigEndian.AppendUint32(b, 3)
		b = binary.BigEndian.AppendUint16(b, 2)
		b = append(b, "id"...)
		hdr, req, err := ParseRequest(b, only)
		if !errors.Is(err, ErrUnknownAPI) || req != nil {
			t.Fatalf("key %d: err %v, req %v", key, err, req)
		}
		if hdr.APIKey != key || hdr.CorrelationID != 3 || hdr.ClientID != "id" {
			t.Errorf("key %d: header %+v", key, hdr)
		}
	}
	// A key the broker claims but kmsg cannot decode is also unknown.
	claimAll := func(int16) (int16, int16, bool) { return 0, 100, true }
	b := binary.BigEndian.AppendUint16(nil, 9999)
	b = append(b, 0, 0, 0, 0, 0, 1, 0xff, 0xff)
	if _, _, err := ParseRequest(b, claimAll); !errors.Is(err, ErrUnknownAPI) {
		t.Errorf("unknown to kmsg: %v", err)
	}
}

func TestParseRequestUnsupportedVersion(t *testing.T) {
	upTo3 := func(key int16) (int16, int16, bool) {
		if key == 18 {
			return 0, 3, true
		}
		if key == 3 {
			return 1, 12, true
		}
		return 0, 0, false
	}
	// ApiVersions v4 from a newer client: the header must still be usable
	// to answer v0 with UNSUPPORTED_VERSION.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 4
	av.ClientSoftwareName = "x"
	av.ClientSoftwareVersion = "1"
	hdr, req, err := ParseRequest(encodeRequest(av, 1234, strPtr("newer")), upTo3)
	if !errors.Is(err, ErrUnsupportedVersion) || req != nil {
		t.Fatalf("err %v, req %v", err, req)
	}
	want := RequestHeader{APIKey: 18, APIVersion: 4, CorrelationID: 1234, ClientID: "newer", HeaderVersion: 2}
	if hdr != want {
		t.Errorf("header %+v, want %+v", hdr, want)
	}
	if ErrorCode(err) != 35 {
		t.Errorf("ErrorCode = %d, want 35", ErrorCode(err))
	}

	// A version from far beyond anything kmsg knows, with a body we
	// cannot know: header only.
	b := []byte{0, 18, 0x7f, 0, 0, 0, 0, 8, 0, 1, 'z', 0, 0xde, 0xad}
	hdr, _, err = ParseRequest(b, upTo3)
	if !errors.Is(err, ErrUnsupportedVersion) || hdr.APIVersion != 0x7f00 || hdr.CorrelationID != 8 || hdr.ClientID != "z" {
		t.Errorf("far future: %+v %v", hdr, err)
	}

	// Below the minimum, and negative.
	for _, v := range []int16{0, -1} {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = v
		frame := encodeRequest(md, 1, nil)
		binary.BigEndian.PutUint16(frame[2:], uint16(v))
		hdr, _, err := ParseRequest(frame, upTo3)
		if !errors.Is(err, ErrUnsupportedVersion) || hdr.APIVersion != v {
			t.Errorf("Metadata v%d: %+v %v", v, hdr, err)
		}
	}
}

func TestParseRequestMalformedHeader(t *testing.T) {
	valid := encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1, strPtr("abc"))
	cases := map[string][]byte{
		"empty":              nil,
		"seven bytes":        valid[:7],
		"no client id":       valid[:8],
		"client id length":   append(valid[:8:8], 0xff, 0xfe),
		"client id too long": append(valid[:8:8], 0, 50, 'a'),
		"tag count lies": func() []byte {
			b := []byte{0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff}
			return append(b, 0xff, 0xff, 0xff, 0xff, 0x0f)
		}(),
		"tag size lies":     {0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 1, 0, 0x7f, 0},
		"varint too long":   {0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"varint overflows":  {0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"varint unfinished": {0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0x80},
	}
	for name, frame := range cases {
		_, req, err := ParseRequest(frame, supportedAll)
		if !errors.Is(err, ErrMalformed) || req != nil {
			t.Errorf("%s: err %v, req %v", name, err, req)
		}
	}
}

// Every strict prefix of a valid frame is malformed, and none panics.
func TestParseRequestTruncatedAtEveryCut(t *testing.T) {
	for _, req := range sampleRequests() {
		frame := encodeRequest(req, 1, strPtr("client"))
		for cut := range len(frame) {
			// A fresh copy, so reading past the cut would be caught by
			// the race detector's bounds checks rather than hidden by
			// capacity.
			b := bytes.Clone(frame[:cut])
			_, got, err := ParseRequest(b, supportedAll)
			if !errors.Is(err, ErrMalformed) || errors.Is(err, errDecodePanic) || got != nil {
				t.Fatalf("%s v%d cut at %d of %d: err %v, req %v", kmsg.NameForKey(req.Key()), req.GetVersion(), cut, len(frame), err, got)
			}
		}
	}
}

// Random bodies behind valid headers must never panic.
func TestParseRequestGarbageBodies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for key := int16(0); key < 100; key++ {
		_, maxV, ok := supportedAll(key)
		if !ok {
			continue
		}
		for v := int16(0); v <= maxV; v++ {
			for range 20 {
				b := binary.BigEndian.AppendUint16(nil, uint16(key))
				b = binary.BigEndian.AppendUint16(b, uint16(v))
				b = append(b, 0, 0, 0, 1, 0xff, 0xff, 0)
				body := make([]byte, rng.IntN(64))
				for i := range body {
					body[i] = byte(rng.Uint32())
				}
				if _, _, err := ParseRequest(append(b, body...), supportedAll); errors.Is(err, errDecodePanic) {
					t.Fatalf("%s v%d body %x: %v", kmsg.NameForKey(key), v, body, err)
				}
			}
		}
	}
}
