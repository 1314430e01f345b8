package vfs

import (
	"fmt"
	"os"
	"path/filepath"
)

// TempSuffix ends the name of the file WriteFileAtomic writes before it
// renames it into place. A crash can leave one behind; whoever owns the
// directory deletes such files when it opens it.
const TempSuffix = ".tmp"

// WriteFileAtomic replaces name with data so that a crash at any moment
// leaves name holding either its old contents or data, never part of data:
// it writes name+TempSuffix, fsyncs it, renames it over name, and fsyncs the
// directory, which makes the rename durable. Every file Berth replaces by
// renaming goes through here.
//
// An error before the rename (create, write, fsync, close, or the rename
// itself) leaves name as it was and removes the temporary file. An error
// from the directory fsync comes after the rename: name then reads data, but
// which of the two versions survives a crash is unknown (either one, whole).
// Both are returned, so a caller never takes such a write as durable.
func WriteFileAtomic(fs FS, name string, data []byte) error {
	tmp := name + TempSuffix
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("vfs: replace %s: %w", name, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, name)
	}
	if err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("vfs: replace %s: %w", name, err)
	}
	if err := fs.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("vfs: replace %s: sync directory: %w", name, err)
	}
	return nil
}
