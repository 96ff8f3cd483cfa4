package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Write replaces the whole file and leaves no temporary file behind.
func TestWriteReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	for _, want := range []string{"first, longer contents\n", "second\n"} {
		if err := Write(path, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
		if _, err := os.Stat(path + TmpSuffix); !os.IsNotExist(err) {
			t.Fatalf("temporary file left behind: %v", err)
		}
	}
}

// A missing directory is an error, not a silent success.
func TestWriteMissingDir(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "no", "such"), []byte("x")); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

func TestWritePrivateMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	// A leftover temporary file with a wider mode must not widen the result.
	if err := os.WriteFile(path+TmpSuffix, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WritePrivate(path, []byte("key")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
}
