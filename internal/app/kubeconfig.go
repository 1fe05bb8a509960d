package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
)

// fileFacts is what stat says of the kubeconfig: its permission bits and, where the
// platform reports them, its owner and group.
type fileFacts struct {
	Mode     fs.FileMode
	UID, GID uint32
	Owned    bool  // UID and GID are known
	StatErr  error // stat failed too: a directory on the path cannot be searched
}

// procFacts is who this process is to the kernel's permission check.
type procFacts struct {
	UID, GID int
	Groups   []int
}

// overflowID is the owner a user namespace shows for a host id it does not map
// (/proc/sys/kernel/overflowuid): with rootless podman, a file owned by another host
// user than the one running podman shows as 65534.
const overflowID = 65534

// readable checks the kubeconfig can be read, and says how to fix it when not: DCM's
// compose deployment mounts the host's kubeconfig (often mode 0600, owned by the host
// user) read-only into a container whose user (65532 in our image) cannot read it.
func readable(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrPermission):
		ff := statFacts(path)
		groups, _ := os.Getgroups()
		return errors.New(kubeconfigDenied(path, ff, procFacts{UID: os.Getuid(), GID: os.Getgid(), Groups: groups}))
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("SP_K8S_KUBECONFIG %s does not exist (mount it, or leave SP_K8S_KUBECONFIG empty to use the in-cluster service account)", path)
	case err != nil:
		return fmt.Errorf("SP_K8S_KUBECONFIG %s: %w", path, err)
	}
	return f.Close()
}

// statFacts stats the file the process could not open.
func statFacts(path string) fileFacts {
	fi, err := os.Stat(path)
	if err != nil {
		return fileFacts{StatErr: err}
	}
	ff := fileFacts{Mode: fi.Mode().Perm()}
	ff.UID, ff.GID, ff.Owned = owner(fi)
	return ff
}

// modeLetsRead says whether the permission bits alone let p read the file: the owner's
// bits if p owns it, else the group's if p is in its group, else the others'. Root
// reads whatever the bits say, except a file whose owner its user namespace does not
// map (shown as 65534): there the bits apply to root too.
func modeLetsRead(ff fileFacts, p procFacts) bool {
	switch {
	case p.UID == 0 && ff.UID != overflowID:
		return true
	case uint32(p.UID) == ff.UID:
		return ff.Mode&0o400 != 0
	case uint32(p.GID) == ff.GID || slices.Contains(p.Groups, int(ff.GID)):
		return ff.Mode&0o040 != 0
	default:
		return ff.Mode&0o004 != 0
	}
}

// kubeconfigDenied is the one-line start-up error for a kubeconfig this process may not
// open: the path, who the process is, what the file's mode and owner are, and the fix
// that follows from them. Pure, so every case is a table test.
func kubeconfigDenied(path string, ff fileFacts, p procFacts) string {
	const see = ` (see README "Install > Compose")`
	who := fmt.Sprintf("this process runs as uid %d gid %d", p.UID, p.GID)
	switch {
	case ff.StatErr != nil:
		return fmt.Sprintf("SP_K8S_KUBECONFIG %s: permission denied: %s and may not reach the file "+
			"(a directory on its path is not searchable by it); mount the file itself, e.g. -v <file>:%s:ro,z%s",
			path, who, path, see)
	case !ff.Owned:
		return fmt.Sprintf("SP_K8S_KUBECONFIG %s: permission denied: the file is mode %04o and %s; "+
			"make it readable by uid %d (chmod 0644)%s", path, ff.Mode, who, p.UID, see)
	}
	facts := fmt.Sprintf("the file is mode %04o owned by uid %d gid %d and %s", ff.Mode, ff.UID, ff.GID, who)
	if modeLetsRead(ff, p) {
		// The bits allow it, so a security module refuses: SELinux on a host file
		// mounted without relabelling is the usual one.
		return fmt.Sprintf("SP_K8S_KUBECONFIG %s: permission denied: %s, which the mode allows, "+
			"so something else refuses: on an SELinux host mount the file with :z (e.g. <file>:%s:ro,z)%s",
			path, facts, path, see)
	}
	fix := fmt.Sprintf("make the file readable by uid %d: chmod 0644 <file>, or chgrp %d <file> and chmod 0640, or chown %d <file>",
		p.UID, p.GID, p.UID)
	switch ff.UID {
	case 0:
		// Under rootless podman (or docker) the host user running the engine is root
		// inside, so the user's own 0600 file shows as uid 0, and a chgrp on the host
		// does not reach the container's ids: it has to be made in the user namespace.
		fix += fmt.Sprintf("; with rootless podman your own files show as uid 0 here and ids must be set inside its user namespace: "+
			"`podman unshare chgrp %d <file>` and chmod 0640, or run with --userns=keep-id:uid=%d,gid=%d", p.GID, p.UID, p.GID)
	case overflowID:
		fix += "; uid 65534 is how a user namespace shows an owner it does not map (e.g. a host uid under rootless podman): " +
			"set the group inside it (`podman unshare chgrp`)"
	}
	return fmt.Sprintf("SP_K8S_KUBECONFIG %s: permission denied: %s; %s%s", path, facts, fix, see)
}
