package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

var errInjected = errors.New("injected fault")

// replaced writes name's old contents, then replaces them through ffs.
func replaced(t *testing.T, ffs *FaultFS) (name string, err error) {
	t.Helper()
	name = filepath.Join(t.TempDir(), "checkpoint")
	if err := WriteFileAtomic(OS(), name, []byte("old contents\n")); err != nil {
		t.Fatal(err)
	}
	ffs.Record()
	return name, WriteFileAtomic(ffs, name, []byte("new contents\n"))
}

func contents(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func noTemp(t *testing.T, name string) {
	t.Helper()
	if _, err := os.Stat(name + TempSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind (stat: %v)", err)
	}
}

// The new file is written and fsynced before it is renamed over the old
// one, and the directory is fsynced after the rename.
func TestWriteFileAtomicSyncsFileBeforeRenameAndDirAfter(t *testing.T) {
	ffs := NewFaultFS(nil)
	name, err := replaced(t, ffs)
	if err != nil {
		t.Fatal(err)
	}
	tmp := name + TempSuffix
	want := []string{
		"open " + tmp, "write " + tmp, "sync " + tmp, "close " + tmp,
		"rename " + tmp + " " + name, "syncdir " + filepath.Dir(name),
	}
	if got := ffs.Ops(); !slices.Equal(got, want) {
		t.Fatalf("operations\n%q\nwant\n%q", got, want)
	}
	if got := contents(t, name); got != "new contents\n" {
		t.Fatalf("contents %q", got)
	}
}

// A failed fsync of the new file is reported, nothing is renamed: the
// target keeps its old contents and the temporary file is gone.
func TestWriteFileAtomicFailedFileSyncKeepsOldContents(t *testing.T) {
	ffs := NewFaultFS(nil)
	ffs.FailFileSyncs(errInjected)
	name, err := replaced(t, ffs)
	if !errors.Is(err, errInjected) {
		t.Fatalf("error %v, want the injected fsync failure", err)
	}
	if got := contents(t, name); got != "old contents\n" {
		t.Fatalf("contents %q, want the old ones", got)
	}
	noTemp(t, name)
	for _, op := range ffs.Ops() {
		if op[:6] == "rename" {
			t.Fatalf("renamed after a failed fsync: %q", ffs.Ops())
		}
	}
}

// A disk that fills up partway through the new file: reported (ENOSPC), the
// target keeps its old contents.
func TestWriteFileAtomicFullDiskKeepsOldContents(t *testing.T) {
	ffs := NewFaultFS(nil)
	ffs.FailWritesAfter(3, nil)
	name, err := replaced(t, ffs)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("error %v, want ENOSPC", err)
	}
	if got := contents(t, name); got != "old contents\n" {
		t.Fatalf("contents %q, want the old ones", got)
	}
	noTemp(t, name)
}

// A failed fsync of the directory comes after the rename, so it cannot
// keep the old contents in place; it is reported, so the caller does not
// take the new contents as durable, and the file holds one whole version.
func TestWriteFileAtomicFailedDirSyncIsReported(t *testing.T) {
	ffs := NewFaultFS(nil)
	ffs.FailDirSyncs(errInjected)
	name, err := replaced(t, ffs)
	if !errors.Is(err, errInjected) {
		t.Fatalf("error %v, want the injected directory fsync failure", err)
	}
	if got := contents(t, name); got != "new contents\n" && got != "old contents\n" {
		t.Fatalf("contents %q, want one whole version", got)
	}
	noTemp(t, name)
}

func BenchmarkWriteFileAtomic(b *testing.B) {
	name := filepath.Join(b.TempDir(), "checkpoint")
	data := []byte("1234567890\n")
	for b.Loop() {
		if err := WriteFileAtomic(OS(), name, data); err != nil {
			b.Fatal(err)
		}
	}
}
