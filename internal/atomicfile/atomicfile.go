// Package atomicfile replaces small state files (checkpoints, metadata) so
// that a crash leaves either the old contents or the new, never a torn
// file.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// TmpSuffix names the temporary file Write goes through; a crash can leave
// one behind, and log recovery removes it.
const TmpSuffix = ".tmp"

// Write replaces path with data: it writes path+TmpSuffix, syncs it, renames
// it over path and syncs the directory, so the rename itself survives a
// crash.
func Write(path string, data []byte) error { return write(path, data, 0o644) }

// WritePrivate is Write for a file only its owner may read (mode 0600):
// one holding secrets or key material.
func WritePrivate(path string, data []byte) error { return write(path, data, 0o600) }

func write(path string, data []byte, perm os.FileMode) error {
	tmp := path + TmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	// A leftover temporary file keeps its old mode through O_TRUNC.
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes the creations, renames and removals in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
