"""Writing files so that a reader, or a crash, never meets a half-written one."""

import os
import secrets
import stat
from pathlib import Path


def write_atomically(path, text, encoding="utf-8"):
    """Replace ``path`` by a file holding ``text`` (str, or bytes written as they are), all at once.

    The text goes to a temporary file beside the target (same directory, so the rename cannot cross file
    systems), is flushed and fsynced, and the temporary file is renamed over the target; the directory is then
    fsynced so the rename itself survives a power cut. A reader sees the old file or the new one; a process killed
    at any moment leaves the old one intact (and at worst a ``.NAME.*.tmp`` file beside it).

    A symbolic link is followed (the file it points to is replaced, the link stays), a replaced file keeps its
    permissions, and a path that is not a regular file (``/dev/stdout``, a named pipe) is written to directly, as
    ``open`` would: renaming over it would replace a device or a pipe with a plain file.

    Parameters
    ----------
    path : str or os.PathLike
    text : str or bytes
    encoding : str, default="utf-8"
        The encoding of a str ``text``.

    Raises
    ------
    ValueError
        When ``path`` names a directory (or ends with a separator).
    FileNotFoundError
        When the folder ``path`` would be in does not exist.
    """
    given = os.fspath(path)
    if names_a_directory(given):
        raise ValueError(f"{given!r} names a directory; give the path of a file to write.")
    binary = isinstance(text, bytes)
    mode = "b" if binary else ""
    options = dict(encoding=None if binary else encoding, newline=None if binary else "")
    existing = os.stat(given) if os.path.exists(given) else None  # through links, /dev/fd/N's included
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        with open(given, "w" + mode, **options) as f:
            f.write(text)
        return
    path = Path(os.path.realpath(given))
    if not path.parent.is_dir():  # else open() below would name our temporary file, not the user's path
        raise FileNotFoundError(f"Cannot write {given!r}: the folder {str(path.parent)!r} does not exist; create it "
                                "first.")
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        # "x": never follow or clobber an existing file; created with the process's umask, like a plain open().
        with open(tmp, "x" + mode, **options) as f:
            if existing is not None:
                os.chmod(f.fileno(), stat.S_IMODE(existing.st_mode))
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_directory(path.parent)


def names_a_directory(path):
    """Whether ``path`` (str) cannot be a file to write: empty (the current directory), ending in a separator, or
    an existing directory."""
    return path == "" or path.endswith(("/", os.sep)) or os.path.isdir(path)


def _fsync_directory(directory):
    if not hasattr(os, "O_DIRECTORY"):  # Windows: directories cannot be opened for fsync (NTFS logs renames)
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError:  # some file systems (network mounts) refuse to fsync a directory; the rename stands anyway
        pass
    finally:
        os.close(fd)
