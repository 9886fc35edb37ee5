"""The server's process tree read from /proc (Linux): memory, descriptors, threads, CPU time.

A soak (loadtest/soak.py) samples this every few seconds. The tree is the server and every
process below it: its decoder workers (server/decoder_procs.py starts them with
multiprocessing's `spawn`, so their command line runs `multiprocessing.spawn`'s
`spawn_main`) and multiprocessing's resource tracker. Children are found by the parent pid
in each process's /proc/PID/stat: /proc/PID/task/TID/children lists only the children of the
thread that started them, and the server starts its workers from another thread.

Units: resident memory in KiB (VmRSS, as the kernel counts it: pages shared between the
processes count in each), CPU in seconds. A process's CPU time here is its own user +
system time plus that of its children that exited and were waited for (cutime + cstime), so
the tree's sum keeps the time of a decoder worker that was killed and replaced.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Stat:
    """What a soak needs of /proc/PID/stat."""

    pid: int
    state: str  # R, S, D, Z (zombie: exited, not yet waited for), ...
    ppid: int
    cpu_s: float  # utime + stime
    children_cpu_s: float  # cutime + cstime: children that exited and were waited for


@dataclass(frozen=True)
class Process:
    pid: int
    role: str  # server | decoder | tracker | other
    state: str  # as in Stat; "Z" once it has exited
    rss_kb: int  # VmRSS; 0 for a zombie
    fds: int  # entries of /proc/PID/fd; -1 when not readable (another user's process)
    threads: int
    cpu_s: float  # own time plus that of its waited-for children


@dataclass(frozen=True)
class Tree:
    """One sample of the server and its descendants; the server comes first."""

    processes: tuple[Process, ...]

    @property
    def server(self) -> Process:
        return self.processes[0]

    @property
    def children(self) -> tuple[Process, ...]:
        return self.processes[1:]

    @property
    def decoders(self) -> list[int]:
        """Decoder workers that have not exited (a killed one stays a zombie until the
        server replaces it)."""
        return [p.pid for p in self.children if p.role == "decoder" and p.state != "Z"]

    def total(self, field: str) -> float:
        return float(sum(getattr(p, field) for p in self.processes))


def parse_stat(text: str, ticks: int = CLOCK_TICKS) -> Stat:
    """/proc/PID/stat. The command name sits in parentheses and may itself hold spaces and
    parentheses, so the fields are counted from the last ')'."""
    head, _, tail = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    fields = tail.split()
    # after the name: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17)
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return Stat(pid, fields[0], int(fields[1]), (utime + stime) / ticks, (cutime + cstime) / ticks)


def parse_status(text: str) -> dict[str, str]:
    """/proc/PID/status as {key: value}, e.g. {"VmRSS": "1234 kB", "Threads": "7"}."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def kib(value: str | None) -> int:
    """'1234 kB' -> 1234; a missing value (a zombie has no VmRSS) -> 0."""
    return int(value.split()[0]) if value else 0


def role(cmdline: str) -> str:
    """What a child of the server is, from its command line (NUL-separated as in /proc)."""
    if "multiprocessing.spawn" in cmdline and "spawn_main" in cmdline:
        return "decoder"  # the server's only spawned processes are its decoder workers
    if "multiprocessing.resource_tracker" in cmdline:
        return "tracker"
    return "other"


def descendants(parents: Mapping[int, int], root: int) -> list[int]:
    """Every process below `root`, breadth first, given each pid's parent."""
    below: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        below.setdefault(ppid, []).append(pid)
    found, frontier = [], [root]
    while frontier:
        children = sorted(c for p in frontier for c in below.get(p, []))
        found += children
        frontier = children
    return found


def parents(proc: Path = PROC) -> dict[int, int]:
    """Each running process's parent pid."""
    result = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                result[int(entry.name)] = parse_stat((entry / "stat").read_text()).ppid
            except (OSError, ValueError, IndexError):
                continue  # it exited while we looked
    return result


def read_process(pid: int, role_name: str, proc: Path = PROC) -> Process:
    """One process now; raises OSError (FileNotFoundError, ProcessLookupError) when gone."""
    base = proc / str(pid)
    stat = parse_stat((base / "stat").read_text())
    status = parse_status((base / "status").read_text())
    try:
        fds = len(os.listdir(base / "fd"))
    except PermissionError:
        fds = -1
    threads = int(status.get("Threads", "0"))
    cpu = stat.cpu_s + stat.children_cpu_s
    return Process(pid, role_name, stat.state, kib(status.get("VmRSS")), fds, threads, cpu)


def cmdline(pid: int, proc: Path = PROC) -> str:
    try:
        return (proc / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def read_tree(pid: int, proc: Path = PROC) -> Tree:
    """The server `pid` and its descendants now; raises ProcessLookupError when the server
    is gone. Descendants that exit while being read are left out."""
    try:
        processes = [read_process(pid, "server", proc)]
    except FileNotFoundError:
        raise ProcessLookupError(f"no process {pid}") from None
    for child in descendants(parents(proc), pid):
        try:
            processes.append(read_process(child, role(cmdline(child, proc)), proc))
        except OSError:
            continue
    return Tree(tuple(processes))


def alive(pid: int, proc: Path = PROC) -> bool:
    """The process exists and has not exited (a zombie has)."""
    try:
        return parse_stat((proc / str(pid) / "stat").read_text()).state != "Z"
    except (OSError, ValueError, IndexError):
        return False
