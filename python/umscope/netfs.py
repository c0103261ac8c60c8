"""Is a path on a network filesystem? SQLite's WAL mode needs shared memory that every
process of the store sees, which NFS, Lustre, GPFS, BeeGFS and SMB do not give across
nodes (https://www.sqlite.org/wal.html), so the store uses a rollback journal there."""

import ctypes
import ctypes.util
import os

# statfs(2) f_type magic numbers (linux/magic.h and the filesystems' own headers).
NETWORK_MAGIC = {
    0x6969: "nfs",
    0x0BD00BD0: "lustre",
    0x47504653: "gpfs",
    0x19830326: "beegfs",
    0xFF534D42: "cifs",
    0xFE534D42: "smb2",
    0x517B: "smb",
    0x00C36400: "ceph",
    0x5346414F: "afs",
    0xAAD7AAEA: "panfs",
    0x013111A8: "ibrix",
    0x564C: "ncpfs",
    0x6B414653: "kafs",
    0x01021997: "v9fs",
}
# Filesystems that /proc/self/mounts names (FUSE ones carry their own name there).
NETWORK_TYPES = {"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "smbfs", "ceph", "afs",
                 "panfs", "9p", "fuse.sshfs", "fuse.glusterfs", "glusterfs", "fuse.ceph", "wekafs",
                 "orangefs", "pvfs2", "fuse.s3fs", "fuse.gcsfuse", "fuse.juicefs"}


class _StatFs(ctypes.Structure):
    # struct statfs on 64-bit Linux starts with `__fsword_t f_type` (a long).
    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 120)]


def _existing(path):
    path = os.path.abspath(str(path))
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _statfs_type(path):
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        buf = _StatFs()
        if libc.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
            return None
        return buf.f_type & 0xFFFFFFFF
    except (OSError, AttributeError):
        return None


def _mount_type(path):
    """The filesystem type of the longest mount point above path, from /proc/self/mounts."""
    best, fstype = "", None
    try:
        with open("/proc/self/mounts", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mnt = parts[1].replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, fstype = mnt, parts[2]
    except OSError:
        return None
    return fstype


def network_fs(path):
    """The name of the network filesystem holding path (or its nearest existing parent), or None."""
    p = os.path.realpath(_existing(path))
    magic = _statfs_type(p)
    if magic in NETWORK_MAGIC:
        return NETWORK_MAGIC[magic]
    fstype = _mount_type(p)
    if fstype in NETWORK_TYPES:
        return fstype
    return None
