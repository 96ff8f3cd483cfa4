package devcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kbroker/kbroker/internal/atomicfile"
)

// stateFile is the dev cluster's layout, kept in its directory so that a
// restart finds the same ports (clients and the brokers' own registrations
// in ZooKeeper name them) and the same data.
const stateFile = "devcluster.json"

// layout is what stateFile holds.
type layout struct {
	ZooKeeperPort int            `json:"zookeeper_port"`
	Brokers       []brokerLayout `json:"brokers"`
}

// brokerLayout is one broker's fixed place: its id, Kafka port and HTTP
// (metrics and console) port.
type brokerLayout struct {
	ID          int32 `json:"id"`
	Port        int   `json:"port"`
	MetricsPort int   `json:"metrics_port"`
}

// readLayout reads dir's layout; a directory without one gives the zero
// layout.
func readLayout(dir string) (layout, error) {
	var l layout
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, fmt.Errorf("read dev cluster layout: %w", err)
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return l, fmt.Errorf("dev cluster layout %s: %w", filepath.Join(dir, stateFile), err)
	}
	return l, nil
}

func writeLayout(dir string, l layout) error {
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, stateFile), append(data, '\n')); err != nil {
		return fmt.Errorf("write dev cluster layout: %w", err)
	}
	return nil
}

// completeLayout returns saved extended to brokers 1..n: the ports saved
// are kept (a restart keeps its addresses), missing ones are taken from
// freePort. Saved brokers beyond n stay in the layout (their data is kept)
// but are not started.
func completeLayout(saved layout, n int, freePort func() (int, error)) (layout, error) {
	l := layout{ZooKeeperPort: saved.ZooKeeperPort, Brokers: append([]brokerLayout(nil), saved.Brokers...)}
	port := func(p *int) error {
		if *p != 0 {
			return nil
		}
		v, err := freePort()
		if err != nil {
			return err
		}
		*p = v
		return nil
	}
	if err := port(&l.ZooKeeperPort); err != nil {
		return l, err
	}
	for id := int32(1); id <= int32(n); id++ {
		i := l.index(id)
		if i < 0 {
			l.Brokers = append(l.Brokers, brokerLayout{ID: id})
			i = len(l.Brokers) - 1
		}
		if err := port(&l.Brokers[i].Port); err != nil {
			return l, err
		}
		if err := port(&l.Brokers[i].MetricsPort); err != nil {
			return l, err
		}
	}
	return l, nil
}

func (l layout) index(id int32) int {
	for i, b := range l.Brokers {
		if b.ID == id {
			return i
		}
	}
	return -1
}

// brokerDir is broker id's directory (log.dirs is its data/, its output
// goes to kbroker.log beside it).
func brokerDir(dir string, id int32) string {
	return filepath.Join(dir, "broker-"+strconv.Itoa(int(id)))
}
