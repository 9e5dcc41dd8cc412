package sqlite

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// walBufferVFS is the name of a VFS that is the platform's own (unix) but
// for one thing: the writes to a WAL file are gathered in memory and made
// in one system call when SQLite syncs the file (or must see it as it is),
// rather than two per page. SQLite writes each frame of a commit as a
// 24-byte header and then its page, each a pwrite of its own: a serial
// step's commit of about nine frames was 18 system calls before its
// fdatasync, which on this project's two-core machines cost more than the
// statements that made the frames.
//
// The bytes, their offsets and the sync are SQLite's, unchanged:
//   - A commit is durable when its sync returns, as before: the gathered
//     writes are made first.
//   - No other connection reads a frame before it is written: a commit's
//     frames become visible when the WAL index's header names them, which
//     SQLite writes after the sync in synchronous=FULL (the only mode the
//     store's writer opens the database with, checked by checkWAL), and
//     only when a commit is padded to a sector boundary does it write
//     after the sync, which a database whose device lacks
//     POWERSAFE_OVERWRITE asks for (its WAL is left unbuffered).
//   - What a transaction wrote and did not commit (pages spilled before a
//     rollback) is dropped when SQLite releases the WAL's write lock,
//     rather than written later over frames another connection committed
//     meanwhile: the VFS wraps the database file's shared-memory lock to
//     see that release.
//
// Only the writer's connection uses it (the only one that writes the WAL);
// the readers and the checkpointer read the file with the plain VFS.
const walBufferVFS = "longhaul-walbuf"

// maxWALBuffer bounds what a WAL file's buffer gathers before it writes:
// a large transaction's frames go in writes of this size. Below SQLite's
// limit on one write of its own unix VFS (128 KiB, its seekAndWrite masks
// the length to 17 bits), which makes each flush one system call.
const maxWALBuffer = 64 << 10

// The unix VFS's single write is at most 0x1ffff bytes: this fails to
// compile if a flush could be longer.
var _ [0x1ffff - maxWALBuffer]byte

// cVFS is SQLite's sqlite3_vfs (version 3), field for field: Go aligns the
// pointers after the three ints as C does, on 32- and 64-bit platforms.
type cVFS struct {
	iVersion, szOsFile, mxPathname int32
	pNext, zName, pAppData         uintptr
	xOpen, xDelete, xAccess        uintptr
	xFullPathname                  uintptr
	xDlOpen, xDlError, xDlSym      uintptr
	xDlClose, xRandomness, xSleep  uintptr
	xCurrentTime, xGetLastError    uintptr
	xCurrentTimeInt64              uintptr
	xSetSystemCall, xGetSystemCall uintptr
	xNextSystemCall                uintptr
}

// cIOMethods is SQLite's sqlite3_io_methods (version 3).
type cIOMethods struct {
	iVersion                                  int32
	xClose, xRead, xWrite, xTruncate, xSync   uintptr
	xFileSize, xLock, xUnlock                 uintptr
	xCheckReservedLock, xFileControl          uintptr
	xSectorSize, xDeviceCharacteristics       uintptr
	xShmMap, xShmLock, xShmBarrier, xShmUnmap uintptr
	xFetch, xUnfetch                          uintptr
}

// walFile is what a file of the VFS keeps after the platform VFS's own
// file structure (at walFileOffset of it, in the memory SQLite allocated
// for the file, szOsFile bytes): for a WAL file, the platform's methods,
// which the file's own are wrapped around, and the buffer; for a database
// file, the platform's methods and its WAL file, if buffered. SQLite uses
// a file from one connection at a time, under that connection's mutex,
// and closes a database's WAL before the database.
type walFile struct {
	inner uintptr // *cIOMethods: the platform VFS's methods for the file
	link  uintptr // a WAL file's database file, a database file's WAL file (sqlite3_file pointers), or 0
	buf   uintptr // C memory, cap bytes
	cap   int64
	off   int64 // the file offset of buf's first byte
	n     int64 // bytes gathered
}

// walWrites counts SQLite's writes to the WAL files of the VFS, and
// walFileWrites the writes made to the files (a buffer's, or one too large
// to gather): what the buffering saves, which its tests measure.
var walWrites, walFileWrites atomic.Int64

// walFlushFault, set by a test, makes the next flush fail as a full disk
// does (the platform's write returns SQLITE_FULL on ENOSPC).
var walFlushFault atomic.Bool

var (
	walVFSOnce sync.Once
	walVFSErr  error
	// baseVFS is the platform VFS (*cVFS) the buffering one opens files
	// with; walFileOffset is where a file's walFile starts.
	baseVFS       uintptr
	walFileOffset uintptr

	// walMethods and dbMethods map the platform's methods for a WAL file
	// and for a database file to the VFS's (all *cIOMethods): made once
	// per table, in C memory, never freed (the platform has a handful);
	// ownDBMethods holds dbMethods' values, to tell a database file of
	// this VFS.
	methodsMu    sync.Mutex
	walMethods   = map[uintptr]uintptr{}
	dbMethods    = map[uintptr]uintptr{}
	ownDBMethods = map[uintptr]bool{}
)

// registerWALBufferVFS registers the VFS named walBufferVFS, once per
// process, and returns its name: "" where SQLite has no unix VFS (the
// store then writes with the platform's own), whose one write of at most
// 0x1ffff bytes and use of its VFS's fields the wrapping relies on.
func registerWALBufferVFS() (string, error) {
	walVFSOnce.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		unix, err := libc.CString("unix")
		if err != nil {
			walVFSErr = fmt.Errorf("register the %s VFS: %w", walBufferVFS, err)
			return
		}
		defer libc.Xfree(tls, unix)
		base := sqlite3.Xsqlite3_vfs_find(tls, unix)
		if base == 0 {
			return
		}
		name, err := libc.CString(walBufferVFS)
		if err != nil {
			walVFSErr = fmt.Errorf("register the %s VFS: %w", walBufferVFS, err)
			return
		}
		b := (*cVFS)(cPtr(base))
		const align = unsafe.Alignof(uintptr(0))
		walFileOffset = (uintptr(b.szOsFile) + align - 1) &^ (align - 1)
		p := libc.Xmalloc(tls, libc.Tsize_t(unsafe.Sizeof(cVFS{})))
		if p == 0 {
			walVFSErr = fmt.Errorf("register the %s VFS: out of memory", walBufferVFS)
			return
		}
		v := (*cVFS)(cPtr(p))
		// Every method but xOpen is the platform's, called with this VFS:
		// none of them reads the VFS they are given but xOpen (which finds
		// its locking style in pAppData), and xOpen calls the platform's
		// with the platform's VFS.
		*v = *b
		v.pNext = 0
		v.zName = name
		v.szOsFile = int32(walFileOffset + unsafe.Sizeof(walFile{}))
		v.xOpen = cFunc(walBufferOpen)
		baseVFS = base
		if rc := sqlite3.Xsqlite3_vfs_register(tls, p, 0); rc != sqlite3.SQLITE_OK {
			walVFSErr = fmt.Errorf("register the %s VFS: SQLite error %d", walBufferVFS, rc)
		}
	})
	if walVFSErr != nil || baseVFS == 0 {
		return "", walVFSErr
	}
	return walBufferVFS, nil
}

// walBufferOpen is the VFS's xOpen: the platform's, and then a database
// file's methods wrapped in ones that see the WAL's write lock released
// (dbShmLock), and a WAL file's in the buffering ones, when its database
// file is this VFS's and its device has POWERSAFE_OVERWRITE (see
// walBufferVFS).
func walBufferOpen(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	b := (*cVFS)(cPtr(baseVFS))
	rc := callOpen(b.xOpen, tls, baseVFS, zName, pFile, flags, pOutFlags)
	file := (*uintptr)(cPtr(pFile)) // sqlite3_file's pMethods
	if rc != sqlite3.SQLITE_OK || *file == 0 {
		return rc
	}
	switch {
	case flags&sqlite3.SQLITE_OPEN_MAIN_DB != 0:
		methods, err := methodsFor(tls, dbMethods, *file, wrapDBMethods)
		if err != nil {
			return closeOnError(tls, pFile, sqlite3.SQLITE_NOMEM)
		}
		*walFileOf(pFile) = walFile{inner: *file}
		*file = methods
	case flags&sqlite3.SQLITE_OPEN_WAL != 0:
		db := sqlite3.Xsqlite3_database_file_object(tls, zName)
		if db == 0 || !isOwnDBFile(db) {
			return rc
		}
		dbf := walFileOf(db)
		if callDeviceCharacteristics(innerMethods(dbf).xDeviceCharacteristics, tls, db)&sqlite3.SQLITE_IOCAP_POWERSAFE_OVERWRITE == 0 {
			return rc
		}
		methods, err := methodsFor(tls, walMethods, *file, wrapWALMethods)
		if err != nil {
			return closeOnError(tls, pFile, sqlite3.SQLITE_NOMEM)
		}
		*walFileOf(pFile) = walFile{inner: *file, link: db}
		*file = methods
		dbf.link = pFile
	}
	return rc
}

// closeOnError closes a file the platform opened and returns rc: SQLite
// does not close a file whose xOpen failed.
func closeOnError(tls *libc.TLS, pFile uintptr, rc int32) int32 {
	file := (*uintptr)(cPtr(pFile))
	callClose((*cIOMethods)(cPtr(*file)).xClose, tls, pFile)
	*file = 0
	return rc
}

// methodsFor returns the VFS's methods around inner from cache, made by
// wrap once.
func methodsFor(tls *libc.TLS, cache map[uintptr]uintptr, inner uintptr, wrap func(*cIOMethods)) (uintptr, error) {
	methodsMu.Lock()
	defer methodsMu.Unlock()
	if m, ok := cache[inner]; ok {
		return m, nil
	}
	p := libc.Xmalloc(tls, libc.Tsize_t(unsafe.Sizeof(cIOMethods{})))
	if p == 0 {
		return 0, fmt.Errorf("out of memory")
	}
	m := (*cIOMethods)(cPtr(p))
	*m = *(*cIOMethods)(cPtr(inner))
	wrap(m)
	cache[inner] = p
	return p, nil
}

func wrapDBMethods(m *cIOMethods) {
	m.xClose = cFunc(dbClose)
	m.xShmLock = cFunc(dbShmLock)
	ownDBMethods[uintptr(unsafe.Pointer(m))] = true
}

func wrapWALMethods(m *cIOMethods) {
	m.xClose = cFunc(walClose)
	m.xRead = cFunc(walRead)
	m.xWrite = cFunc(walWrite)
	m.xTruncate = cFunc(walTruncate)
	m.xSync = cFunc(walSync)
	m.xFileSize = cFunc(walFileSize)
	m.xFileControl = cFunc(walFileControl)
}

// isOwnDBFile reports whether the database file pFile was opened by this
// VFS (its methods are dbMethods').
func isOwnDBFile(pFile uintptr) bool {
	methodsMu.Lock()
	defer methodsMu.Unlock()
	return ownDBMethods[*(*uintptr)(cPtr(pFile))]
}

// walWriteLock is the index of SQLite's WAL write lock among the
// shared-memory locks (WAL_WRITE_LOCK in wal.c).
const walWriteLock = 0

// dbShmLock is a database file's xShmLock: the platform's, and when SQLite
// releases the WAL's write lock, its transaction is over: what the WAL's
// buffer still holds was never committed (a commit's sync wrote it), and
// is dropped.
func dbShmLock(tls *libc.TLS, pFile uintptr, ofst, n, flags int32) int32 {
	d := walFileOf(pFile)
	rc := callShmLock(innerMethods(d).xShmLock, tls, pFile, ofst, n, flags)
	if rc == sqlite3.SQLITE_OK && d.link != 0 && ofst == walWriteLock && n == 1 &&
		flags == sqlite3.SQLITE_SHM_UNLOCK|sqlite3.SQLITE_SHM_EXCLUSIVE {
		walFileOf(d.link).n = 0
	}
	return rc
}

// dbClose is a database file's xClose: its WAL, if still open, forgets it.
func dbClose(tls *libc.TLS, pFile uintptr) int32 {
	d := walFileOf(pFile)
	inner := innerMethods(d)
	if d.link != 0 {
		walFileOf(d.link).link = 0
	}
	*d = walFile{}
	return callClose(inner.xClose, tls, pFile)
}

func walFileOf(pFile uintptr) *walFile {
	return (*walFile)(cPtr(pFile + walFileOffset))
}

func innerMethods(f *walFile) *cIOMethods {
	return (*cIOMethods)(cPtr(f.inner))
}

// walWrite gathers a write that continues the buffer, or rewrites bytes
// in it (SQLite rewrites a frame of the open transaction in place); any
// other write makes the buffer's first.
func walWrite(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	walWrites.Add(1)
	f := walFileOf(pFile)
	amt := int64(iAmt)
	if f.n > 0 {
		end := f.off + f.n
		switch {
		case iOfst >= f.off && iOfst+amt <= end:
			copy(cBytes(f.buf+uintptr(iOfst-f.off), amt), cBytes(zBuf, amt))
			return sqlite3.SQLITE_OK
		case iOfst == end && f.n+amt <= maxWALBuffer:
			if rc := f.grow(tls, f.n+amt); rc != sqlite3.SQLITE_OK {
				return rc
			}
			copy(cBytes(f.buf+uintptr(f.n), amt), cBytes(zBuf, amt))
			f.n += amt
			return sqlite3.SQLITE_OK
		}
		if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if amt > maxWALBuffer {
		walFileWrites.Add(1)
		return callWrite(innerMethods(f).xWrite, tls, pFile, zBuf, iAmt, iOfst)
	}
	if rc := f.grow(tls, amt); rc != sqlite3.SQLITE_OK {
		return rc
	}
	copy(cBytes(f.buf, amt), cBytes(zBuf, amt))
	f.off, f.n = iOfst, amt
	return sqlite3.SQLITE_OK
}

// grow makes the buffer hold at least n bytes.
func (f *walFile) grow(tls *libc.TLS, n int64) int32 {
	if n <= f.cap {
		return sqlite3.SQLITE_OK
	}
	c := max(n, min(2*f.cap, maxWALBuffer), 16<<10)
	p := libc.Xrealloc(tls, f.buf, libc.Tsize_t(c))
	if p == 0 {
		return sqlite3.SQLITE_NOMEM
	}
	f.buf, f.cap = p, c
	return sqlite3.SQLITE_OK
}

// flush writes what the buffer gathered, in one call of the platform's
// xWrite (one pwrite), and empties it; on an error the buffer is emptied
// all the same (SQLite rolls the transaction back, and will write its
// frames again).
func (f *walFile) flush(tls *libc.TLS, pFile uintptr) int32 {
	if f.n == 0 {
		return sqlite3.SQLITE_OK
	}
	n, off := f.n, f.off
	f.n = 0
	if walFlushFault.CompareAndSwap(true, false) {
		return sqlite3.SQLITE_FULL
	}
	walFileWrites.Add(1)
	return callWrite(innerMethods(f).xWrite, tls, pFile, f.buf, int32(n), off)
}

// flushBefore is flush for the methods that do not write (xRead,
// xFileSize, xTruncate, xFileControl). Its failure is an I/O error, which
// rolls the transaction back whole: frames SQLite was told were written
// are lost, and SQLite puts its pager in its error state only for a failed
// write or sync; on SQLITE_FULL from a read it would roll back the
// statement alone and could commit a transaction missing them.
func (f *walFile) flushBefore(tls *libc.TLS, pFile uintptr) int32 {
	if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return sqlite3.SQLITE_IOERR_WRITE
	}
	return sqlite3.SQLITE_OK
}

func walSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	f := walFileOf(pFile)
	if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return callSync(innerMethods(f).xSync, tls, pFile, flags)
}

func walRead(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	f := walFileOf(pFile)
	if rc := f.flushBefore(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return callRead(innerMethods(f).xRead, tls, pFile, zBuf, iAmt, iOfst)
}

func walTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	f := walFileOf(pFile)
	if rc := f.flushBefore(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return callTruncate(innerMethods(f).xTruncate, tls, pFile, size)
}

func walFileSize(tls *libc.TLS, pFile, pSize uintptr) int32 {
	f := walFileOf(pFile)
	if rc := f.flushBefore(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return callFileSize(innerMethods(f).xFileSize, tls, pFile, pSize)
}

func walFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	f := walFileOf(pFile)
	if rc := f.flushBefore(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return callFileControl(innerMethods(f).xFileControl, tls, pFile, op, pArg)
}

// walClose closes the file and frees the buffer, which holds nothing
// committed: SQLite closes a WAL after its last transaction, whose commit
// wrote it and whose end (dbShmLock) emptied it.
func walClose(tls *libc.TLS, pFile uintptr) int32 {
	f := walFileOf(pFile)
	inner, buf := innerMethods(f), f.buf
	if f.link != 0 {
		walFileOf(f.link).link = 0
	}
	*f = walFile{}
	rc := callClose(inner.xClose, tls, pFile)
	if buf != 0 {
		libc.Xfree(tls, buf)
	}
	return rc
}

// The C ABI of modernc.org/sqlite: a function pointer is the address of a
// Go func value (of a top-level function, which never moves), and memory
// SQLite allocates is outside the Go heap.

func cPtr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func cBytes(p uintptr, n int64) []byte { return unsafe.Slice((*byte)(cPtr(p)), n) }

// cFunc is the C function pointer of f, which must be a top-level function
// (a closure's func value is on the heap, and the GC does not see a
// uintptr).
func cFunc[F any](f F) uintptr { return *(*uintptr)(unsafe.Pointer(&f)) }

func callOpen(fp uintptr, tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	return (*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&fp)))(tls, pVfs, zName, pFile, flags, pOutFlags)
}

func callWrite(fp uintptr, tls *libc.TLS, pFile, buf uintptr, n int32, off int64) int32 {
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&fp)))(tls, pFile, buf, n, off)
}

func callRead(fp uintptr, tls *libc.TLS, pFile, buf uintptr, n int32, off int64) int32 {
	return callWrite(fp, tls, pFile, buf, n, off) // the same signature
}

func callSync(fp uintptr, tls *libc.TLS, pFile uintptr, flags int32) int32 {
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&fp)))(tls, pFile, flags)
}

func callTruncate(fp uintptr, tls *libc.TLS, pFile uintptr, size int64) int32 {
	return (*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&fp)))(tls, pFile, size)
}

func callFileSize(fp uintptr, tls *libc.TLS, pFile, pSize uintptr) int32 {
	return (*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&fp)))(tls, pFile, pSize)
}

func callFileControl(fp uintptr, tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	return (*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&fp)))(tls, pFile, op, pArg)
}

func callClose(fp uintptr, tls *libc.TLS, pFile uintptr) int32 {
	return (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&fp)))(tls, pFile)
}

func callShmLock(fp uintptr, tls *libc.TLS, pFile uintptr, ofst, n, flags int32) int32 {
	return (*(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&fp)))(tls, pFile, ofst, n, flags)
}

func callDeviceCharacteristics(fp uintptr, tls *libc.TLS, pFile uintptr) int32 {
	return (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&fp)))(tls, pFile)
}
