//go:build unix

package app

import (
	"io/fs"
	"syscall"
)

// owner is the file's owner and group, as this process's user namespace shows them.
func owner(fi fs.FileInfo) (uid, gid uint32, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, st.Gid, true
}
