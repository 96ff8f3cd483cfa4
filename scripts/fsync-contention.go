//go:build ignore

// fsync-contention measures what an fdatasync of a growing file costs on
// this machine, with the CPUs idle and beside processes that keep them
// busy: the writers stand for a 3-broker cluster's partition replicas under
// durable acknowledgements (kbroker.acks.fsync), each appending a batch and
// fdatasyncing it at a fixed interval. It explains the durable latency
// figures of the README (a sync's tail follows the CPU, not the disk):
//
//	go run scripts/fsync-contention.go [-dir DIR] [-writers 18] [-interval 7ms] [-size 16384] [-duration 10s] [-busy 0,1,2]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	dir := flag.String("dir", "", "directory for the files (default: a new one under $TMPDIR, removed at the end)")
	writers := flag.Int("writers", 18, "files appended and fdatasynced concurrently")
	interval := flag.Duration("interval", 7*time.Millisecond, "time between one writer's appends")
	size := flag.Int("size", 16<<10, "bytes per append")
	duration := flag.Duration("duration", 10*time.Second, "length of each measurement")
	busy := flag.String("busy", "0,1,2", "comma-separated counts of CPU-bound processes to run beside the writers, one measurement each")
	spin := flag.Duration("spin", 0, "internal: be a CPU-bound process for this long")
	flag.Parse()
	if *spin > 0 {
		for end := time.Now().Add(*spin); time.Now().Before(end); {
		}
		return
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "fsync-contention")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	for _, field := range strings.Split(*busy, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 0 {
			fail(fmt.Errorf("bad -busy entry %q", field))
		}
		ctx, cancel := context.WithTimeout(context.Background(), *duration+30*time.Second)
		var spinners []*exec.Cmd
		for range n {
			cmd := exec.CommandContext(ctx, self, "-spin", (*duration + time.Second).String())
			if err := cmd.Start(); err != nil {
				fail(err)
			}
			spinners = append(spinners, cmd)
		}
		lat, err := measure(*dir, *writers, *interval, *size, *duration)
		for _, cmd := range spinners {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		cancel()
		if err != nil {
			fail(err)
		}
		slices.Sort(lat)
		q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))] }
		fmt.Printf("busy processes %d: %d fdatasyncs of %d writers, p50 %v p90 %v p99 %v p99.9 %v max %v\n",
			n, len(lat), *writers, q(0.5).Round(time.Microsecond), q(0.9).Round(time.Microsecond),
			q(0.99).Round(time.Microsecond), q(0.999).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	}
}

// measure runs the writers for d and returns every fdatasync's duration.
func measure(dir string, writers int, interval time.Duration, size int, d time.Duration) ([]time.Duration, error) {
	var (
		mu   sync.Mutex
		all  []time.Duration
		errs = make([]error, writers)
		wg   sync.WaitGroup
	)
	for i := range writers {
		wg.Go(func() {
			lat, err := write(filepath.Join(dir, fmt.Sprintf("w%d.log", i)), interval, size, d)
			errs[i] = err
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no fdatasync completed")
	}
	return all, nil
}

// write appends size bytes every interval to a new file at path and
// fdatasyncs it, for d.
func write(path string, interval time.Duration, size int, d time.Duration) ([]time.Duration, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer os.Remove(path)
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	var lat []time.Duration
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); {
		<-tick.C
		if _, err := f.Write(buf); err != nil {
			return lat, fmt.Errorf("append to %s: %w", path, err)
		}
		start := time.Now()
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return lat, fmt.Errorf("fdatasync %s: %w", path, err)
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fsync-contention:", err)
	os.Exit(1)
}
