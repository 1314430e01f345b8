package vfs

import (
	"os"
	"syscall"
)

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
