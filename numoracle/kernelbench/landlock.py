"""Landlock: the candidate's process confined to the files it needs.

Linux's Landlock (5.13 and later) lets an unprivileged process take away its
own access to the file system, for itself and every thread and process it
starts afterwards. The candidate's worker (:mod:`.sandbox`) confines itself,
after its own imports and before the candidate's file is imported, to

* reading and executing the system's folders (``/usr``, ``/lib``, ``/etc``,
  ``/proc``, ``/sys``, ...), Python's installation and the folders of
  ``sys.path`` that do not hold the judge's working directory, and numoracle's
  own package;
* reading the candidate's file and the problem's (the task it was given);
* reading and writing its devices (``/dev/null``, the GPU's ``/dev/nvidia*``),
  its own working folder (where ``TMPDIR``, and unless set, the compiled
  extensions' and Triton's caches go) and the folders the judge hands the
  outputs over in.

Everything else, the judge's working directory (reached by ``/proc/<ppid>/cwd``
as well) and home directory among them, is out of its reach: opening a file
there raises ``PermissionError``. Threads the process had before it confined
itself (torch's thread pools) are not confined; the code the candidate runs on
its main thread, and every thread or process it starts, is. Where the kernel
has no Landlock (an older kernel, gVisor) :func:`confine` says so and changes
nothing.

The system calls (x86-64 and every architecture of the generic table):
``landlock_create_ruleset`` 444, ``landlock_add_rule`` 445,
``landlock_restrict_self`` 446.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["abi_version", "confine", "writable_env", "ALLOWED_SYSTEM"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
_MAKE_SYM, _REFER, _TRUNCATE = 1 << 12, 1 << 13, 1 << 14

#: rights on a file (the others apply to folders only)
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_ALL_V1 = (1 << 13) - 1

#: system folders the process reads and executes
ALLOWED_SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt",
                  "/proc", "/sys", "/run/nvidia-persistenced", "/var/lib/nvidia")
#: devices it reads and writes
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
            "/dev/tty", "/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*")


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """Landlock's ABI version on this kernel; 0 where it has none (or not on Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0),
                                  ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def _handled(abi: int) -> int:
    rights = _ALL_V1
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    return rights


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([os.path.realpath(path), os.path.realpath(folder)]) == \
            os.path.realpath(folder)
    except ValueError:
        return False


def _python_paths(judge_dir: str) -> list[str]:
    """Python's installation and the import path, less any folder that holds the
    judge's working directory; numoracle's own package."""
    here = str(Path(__file__).resolve().parents[1])
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, here}
    found |= {p for p in sys.path if p and os.path.isdir(p) and not _inside(judge_dir, p)}
    return sorted(found)


def confine(*, read: Sequence[str], write: Sequence[str], judge_dir: str) -> str:
    """Confine this process (see the module's docstring); a phrase saying what was done.

    Parameters
    ----------
    read : sequence of str
        Further files or folders it reads (the candidate's file).
    write : sequence of str
        Folders it reads and writes (its working folder, the judge's output folders).
    judge_dir : str
        The judge's working directory: an import-path folder holding it is not
        allowed.
    """
    abi = abi_version()
    if abi < 1:
        return "no Landlock in this kernel: the judge's files are not out of reach"
    handled = _handled(abi)
    libc = _libc()

    class _Ruleset(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64)]

    attr = _Ruleset(handled)
    fd = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                      ctypes.c_uint32(0))
    if fd < 0:
        return f"Landlock refused a ruleset (errno {ctypes.get_errno()}): not confined"
    try:
        readable = [*ALLOWED_SYSTEM, *_python_paths(judge_dir), *read]
        devices = [d for pattern in _DEVICES for d in glob.glob(pattern)]
        rules = [(p, _READ) for p in readable]
        rules += [(d, _READ | _WRITE_FILE | _TRUNCATE) for d in devices]
        rules += [(w, handled) for w in write]
        for path, rights in rules:
            _allow(libc, fd, path, rights & handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"no_new_privs refused (errno {ctypes.get_errno()}): not confined"
        if libc.syscall(_RESTRICT_SELF, fd, ctypes.c_uint32(0)) != 0:
            return f"Landlock refused to confine (errno {ctypes.get_errno()}): not confined"
    finally:
        os.close(fd)
    return f"files outside its own, the system's and Python's out of reach (Landlock ABI {abi})"


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    """Allow ``rights`` beneath ``path`` (file rights only, for a file); a path that
    does not exist is skipped."""
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = _PathBeneath(rights, target)
        libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                     ctypes.c_uint32(0))
    finally:
        os.close(target)


def writable_env(workdir: str, environ: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
    """Environment variables that send temporary files and build caches into
    ``workdir`` (those already set in ``environ`` are kept)."""
    given = dict(environ)
    out = {"TMPDIR": workdir}
    for name, sub in (("TORCH_EXTENSIONS_DIR", "torch_extensions"),
                      ("TRITON_CACHE_DIR", "triton"), ("CUDA_CACHE_PATH", "cuda_cache")):
        if name not in given:
            out[name] = os.path.join(workdir, sub)
    return out
