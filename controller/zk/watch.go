package zk

import (
	"context"
	"errors"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// watchRetryBackoff spaces re-reads after a failed read in a watch loop.
const watchRetryBackoff = 200 * time.Millisecond

// watchLoop delivers read's value now and after every change until ctx
// ends (or the Store closes), then closes the channel. read returns the
// value and a one-shot ZooKeeper watch for its next change.
//
// The channel holds only the latest value: a slow reader skips
// intermediate ones but always gets the newest. Watches lost with the
// session (expiry) are re-armed on the next session, with a fresh read, so
// a change made meanwhile is not missed.
func watchLoop[T any](ctx context.Context, s *Store, read func() (T, <-chan gozk.Event, error), equal func(a, b T) bool) (<-chan T, error) {
	var v T
	var ev <-chan gozk.Event
	err := s.retry(ctx, func() error {
		var err error
		v, ev, err = read()
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(chan T, 1)
	out <- v
	go func() {
		defer close(out)
		last := v
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.closed:
				return
			case <-ev:
				// Any event, including "not watching any more" after an
				// expiry or disconnect: read again (which waits for a
				// connection) and re-arm.
			}
			for {
				err := s.retry(ctx, func() error {
					var err error
					v, ev, err = read()
					return err
				})
				if err == nil {
					break
				}
				if errors.Is(err, ErrClosed) || ctx.Err() != nil {
					return
				}
				s.logger.Warn("ZooKeeper watch read failed; retrying", "err", err)
				select {
				case <-time.After(watchRetryBackoff):
				case <-ctx.Done():
					return
				case <-s.closed:
					return
				}
			}
			if equal(last, v) {
				continue
			}
			last = v
			select {
			case out <- v:
			default:
				// Replace the unread, older value. Only this goroutine
				// sends, so the buffer has room after the drain.
				select {
				case <-out:
				default:
				}
				out <- v
			}
		}
	}()
	return out, nil
}
