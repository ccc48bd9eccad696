"""What moves a file's content between this process and a sandbox, on the host's side: a
descriptor the supervisor reads (write_file), and what read_file writes into a file object or
replaces a local file with (holes kept, as `nsbox cp` keeps them)."""
import errno
import os
import stat
import tempfile

from .models import FileInfo


def _regular_file_fd(data):
    """A descriptor of its own (own offset, at data's position) when data is a file object
    on a regular file, else None: the supervisor reads it directly, nothing is copied into
    this process's memory first (a file of gigabytes was), and one larger than the sandbox's
    disk limit is refused before anything is read."""
    try:
        src = data.fileno()
        pos = data.tell()
    except (AttributeError, OSError, ValueError):
        return None
    if not stat.S_ISREG(os.fstat(src).st_mode):
        return None
    fd = os.open("/proc/self/fd/%d" % src, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.lseek(fd, pos, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


_PATH_TYPES = (str, bytes, os.PathLike)


def _copy_at_most(src, dst, size):
    """At most size bytes from src to dst, 1 MiB at a time (fewer when the file shrank after
    the read was answered, as read_file's bytes would be); the number copied."""
    done = 0
    while done < size:
        chunk = src.read(min(size - done, 1 << 20))
        if not chunk:
            break
        view = memoryview(chunk)
        while view:
            n = dst.write(view)
            if n is None:  # a non-blocking raw file that would block
                raise BlockingIOError(errno.EAGAIN, "the destination of read_file(into=) "
                                      "would block")
            view = view[n:]
        done += len(chunk)
    return done


def _copy_keeping_holes(src, dst, size):
    """As _copy_at_most, into dst, a regular file made or emptied for the copy: the holes of
    the sandbox's file stay holes, so that a sparse file costs the host's disk what its data
    costs, not its apparent size (a 2 GiB workspace holds a file of 16 TiB), as `nsbox cp`
    copies it. Anything else gets every byte."""
    dst.flush()
    out = dst.fileno()
    st = os.fstat(out)
    if not stat.S_ISREG(st.st_mode) or st.st_size != 0 or os.lseek(out, 0, os.SEEK_CUR) != 0:
        return _copy_at_most(src, dst, size)
    fd = src.fileno()
    pos, end = 0, size
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
            hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
        except OSError as e:
            if e.errno == errno.ENXIO:  # a hole up to the end
                break
            data, hole = pos, end  # no SEEK_DATA here: all of it
        if data >= end:
            break
        at = data
        while at < hole:
            chunk = os.pread(fd, min(hole - at, 1 << 20), at)
            if not chunk:  # shorter than when the read was answered: cut there
                end = hole = at
                break
            view, off = memoryview(chunk), at
            while view:
                n = os.pwrite(out, view, off)
                view, off = view[n:], off + n
            at += len(chunk)
        pos = hole
    os.ftruncate(out, end)
    os.lseek(out, end, os.SEEK_SET)
    return end


def _into_path(target, copy):
    """copy(out) into the local file target, which is replaced whole or not at all, as
    `nsbox cp ID:f DST` does (docs/files.md): the content goes into an unnamed file in target's
    directory (O_TMPFILE) that takes target's name once complete, so that a full disk or an
    interruption leaves target as it was. An existing target keeps its permissions (not set-id
    bits), its group and, for root, its owner. Written in place instead where a new file would
    not be the same one: not a regular file, a symlink (followed), other hard links, another
    user's, one we may not write (which then fails as open() does); and where the directory
    takes no new file or has no O_TMPFILE. A file made here is not left cut by a failure."""
    target = os.fsdecode(target)
    where = os.path.dirname(target) or "."
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    # a file we may not write (0444, someone else's) fails as open() would, not replaced
    in_place = st is not None and (not stat.S_ISREG(st.st_mode) or st.st_nlink > 1 or
                                   (os.geteuid() != 0 and st.st_uid != os.geteuid()) or
                                   not os.access(target, os.W_OK))
    fd = None
    if not in_place and hasattr(os, "O_TMPFILE"):
        try:
            fd = os.open(where, os.O_TMPFILE | os.O_WRONLY,
                         st.st_mode & 0o777 if st else 0o666)
            if st:  # its permissions; its owner as root, its group (one of ours) as anyone
                os.fchmod(fd, st.st_mode & 0o777)
                if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
                    os.fchown(fd, st.st_uid, st.st_gid)
                elif os.geteuid() != 0 and st.st_gid != os.getegid():
                    os.fchown(fd, -1, st.st_gid)
        except OSError:
            if fd is not None:
                os.close(fd)
            fd = None
    if fd is None:
        try:
            with open(target, "wb") as out:
                return copy(out)
        except BaseException:
            if st is None:  # made here: not left cut
                try:
                    os.unlink(target)
                except OSError:
                    pass
            raise
    with open(fd, "wb") as out:
        n = copy(out)
        out.flush()
        # a directory descriptor makes os.link a linkat, which follows the /proc link
        d = os.open(where, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            name = os.path.basename(target)
            for i in range(100):
                tmp = ".nsbox-read-%d-%d" % (os.getpid(), i)
                try:
                    os.link("/proc/self/fd/%d" % fd, tmp, dst_dir_fd=d, follow_symlinks=True)
                except FileExistsError:
                    continue
                try:
                    os.replace(tmp, name, src_dir_fd=d, dst_dir_fd=d)
                except BaseException:
                    os.unlink(tmp, dir_fd=d)
                    raise
                return n
        finally:
            os.close(d)
        raise FileExistsError(errno.EEXIST, "no free name beside %s" % target)


def _content_fd(data):
    """A readable descriptor positioned at the start of `data` (bytes-like, str, or a binary
    file object): the file itself when it is a regular file, else a memfd, so nothing touches
    the disk."""
    if hasattr(data, "read"):
        own = _regular_file_fd(data)
        if own is not None:
            return own
    try:
        fd = os.memfd_create("nsbox-write", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        f = tempfile.TemporaryFile()
        fd = os.dup(f.fileno())
        f.close()
    try:
        if isinstance(data, str):
            data = data.encode("utf-8")
        if isinstance(data, (bytes, bytearray, memoryview)):
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        elif hasattr(data, "read"):
            while True:
                chunk = data.read(1 << 20)
                if not chunk:
                    break
                if isinstance(chunk, str):
                    chunk = chunk.encode("utf-8")
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
        else:
            raise TypeError("data must be bytes, str or a binary file object, not %s"
                            % type(data).__name__)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _file_info(d, name=None, path=None):
    return FileInfo(name=d.get("name", name), type=d.get("type", "?"), size=d.get("size", 0),
                    mode=d.get("mode", 0), mtime=d.get("mtime", 0), path=path,
                    target=d.get("target"))
