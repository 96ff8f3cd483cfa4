package controller

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kbroker/kbroker/internal/atomicfile"
)

// localStateFile holds the embedded mode's cluster state in the log dir.
const localStateFile = "kbroker-cluster.json"

// localState is what the embedded mode persists.
type localState struct {
	Metadata *Metadata `json:"metadata"`
	// NextProducerIDBlock is the first producer id not yet handed out in a
	// block; ids below it are never reused, even after a crash.
	NextProducerIDBlock int64 `json:"next_producer_id_block"`
}

// LocalStore persists the embedded single-node cluster state in one JSON
// file, written atomically.
type LocalStore struct {
	path string
}

// NewLocalStore keeps the state in dir.
func NewLocalStore(dir string) *LocalStore {
	return &LocalStore{path: filepath.Join(dir, localStateFile)}
}

func (s *LocalStore) load() (*localState, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return &localState{Metadata: &Metadata{ClusterID: newClusterID(), ControllerID: -1, Topics: map[string]*Topic{}}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cluster state: %w", err)
	}
	var st localState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("cluster state file %s is damaged: %w", s.path, err)
	}
	if st.Metadata == nil {
		return nil, fmt.Errorf("cluster state file %s has no metadata", s.path)
	}
	if st.Metadata.Topics == nil {
		st.Metadata.Topics = map[string]*Topic{}
	}
	return &st, nil
}

func (s *LocalStore) save(st *localState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode cluster state: %w", err)
	}
	if err := atomicfile.Write(s.path, data); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	return nil
}

// newClusterID makes a Kafka-style cluster id: 16 random bytes, URL-safe
// base64 without padding.
func newClusterID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// newTopicID makes a random version-4 UUID that is not Kafka's reserved
// zero or one id.
func newTopicID() [16]byte {
	for {
		var id [16]byte
		rand.Read(id[:])
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if id != ([16]byte{}) && id != ([16]byte{15: 1}) {
			return id
		}
	}
}
