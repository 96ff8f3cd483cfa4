package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func sized(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func TestReadFrame(t *testing.T) {
	body := []byte("hello, kafka")
	two := append(sized(body), sized([]byte("second"))...)
	r := bytes.NewReader(two)

	got, err := ReadFrame(r, 100, nil)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("first frame: %q %v", got, err)
	}
	buf := make([]byte, 0, 64)
	got, err = ReadFrame(r, 100, buf)
	if err != nil || string(got) != "second" {
		t.Fatalf("second frame: %q %v", got, err)
	}
	if &got[0] != &buf[:1][0] {
		t.Error("a large enough buf was not reused")
	}
	if _, err := ReadFrame(r, 100, nil); err != io.EOF {
		t.Errorf("at a frame boundary: %v, want io.EOF", err)
	}

	// An empty frame is a frame; ParseRequest rejects it later.
	if got, err := ReadFrame(bytes.NewReader(sized(nil)), 100, nil); err != nil || len(got) != 0 {
		t.Errorf("empty frame: %q %v", got, err)
	}
	// Too-small buf: a new slice, buf untouched.
	small := []byte("xx")
	if got, err := ReadFrame(bytes.NewReader(sized(body)), 100, small[:0]); err != nil || !bytes.Equal(got, body) || string(small) != "xx" {
		t.Errorf("small buf: %q %v %q", got, err, small)
	}
}

func TestReadFrameCut(t *testing.T) {
	frame := sized([]byte("0123456789"))
	for cut := 1; cut < len(frame); cut++ {
		_, err := ReadFrame(bytes.NewReader(frame[:cut]), 100, nil)
		if err != io.ErrUnexpectedEOF {
			t.Errorf("cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	boom := errors.New("boom")
	if _, err := ReadFrame(iotest.ErrReader(boom), 100, nil); !errors.Is(err, boom) {
		t.Errorf("reader error: %v", err)
	}
}

// A frame larger than frameChunk arriving in small pieces is read whole.
func TestReadFrameLargeInPieces(t *testing.T) {
	body := bytes.Repeat([]byte("abcdefg"), (3*frameChunk)/7+5)
	got, err := ReadFrame(iotest.HalfReader(bytes.NewReader(sized(body))), math.MaxInt32, nil)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("len %d, err %v", len(got), err)
	}
}

// countingReader serves an endless stream after a fixed prefix, and counts
// the bytes asked for.
type countingReader struct {
	prefix []byte
	read   int
}

func (r *countingReader) Read(p []byte) (int, error) {
	n := copy(p, r.prefix)
	r.prefix = r.prefix[n:]
	for i := n; i < len(p); i++ {
		p[i] = 'x'
	}
	r.read += len(p)
	return len(p), nil
}

func allocatedBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestReadFrameSizeLimits(t *testing.T) {
	for _, size := range []int32{-1, math.MinInt32, 1001, math.MaxInt32} {
		r := &countingReader{prefix: binary.BigEndian.AppendUint32(nil, uint32(size))}
		var err error
		alloc := allocatedBytes(func() { _, err = ReadFrame(r, 1000, nil) })
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("size %d: %v", size, err)
		}
		if !strings.Contains(err.Error(), "1000") || !strings.Contains(err.Error(), "size") {
			t.Errorf("size %d: error %q does not give the sizes", size, err)
		}
		if r.read != 4 {
			t.Errorf("size %d: read %d bytes, want only the 4-byte prefix", size, r.read)
		}
		if alloc > 64<<10 {
			t.Errorf("size %d: allocated %d bytes", size, alloc)
		}
	}
}

// A frame announced at 1 GiB whose bytes never come costs at most a chunk.
func TestReadFrameAnnouncedButNotSent(t *testing.T) {
	prefix := binary.BigEndian.AppendUint32(nil, 1<<30)
	var err error
	alloc := allocatedBytes(func() {
		_, err = ReadFrame(io.MultiReader(bytes.NewReader(prefix), strings.NewReader("only this")), math.MaxInt32, nil)
	})
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("err %v", err)
	}
	if alloc > 2*frameChunk {
		t.Errorf("allocated %d bytes for a frame that never came", alloc)
	}
}

func TestAppendResponse(t *testing.T) {
	av := kmsg.NewPtrApiVersionsResponse()
	av.Version = 3
	key := kmsg.NewApiVersionsResponseApiKey()
	key.ApiKey, key.MaxVersion = 18, 3
	av.ApiKeys = append(av.ApiKeys, key)

	md12 := kmsg.NewPtrMetadataResponse()
	md12.Version = 12
	md8 := kmsg.NewPtrMetadataResponse()
	md8.Version = 8

	for _, tc := range []struct {
		resp    kmsg.Response
		tagByte bool
	}{
		{av, false}, // ApiVersions: header v0 even though v3 is flexible
		{md12, true},
		{md8, false},
	} {
		prefix := []byte("previous frame")
		got := AppendResponse(prefix, 0x01020304, tc.resp)
		if !bytes.HasPrefix(got, []byte("previous frame")) {
			t.Fatal("dst not kept")
		}
		frame := got[len(prefix):]
		if size := binary.BigEndian.Uint32(frame); int(size) != len(frame)-4 {
			t.Errorf("%T v%d: size %d, frame %d", tc.resp, tc.resp.GetVersion(), size, len(frame)-4)
		}
		if !bytes.Equal(frame[4:8], []byte{1, 2, 3, 4}) {
			t.Errorf("correlation id %x", frame[4:8])
		}
		want := []byte{}
		if tc.tagByte {
			want = append(want, 0)
		}
		want = tc.resp.AppendTo(want)
		if !bytes.Equal(frame[8:], want) {
			t.Errorf("%T v%d: after correlation id %x, want %x", tc.resp, tc.resp.GetVersion(), frame[8:], want)
		}
		// And a client can read it back.
		body := frame[8:]
		if tc.tagByte {
			body = body[1:]
		}
		back := tc.resp.RequestKind().ResponseKind()
		back.SetVersion(tc.resp.GetVersion())
		if err := back.ReadFrom(body); err != nil {
			t.Errorf("%T: read back: %v", tc.resp, err)
		}
	}
}
