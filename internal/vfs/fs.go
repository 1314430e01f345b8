// Package vfs is the filesystem interface Berth's storage does its I/O
// through, so tests can inject faults: the operating system's (OS), an
// error-injecting wrapper (FaultFS), ReadFile, and WriteFileAtomic, the one
// way a file is replaced by renaming a new one over it.
package vfs

import (
	"io"
	"os"
	"sort"
)

// FS is a filesystem. Names are full paths.
type FS interface {
	// OpenFile opens a file as os.OpenFile does.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	RemoveAll(dir string) error
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir returns the names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	// SyncDir fsyncs a directory, making creations, renames and removals
	// in it durable.
	SyncDir(dir string) error
}

// File is an open file. The partition log writes with WriteAt (pwrite) at
// the end it tracks itself and reads with ReadAt (pread); Write writes at
// the file offset.
type File interface {
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
}

// FilesystemSyncer is an FS that can make every file of the filesystem
// holding a directory durable in one call (Linux's syncfs(2)): one journal
// commit and one device flush instead of one per file, which is what a
// group commit wants when it has hundreds of partitions to fsync. OS
// implements it on Linux; FaultFS when the FS it wraps does.
type FilesystemSyncer interface {
	// OpenFilesystem returns a handle on the filesystem holding dir. Open
	// it before writing the files it is to sync: its Sync reports a failed
	// write-back of any file of the filesystem since it was opened (once,
	// to the first Sync after the failure), never an older one.
	OpenFilesystem(dir string) (Filesystem, error)
}

// Filesystem is a handle from FilesystemSyncer.OpenFilesystem.
type Filesystem interface {
	// Sync makes every file of the filesystem durable, as fsync would
	// each. On an error it does not say which file failed: fsync each to
	// find out (their own error reports are not consumed by Sync).
	Sync() error
	Close() error
}

// OS returns the FS of the operating system.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// osFile is an os.File whose Sync is fdatasync where the OS has it
// (fs_linux.go) and fsync elsewhere.
type osFile struct{ *os.File }

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(dir string) error                  { return os.RemoveAll(dir) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) ReadDir(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadFile reads the whole of a small file (a checkpoint, a snapshot, the
// metadata WAL) through fs; an error matching os.ErrNotExist if it is
// missing.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !(err == io.EOF && n == len(b)) {
		return nil, err
	}
	return b[:n], nil
}
