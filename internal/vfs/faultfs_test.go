package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// An injected fault picks its files and its turn: here the second write to
// one file fails (writing nothing), the other file's writes and the later
// writes to the first work.
func TestFaultFSInjectNthWriteToOneFile(t *testing.T) {
	dir := t.TempDir()
	ffs := NewFaultFS(nil)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	ffs.Inject(Fault{Op: "write", Match: func(n string) bool { return n == a }, After: 1, Times: 1, Err: errInjected})
	fa, err := ffs.OpenFile(a, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := ffs.OpenFile(b, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	for i, w := range []struct {
		f    File
		want error
	}{{fa, nil}, {fb, nil}, {fa, errInjected}, {fb, nil}, {fa, nil}} {
		n, err := w.f.Write([]byte("x"))
		if !errors.Is(err, w.want) || (err == nil) != (n == 1) {
			t.Fatalf("write %d: %d, %v; want %v", i, n, err, w.want)
		}
	}
	if got := contents(t, a); got != "xx" {
		t.Fatalf("%s holds %q, want the two writes that worked", a, got)
	}
}

// Every operation can be failed; the default error is EIO, and
// ClearFaults heals.
func TestFaultFSInjectEveryOperation(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	ffs := NewFaultFS(nil)
	if err := WriteFileAtomic(ffs, name, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"open", "write", "sync", "close", "rename", "syncdir"} {
		ffs.Inject(Fault{Op: op})
		if err := WriteFileAtomic(ffs, name, []byte("v2")); !errors.Is(err, syscall.EIO) {
			t.Fatalf("%s fault: %v, want EIO", op, err)
		}
		ffs.ClearFaults()
		if got := contents(t, name); op != "syncdir" && got != "v1" {
			t.Fatalf("%s fault: contents %q, want the old ones", op, got)
		}
		if err := WriteFileAtomic(ffs, name, []byte("v1")); err != nil {
			t.Fatalf("after ClearFaults: %v", err)
		}
	}
	ffs.Inject(Fault{Op: "remove", Match: func(n string) bool { return strings.HasSuffix(n, "/f") }, Err: errInjected})
	if err := ffs.Remove(name); !errors.Is(err, errInjected) {
		t.Fatalf("remove fault: %v", err)
	}
	if got := contents(t, name); got != "v1" {
		t.Fatalf("a failed remove removed the file (%q)", got)
	}
}

// A FaultFS offers filesystem syncs only when asked, so a test's fsync
// faults see every file's fsync; once enabled, the sync fails while a file
// fsync fault is armed and unused, without using it up.
func TestFaultFSFilesystemSync(t *testing.T) {
	f := NewFaultFS(nil)
	dir := t.TempDir()
	if _, err := f.OpenFilesystem(dir); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("OpenFilesystem before EnableFilesystemSync: %v, want ErrUnsupported", err)
	}
	f.EnableFilesystemSync()
	fsys, err := f.OpenFilesystem(dir)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("this OS cannot sync a filesystem at once")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if err := fsys.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	f.Inject(Fault{Op: "sync", Times: 1})
	if err := fsys.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync with a file fsync fault armed: %v, want EIO", err)
	}
	file, err := f.OpenFile(dir+"/x", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if err := file.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the file's fsync: %v, want the armed EIO (the filesystem sync must not use it up)", err)
	}
	if err := fsys.Sync(); err != nil {
		t.Fatalf("Sync once the fault is used up: %v", err)
	}
	f.Inject(Fault{Op: "syncfs"})
	if err := fsys.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync with a syncfs fault: %v, want EIO", err)
	}
}
