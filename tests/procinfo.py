"""What the tests read of processes, the same way on Linux and macOS (which has no /proc).

On Linux the process table and states come from /proc/<pid>/stat directly (polled every few
milliseconds by the timing tests, so kept as cheap as before); elsewhere from psutil, whose
answers test_procinfo.py compares with /proc's here. Sessions and groups come from os; this
process's descriptors from /proc/self/fd on Linux (their targets, "pipe:[…]") and /dev/fd on
other systems (identified by fstat: type, device, inode).

The hostdeath and interop suites stay Linux-only (signal masks from /proc/<pid>/status, network
namespaces) and read /proc themselves.
"""

from __future__ import annotations

import os
import stat
import sys

import psutil

_LETTERS = {
    psutil.STATUS_RUNNING: "R",
    psutil.STATUS_SLEEPING: "S",
    psutil.STATUS_DISK_SLEEP: "D",
    psutil.STATUS_STOPPED: "T",
    psutil.STATUS_TRACING_STOP: "t",
    psutil.STATUS_ZOMBIE: "Z",
    psutil.STATUS_DEAD: "X",
    psutil.STATUS_IDLE: "I",
}


def _letter(status: str) -> str:
    """The ps(1) state letter of a psutil status (Z: zombie, X: dead)."""
    return _LETTERS.get(status, "S")


def _stat_fields(pid: int | str) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (state, ppid, pgrp, session, ...)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:  # gone (ESRCH included)
        return None
    # Bytes: a process name need not be UTF-8 (acp-os's tests start such processes); the
    # fields after the last ")" are ASCII.
    return raw[raw.rindex(b")") + 2 :].decode("ascii", "replace").split()


def process_state(pid: int) -> str | None:
    """The state letter of `pid` (as ps shows it), or None when there is no such process."""
    if sys.platform == "linux":
        fields = _stat_fields(pid)
        return fields[0] if fields else None
    return portable_state(pid)


def portable_state(pid: int) -> str | None:
    try:
        return _letter(psutil.Process(pid).status())
    except psutil.NoSuchProcess:
        return None


def process_table() -> dict[int, tuple[str, int, int, int]]:
    """pid -> (state letter, ppid, process group, session) of every process one may inspect."""
    if sys.platform != "linux":
        return portable_table()
    table: dict[int, tuple[str, int, int, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat_fields(entry)) is not None:
            table[int(entry)] = (fields[0], int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def portable_table() -> dict[int, tuple[str, int, int, int]]:
    table: dict[int, tuple[str, int, int, int]] = {}
    for proc in psutil.process_iter(["ppid", "status"]):
        status, ppid = proc.info["status"], proc.info["ppid"]
        if status is None or ppid is None:
            continue
        try:
            table[proc.pid] = (_letter(status), ppid, os.getpgid(proc.pid), os.getsid(proc.pid))
        except (ProcessLookupError, PermissionError):
            continue  # gone (or not ours to ask) between the listing and the question
    return table


def children(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is `pid`."""
    return [
        child
        for child, (state, parent, _, _) in process_table().items()
        if parent == pid and state not in ("Z", "X")
    ]


def session(pid: int) -> int:
    return os.getsid(pid)


def command_line(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return "?"


def open_fds() -> dict[int, str]:
    """This process's open descriptors and what each points at."""
    table: dict[int, str] = {}
    if sys.platform == "linux":
        for name in os.listdir("/proc/self/fd"):
            try:
                table[int(name)] = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                pass  # the directory listing's own descriptor, already closed
        return table
    for name in os.listdir("/dev/fd"):
        try:
            info = os.fstat(int(name))
        except OSError:
            continue  # as above
        table[int(name)] = f"{stat.filemode(info.st_mode)[0]}:{info.st_dev}:{info.st_ino}"
    return table


def rss_bytes() -> int:
    """This process's resident memory."""
    return int(psutil.Process().memory_info().rss)


def thread_count() -> int:
    """This process's OS threads (the core's included, which `threading` does not see)."""
    return psutil.Process().num_threads()
