package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// InitialControllerEpoch is /controller_epoch before the first election
// (KafkaController.InitialControllerEpoch); the first controller gets 1.
const InitialControllerEpoch int32 = 0

// ElectController tries to make brokerID the controller, as
// KafkaZkClient.registerControllerAndIncrementControllerEpoch: in one
// transaction, create the ephemeral /controller and move /controller_epoch
// from the epoch just read to epoch+1, conditional on its version (creating
// it with 0 first if absent). The winner gets the new epoch and the
// version the transaction wrote, epochZkVersion: every later controller
// write is fenced on it.
//
// Losing is not an error: won is false and epoch is the current one. If
// this broker already is the controller in this session (a repeated call,
// or a retry after a lost connection whose first attempt had won), won is
// true with the current epoch.
func (s *Store) ElectController(ctx context.Context, brokerID int32) (won bool, epoch int32, epochZkVersion int32, err error) {
	for attempt := 0; ; attempt++ {
		won, epoch, epochZkVersion, err = s.electOnce(ctx, brokerID)
		if !errors.Is(err, errNoController) {
			return won, epoch, epochZkVersion, err
		}
		if attempt == 5 {
			// Controllers come and go faster than we can look: report a
			// loss; the caller's controller watch tells it to try again.
			return false, epoch, -1, nil
		}
	}
}

// errNoController: an election lost to a controller that has already gone.
var errNoController = errors.New("no controller after a lost election")

func (s *Store) electOnce(ctx context.Context, brokerID int32) (won bool, epoch int32, epochZkVersion int32, err error) {
	curEpoch, curVersion, err := s.controllerEpochOrCreate(ctx)
	if err != nil {
		return false, 0, 0, fmt.Errorf("elect controller: %w", err)
	}
	newEpoch := curEpoch + 1
	res, err := s.multi(ctx,
		s.createOp(ControllerPath, EncodeController(brokerID, time.Now().UnixMilli()), gozk.FlagEphemeral),
		s.setOp(ControllerEpochPath, EncodeControllerEpoch(newEpoch), curVersion))
	switch {
	case err == nil:
		s.logger.Info("elected controller", "broker", brokerID, "controller_epoch", newEpoch, "epoch_zk_version", res[1].Stat.Version)
		return true, newEpoch, res[1].Stat.Version, nil
	case errors.Is(err, gozk.ErrNodeExists) || errors.Is(err, gozk.ErrBadVersion):
		return s.checkControllerAndEpoch(ctx, brokerID)
	default:
		return false, 0, 0, fmt.Errorf("elect controller: %w", err)
	}
}

// checkControllerAndEpoch decides a lost-looking election: did we (this
// session) create /controller after all?
func (s *Store) checkControllerAndEpoch(ctx context.Context, brokerID int32) (bool, int32, int32, error) {
	data, stat, err := s.get(ctx, ControllerPath)
	if errors.Is(err, ErrNoNode) {
		// Went away while we looked: nobody holds it now; try again.
		epoch, _, err := s.ControllerEpoch(ctx)
		if err != nil {
			return false, 0, 0, fmt.Errorf("elect controller: %w", err)
		}
		return false, epoch, -1, errNoController
	}
	if err != nil {
		return false, 0, 0, fmt.Errorf("elect controller: %w", err)
	}
	info, err := DecodeController(data)
	if err != nil {
		return false, 0, 0, s.malformedAt(err)
	}
	epoch, version, err := s.ControllerEpoch(ctx)
	if err != nil {
		return false, 0, 0, fmt.Errorf("elect controller: %w", err)
	}
	if info.BrokerID == brokerID && stat.EphemeralOwner == s.SessionID() {
		// Only our election transaction creates /controller in this
		// session, and it moved the epoch; nobody can move it again
		// while /controller exists.
		return true, epoch, version, nil
	}
	return false, epoch, -1, nil
}

// controllerEpochOrCreate reads /controller_epoch, creating it with
// InitialControllerEpoch when absent (maybeCreateControllerEpochZNode).
func (s *Store) controllerEpochOrCreate(ctx context.Context) (int32, int32, error) {
	epoch, version, err := s.ControllerEpoch(ctx)
	if !errors.Is(err, ErrNoNode) {
		return epoch, version, err
	}
	err = s.retry(ctx, func() error {
		_, err := s.conn.Create(s.abs(ControllerEpochPath), EncodeControllerEpoch(InitialControllerEpoch), 0, acl)
		return err
	})
	if err == nil {
		return InitialControllerEpoch, 0, nil
	}
	if !errors.Is(err, gozk.ErrNodeExists) {
		return 0, 0, fmt.Errorf("create %s: %w", s.abs(ControllerEpochPath), err)
	}
	return s.ControllerEpoch(ctx)
}

// ControllerEpoch reads /controller_epoch: the epoch and the znode version
// (ErrNoNode before the first election).
func (s *Store) ControllerEpoch(ctx context.Context) (epoch int32, zkVersion int32, err error) {
	data, stat, err := s.get(ctx, ControllerEpochPath)
	if err != nil {
		return 0, -1, err
	}
	epoch, err = DecodeControllerEpoch(data)
	if err != nil {
		return 0, -1, s.malformedAt(err)
	}
	return epoch, stat.Version, nil
}

// Controller reads /controller; ok is false when there is no controller.
func (s *Store) Controller(ctx context.Context) (info ControllerInfo, ok bool, err error) {
	data, _, err := s.get(ctx, ControllerPath)
	if errors.Is(err, ErrNoNode) {
		return ControllerInfo{}, false, nil
	}
	if err != nil {
		return ControllerInfo{}, false, err
	}
	info, err = DecodeController(data)
	if err != nil {
		return ControllerInfo{}, false, s.malformedAt(err)
	}
	return info, true, nil
}

// ControllerID is the controller's broker id, -1 when there is none.
func (s *Store) ControllerID(ctx context.Context) (int32, error) {
	info, ok, err := s.Controller(ctx)
	if err != nil || !ok {
		return -1, err
	}
	return info.BrokerID, nil
}

// ResignController deletes /controller, fenced on the caller's epoch
// (KafkaZkClient.deleteController), so other brokers elect a new one.
func (s *Store) ResignController(ctx context.Context, epochZkVersion int32) error {
	_, err := s.fencedMulti(ctx, epochZkVersion, s.deleteOp(ControllerPath, -1))
	if errors.Is(err, gozk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("resign controller: %w", err)
	}
	return nil
}

// WatchController delivers the controller's broker id (-1 for none) now
// and after every change of /controller, until ctx ends; then it closes the
// channel. A broker that sees -1 calls ElectController (Kafka's
// ControllerChangeHandler). Only the latest value is kept for a slow
// reader.
func (s *Store) WatchController(ctx context.Context) (<-chan int32, error) {
	return watchLoop(ctx, s, func() (int32, <-chan gozk.Event, error) {
		exists, _, ev, err := s.conn.ExistsW(s.abs(ControllerPath))
		if err != nil || !exists {
			return -1, ev, err
		}
		data, _, err := s.conn.Get(s.abs(ControllerPath))
		if errors.Is(err, gozk.ErrNoNode) {
			return -1, ev, nil // deleted since: the watch has fired
		}
		if err != nil {
			return -1, nil, err
		}
		info, err := DecodeController(data)
		if err != nil {
			return -1, nil, s.malformedAt(err)
		}
		return info.BrokerID, ev, nil
	}, func(a, b int32) bool { return a == b })
}
