package sqlite

import (
	"fmt"
	"os"
	"testing"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// memTLS is the thread state memUsed and memPeak call SQLite with.
var memTLS *libc.TLS

// TestMain turns on SQLite's count of the memory it allocates
// (SQLITE_CONFIG_MEMSTATUS, off in modernc's build), which only works
// before the first connection is opened, for memUsed and memPeak. The
// count costs each allocation a mutex; nothing else changes.
func TestMain(m *testing.M) {
	memTLS = libc.NewTLS()
	va := libc.Xmalloc(memTLS, types.Size_t(unsafe.Sizeof(uintptr(0))))
	if rc := sqlite3.Xsqlite3_config(memTLS, sqlite3.SQLITE_CONFIG_MEMSTATUS, libc.VaList(va, int32(1))); rc != sqlite3.SQLITE_OK {
		panic(fmt.Sprintf("sqlite3_config(SQLITE_CONFIG_MEMSTATUS): %d (a connection was opened before TestMain?)", rc))
	}
	libc.Xfree(memTLS, va)
	os.Exit(m.Run())
}

// memUsed is the memory SQLite holds now, in every connection of the
// process, in bytes.
func memUsed() int64 { return sqlite3.Xsqlite3_memory_used(memTLS) }

// memPeak is the most memory SQLite held since the last call, in bytes;
// the next call counts from what it holds now.
func memPeak() int64 { return sqlite3.Xsqlite3_memory_highwater(memTLS, 1) }
