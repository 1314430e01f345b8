//go:build !linux

package vfs

// Sync is fsync (the OS has no fdatasync that Go exposes).
func (f osFile) Sync() error { return f.File.Sync() }
