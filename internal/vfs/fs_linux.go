package vfs

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpenFilesystem keeps dir open: syncfs(2) reports write-back errors on
// the filesystem since the descriptor it is given was opened.
func (osFS) OpenFilesystem(dir string) (Filesystem, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return osFilesystem{f}, nil
}

type osFilesystem struct{ f *os.File }

func (s osFilesystem) Sync() error {
	for {
		err := unix.Syncfs(int(s.f.Fd()))
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "syncfs", Path: s.f.Name(), Err: err}
			}
			return nil
		}
	}
}

func (s osFilesystem) Close() error { return s.f.Close() }

// Sync is fdatasync: it flushes the data and the metadata needed to read
// it back (the size) but not timestamps, saving a journal write.
func (f osFile) Sync() error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
