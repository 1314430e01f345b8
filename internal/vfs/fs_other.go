//go:build !linux

package vfs

import "errors"

// OpenFilesystem is not supported here: each file is fsynced on its own.
func (osFS) OpenFilesystem(string) (Filesystem, error) { return nil, errors.ErrUnsupported }

// Sync is fsync (the OS has no fdatasync that Go exposes).
func (f osFile) Sync() error { return f.File.Sync() }
