// Package sendfile holds data to be written to a connection as a list of
// chunks, each either bytes in memory or a range of a file. Chunks of
// files go to TCP connections with sendfile(2), so record batches travel
// from the page cache to the socket without passing through the Go heap.
package sendfile

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Chunk is Data, or, when File is set, Len bytes of File from Pos.
type Chunk struct {
	Data []byte
	File *os.File
	Pos  int64
	Len  int

	budget *Budget // gets File's descriptor back on Close
}

// FileChunk is a chunk of n bytes of f from pos whose descriptor was taken
// from budget (nil: none); Close closes f and returns it.
func FileChunk(f *os.File, pos int64, n int, budget *Budget) Chunk {
	return Chunk{File: f, Pos: pos, Len: n, budget: budget}
}

// Budget bounds how many descriptors file chunks hold at once, so that
// many large fetches in flight cannot take the descriptors the logs need
// (a segment that cannot roll stops the broker). Past it, reads return
// bytes instead.
type Budget struct {
	max  int64
	held atomic.Int64
}

// NewBudget allows max descriptors at once.
func NewBudget(max int) *Budget { return &Budget{max: int64(max)} }

// Take reserves a descriptor; false when none is left.
func (b *Budget) Take() bool {
	if b.held.Add(1) > b.max {
		b.held.Add(-1)
		return false
	}
	return true
}

// Give returns a descriptor taken with Take.
func (b *Budget) Give() { b.held.Add(-1) }

// Held is the number of descriptors taken and not given back.
func (b *Budget) Held() int { return int(b.held.Load()) }

// Size is the number of bytes the chunk stands for.
func (c Chunk) Size() int {
	if c.File != nil {
		return c.Len
	}
	return len(c.Data)
}

// Chunks is data to be written in order. Its files belong to it: Close
// releases them.
type Chunks []Chunk

// Size is the number of bytes of all chunks.
func (cs Chunks) Size() int {
	n := 0
	for _, c := range cs {
		n += c.Size()
	}
	return n
}

// Close closes the files of the chunks. It is safe to call more than once
// and on chunks without files.
func (cs Chunks) Close() {
	for i := range cs {
		if cs[i].File != nil {
			_ = cs[i].File.Close()   // closing again is harmless
			if cs[i].budget != nil { // but giving back twice is not
				cs[i].budget.Give()
				cs[i].budget = nil
			}
		}
	}
}

// AppendTo appends every byte of the chunks to dst, reading file chunks
// with pread, for users that need the bytes themselves.
func (cs Chunks) AppendTo(dst []byte) ([]byte, error) {
	for _, c := range cs {
		if c.File == nil {
			dst = append(dst, c.Data...)
			continue
		}
		n := len(dst)
		dst = append(dst, make([]byte, c.Len)...)
		if _, err := c.File.ReadAt(dst[n:], c.Pos); err != nil {
			return dst[:n], fmt.Errorf("read %s at %d: %w", c.File.Name(), c.Pos, err)
		}
	}
	return dst, nil
}

// ErrShortFile says a file ended before a chunk's range did (it was
// truncated after the chunk was taken): the bytes promised to the peer
// cannot be delivered and the connection must be closed.
var ErrShortFile = errors.New("file shorter than the range to send")

// WriteTo writes the chunks to w: runs of in-memory chunks with one writev
// when w is a connection, file chunks with sendfile when w has a socket
// descriptor (a TCP connection; pread and write otherwise). It does not
// close the chunks' files.
func WriteTo(w io.Writer, cs Chunks) (int64, error) {
	var total int64
	var run net.Buffers
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		n, err := run.WriteTo(w)
		total += n
		run = run[:0]
		return err
	}
	for _, c := range cs {
		if c.File == nil {
			if len(c.Data) > 0 {
				run = append(run, c.Data)
			}
			continue
		}
		if err := flush(); err != nil {
			return total, err
		}
		n, err := writeFile(w, c.File, c.Pos, c.Len)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, flush()
}

// writeFile sends n bytes of f from pos to w.
func writeFile(w io.Writer, f *os.File, pos int64, n int) (int64, error) {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return copyFile(w, f, pos, n)
	}
	dst, err := sc.SyscallConn()
	if err != nil {
		return copyFile(w, f, pos, n)
	}
	src, err := f.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("sendfile %s: %w", f.Name(), err)
	}
	var sent int64
	var sendErr error
	ctlErr := src.Control(func(in uintptr) {
		// Write waits for the socket to be writable whenever the callback
		// returns false, honouring the connection's write deadline.
		werr := dst.Write(func(out uintptr) bool {
			for int64(n) > sent {
				w, err := unix.Sendfile(int(out), int(in), &pos, int(min(int64(n)-sent, 1<<30)))
				if w > 0 {
					sent += int64(w)
				}
				switch {
				case errors.Is(err, unix.EAGAIN):
					return false
				case errors.Is(err, unix.EINTR):
					continue
				case err != nil:
					sendErr = err
					return true
				case w == 0:
					sendErr = ErrShortFile
					return true
				}
			}
			return true
		})
		if sendErr == nil {
			sendErr = werr
		}
	})
	if sendErr == nil {
		sendErr = ctlErr
	}
	if sendErr != nil {
		return sent, fmt.Errorf("sendfile %s at %d: %w", f.Name(), pos, sendErr)
	}
	return sent, nil
}

// copyFile is writeFile for writers without a socket descriptor.
func copyFile(w io.Writer, f *os.File, pos int64, n int) (int64, error) {
	written, err := io.Copy(w, io.NewSectionReader(f, pos, int64(n)))
	if err == nil && written < int64(n) {
		err = ErrShortFile
	}
	return written, err
}
