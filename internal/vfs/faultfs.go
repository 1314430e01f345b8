package vfs

import (
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// FaultFS wraps an FS and injects faults: writes that run out of space
// partway (like a full disk: the bytes that fit are written, then ENOSPC),
// failing fsyncs of files or directories, and any operation on chosen files
// failing (Inject: the nth write to one file, say). It can also record the
// operations done through it, in order. Tests use it to prove that a failed
// write leaves no partial batch, that a failed fsync loses no acknowledged
// record, and that a file is fsynced before it is renamed into place. Safe
// for concurrent use.
type FaultFS struct {
	fs FS

	mu          sync.Mutex
	writeBudget int64 // bytes writable before writeErr; < 0 unlimited
	writeErr    error
	fileSyncErr error
	dirSyncErr  error
	syncHook    func(name string)
	fsSync      bool
	written     int64
	recording   bool
	ops         []string
	faults      []*armedFault
}

// Fault makes chosen operations through a FaultFS fail; see Inject.
type Fault struct {
	// Op is the operation, named as in Ops: "open", "write", "sync",
	// "close", "remove", "rename", "syncdir" or "syncfs".
	Op string
	// Match picks the files (the directory of a syncdir; either name of a
	// rename); nil picks every one.
	Match func(name string) bool
	// After lets this many picked operations succeed before the first
	// failure.
	After int
	// Times is how many picked operations fail, after which they succeed
	// again; 0 fails every one.
	Times int
	// Err is what a failed operation returns; nil is EIO.
	Err error
}

type armedFault struct {
	Fault
	seen, failed int
}

// Inject arms fault until ClearFaults. A failed write writes nothing; a
// failed close still closes the file; the other operations fail without
// reaching the wrapped FS. Faults armed together are checked in the order
// they were armed, and the first that fails an operation counts it.
func (f *FaultFS) Inject(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fault.Err == nil {
		fault.Err = syscall.EIO
	}
	f.faults = append(f.faults, &armedFault{Fault: fault})
}

// ClearFaults disarms every fault armed with Inject.
func (f *FaultFS) ClearFaults() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// injected returns the error an armed fault gives operation op on names,
// or nil.
func (f *FaultFS) injected(op string, names ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range f.faults {
		if ft.Op != op || ft.Times > 0 && ft.failed >= ft.Times {
			continue
		}
		if ft.Match != nil && !slices.ContainsFunc(names, ft.Match) {
			continue
		}
		if ft.seen++; ft.seen <= ft.After {
			continue
		}
		ft.failed++
		return ft.Err
	}
	return nil
}

// pendingSyncFault returns the error of the first armed "sync" fault that
// may still fail an fsync, without counting an operation against it.
func (f *FaultFS) pendingSyncFault() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range f.faults {
		if ft.Op == "sync" && (ft.Times == 0 || ft.failed < ft.Times) {
			return ft.Err
		}
	}
	return nil
}

// NewFaultFS wraps fs (nil: the OS filesystem) with no faults armed.
func NewFaultFS(fs FS) *FaultFS {
	if fs == nil {
		fs = OS()
	}
	return &FaultFS{fs: fs, writeBudget: -1}
}

// FailWritesAfter lets n more bytes be written, then fails writes with err
// (ENOSPC when nil); a write crossing the limit writes its first bytes and
// fails. n < 0 lifts the limit.
func (f *FaultFS) FailWritesAfter(n int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		err = syscall.ENOSPC
	}
	f.writeBudget, f.writeErr = n, err
}

// FailSyncs makes File.Sync and SyncDir fail with err; nil heals.
func (f *FaultFS) FailSyncs(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fileSyncErr, f.dirSyncErr = err, err
}

// FailFileSyncs makes File.Sync fail with err (SyncDir works); nil heals.
func (f *FaultFS) FailFileSyncs(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fileSyncErr = err
}

// FailDirSyncs makes SyncDir fail with err (File.Sync works); nil heals.
func (f *FaultFS) FailDirSyncs(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dirSyncErr = err
}

// Record starts recording operations afresh (see Ops).
func (f *FaultFS) Record() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recording, f.ops = true, nil
}

// Ops returns the operations done since Record, in order, one string each:
// "open <name>", "write <name>", "sync <name>", "close <name>", "remove
// <name>", "rename <old> <new>", "syncdir <dir>". Failed operations are
// included.
func (f *FaultFS) Ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ops...)
}

func (f *FaultFS) record(op string, names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recording {
		f.ops = append(f.ops, strings.Join(append([]string{op}, names...), " "))
	}
}

// SetSyncHook makes every File.Sync call fn(name) first (nil removes it);
// tests block in it to prove what goes on during an fsync.
func (f *FaultFS) SetSyncHook(fn func(name string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncHook = fn
}

// Written is the number of bytes written through the FS so far.
func (f *FaultFS) Written() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.written
}

// allow returns how many of n bytes may be written and the error to report
// for the rest.
func (f *FaultFS) allow(n int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.writeBudget < 0 || int64(n) <= f.writeBudget {
		if f.writeBudget >= 0 {
			f.writeBudget -= int64(n)
		}
		f.written += int64(n)
		return n, nil
	}
	m := int(f.writeBudget)
	f.writeBudget = 0
	f.written += int64(m)
	return m, f.writeErr
}

func (f *FaultFS) syncErrors() (file, dir error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fileSyncErr, f.dirSyncErr
}

func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f.record("open", name)
	if err := f.injected("open", name); err != nil {
		return nil, err
	}
	file, err := f.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

func (f *FaultFS) Remove(name string) error {
	f.record("remove", name)
	if err := f.injected("remove", name); err != nil {
		return err
	}
	return f.fs.Remove(name)
}

func (f *FaultFS) Rename(oldname, newname string) error {
	f.record("rename", oldname, newname)
	if err := f.injected("rename", oldname, newname); err != nil {
		return err
	}
	return f.fs.Rename(oldname, newname)
}

func (f *FaultFS) RemoveAll(dir string) error                  { return f.fs.RemoveAll(dir) }
func (f *FaultFS) MkdirAll(dir string, perm os.FileMode) error { return f.fs.MkdirAll(dir, perm) }
func (f *FaultFS) ReadDir(dir string) ([]string, error)        { return f.fs.ReadDir(dir) }

func (f *FaultFS) SyncDir(dir string) error {
	f.record("syncdir", dir)
	if _, err := f.syncErrors(); err != nil {
		return err
	}
	if err := f.injected("syncdir", dir); err != nil {
		return err
	}
	return f.fs.SyncDir(dir)
}

// EnableFilesystemSync lets OpenFilesystem pass to the wrapped FS. Off by
// default, so that a test's fsync faults and hook see every file's fsync.
func (f *FaultFS) EnableFilesystemSync() {
	f.mu.Lock()
	f.fsSync = true
	f.mu.Unlock()
}

// OpenFilesystem passes to the wrapped FS after EnableFilesystemSync
// (errors.ErrUnsupported before, or if the wrapped FS cannot). The
// handle's Sync is recorded ("syncfs", with dir as its name, for Inject
// and the sync hook) and fails, as a real syncfs would report a file's
// failed write-back, while FailSyncs or FailFileSyncs is set or a "sync"
// fault is armed and not used up (the fsyncs that follow it find the file).
func (f *FaultFS) OpenFilesystem(dir string) (Filesystem, error) {
	f.mu.Lock()
	enabled := f.fsSync
	f.mu.Unlock()
	fss, ok := f.fs.(FilesystemSyncer)
	if !ok || !enabled {
		return nil, errors.ErrUnsupported
	}
	inner, err := fss.OpenFilesystem(dir)
	if err != nil {
		return nil, err
	}
	return &faultFilesystem{inner: inner, fs: f, dir: dir}, nil
}

type faultFilesystem struct {
	inner Filesystem
	fs    *FaultFS
	dir   string
}

func (s *faultFilesystem) Sync() error {
	s.fs.record("syncfs", s.dir)
	s.fs.mu.Lock()
	hook := s.fs.syncHook
	s.fs.mu.Unlock()
	if hook != nil {
		hook(s.dir)
	}
	if err, _ := s.fs.syncErrors(); err != nil {
		return err
	}
	if err := s.fs.pendingSyncFault(); err != nil {
		return err
	}
	if err := s.fs.injected("syncfs", s.dir); err != nil {
		return err
	}
	return s.inner.Sync()
}

func (s *faultFilesystem) Close() error { return s.inner.Close() }

type faultFile struct {
	File
	fs   *FaultFS
	name string
}

func (ff *faultFile) Write(b []byte) (int, error) {
	ff.fs.record("write", ff.name)
	if err := ff.fs.injected("write", ff.name); err != nil {
		return 0, err
	}
	n, ferr := ff.fs.allow(len(b))
	m, err := ff.File.Write(b[:n])
	if err == nil {
		err = ferr
	}
	return m, err
}

func (ff *faultFile) WriteAt(b []byte, off int64) (int, error) {
	ff.fs.record("write", ff.name)
	if err := ff.fs.injected("write", ff.name); err != nil {
		return 0, err
	}
	n, ferr := ff.fs.allow(len(b))
	m, err := ff.File.WriteAt(b[:n], off)
	if err == nil {
		err = ferr
	}
	return m, err
}

func (ff *faultFile) Sync() error {
	ff.fs.record("sync", ff.name)
	ff.fs.mu.Lock()
	hook := ff.fs.syncHook
	ff.fs.mu.Unlock()
	if hook != nil {
		hook(ff.name)
	}
	if err, _ := ff.fs.syncErrors(); err != nil {
		return err
	}
	if err := ff.fs.injected("sync", ff.name); err != nil {
		return err
	}
	return ff.File.Sync()
}

func (ff *faultFile) Close() error {
	ff.fs.record("close", ff.name)
	err := ff.File.Close()
	if ierr := ff.fs.injected("close", ff.name); ierr != nil {
		return ierr
	}
	return err
}
