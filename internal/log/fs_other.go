//go:build !linux

package log

// Sync is fsync (the OS has no fdatasync that Go exposes).
func (f osFile) Sync() error { return f.File.Sync() }
