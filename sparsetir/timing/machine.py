"""The machine check before timing: is anything else using this machine, and how is it set up?

    python -m sparsetir.timing                        # print the check (sparsetir/timing/__main__.py)
    python -m sparsetir.timing --json results/machine.json --strict

The role of pyperf's ``system show``/``check``. :func:`machine_state` looks for a fraction of a
second (``interval_s``) and reports

- the load average and the runnable tasks besides this one (``procs_running`` in ``/proc/stat``,
  sampled through the interval);
- the CPU time other processes used during the interval, in cores (``/proc/stat`` against this
  process's own), the steal time, and the processes that used most (psutil);
- the CPU frequency governor, driver and boost where sysfs has them (a VM often has none);
- the memory available;
- the thread counts each library will use (``OMP_NUM_THREADS``, ``TVM_NUM_THREADS``, torch's when
  it is loaded, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``) and the spin limits.

:func:`busy_reasons` names what makes the machine busy, against the same limits the interference
sentinel judges rounds by (``TimingPolicy.other_cpu_limit``, ``steal_limit``), plus less than
:data:`MIN_AVAILABLE_FRACTION` of the memory available. ``make reproduce``, ``make smoke`` and
``make bench`` print the check first and keep it in the run's folder (``machine.json``); every
record's provenance holds :func:`machine_snapshot` (the same minus the interval). With
``timing.strict: true`` (``--strict``) a busy machine is refused: ``MachineBusyError`` (exit
status 1 here), with a message naming what is busy.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time
from pathlib import Path

from ..runtime.loader import usable_cores
from .interference import cpu_shares, cpu_snapshot
from .policy import DEFAULT, TimingPolicy

__all__ = ["MachineBusyError", "busy_reasons", "format_state", "machine_snapshot", "machine_state",
           "require_quiet_machine"]

INTERVAL_S = 0.5  # the check's look at the machine
STRICT_INTERVAL_S = 0.3  # the look a strict measurement takes before its first round
MIN_AVAILABLE_FRACTION = 0.1
TOP_PROCESSES = 5
MIN_LISTED_CORES = 0.05
_THREAD_ENV = ("OMP_NUM_THREADS", "TVM_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOMP_SPINCOUNT",
               "TVM_THREAD_POOL_SPIN_COUNT")
_CPUFREQ = Path("/sys/devices/system/cpu")


class MachineBusyError(RuntimeError):
    """Raised by a strict measurement (``TimingPolicy.strict``) on a busy machine; the message names what is busy."""


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _procs_running() -> int | None:
    try:
        with open("/proc/stat") as handle:
            for line in handle:
                if line.startswith("procs_running"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def cpufreq_state() -> dict:
    """Governor(s), driver and boost from sysfs; ``note`` says when the kernel exposes none (VMs)."""
    governors = sorted({g for g in (_read(p) for p in _CPUFREQ.glob("cpu[0-9]*/cpufreq/scaling_governor")) if g})
    drivers = sorted({d for d in (_read(p) for p in _CPUFREQ.glob("cpu[0-9]*/cpufreq/scaling_driver")) if d})
    boost = _read(_CPUFREQ / "cpufreq" / "boost")
    no_turbo = _read(_CPUFREQ / "intel_pstate" / "no_turbo")
    state = {"governors": governors or None, "drivers": drivers or None,
             "boost": None if boost is None else boost == "1",
             "intel_no_turbo": None if no_turbo is None else no_turbo == "1"}
    if not governors and not drivers:
        state["note"] = "no cpufreq in sysfs (frequency set by the hypervisor or firmware, not readable here)"
    return state


def thread_settings() -> dict:
    """The thread counts and spin limits the libraries will use, as far as this process can tell."""
    settings = {name: os.environ.get(name) for name in _THREAD_ENV}
    settings["usable_cpus"] = usable_cores()
    torch = sys.modules.get("torch")
    settings["torch_threads"] = torch.get_num_threads() if torch is not None else None
    return settings


def _memory() -> dict:
    try:
        import psutil  # noqa: PLC0415 - optional at import time

        memory = psutil.virtual_memory()
        return {"total_bytes": int(memory.total), "available_bytes": int(memory.available)}
    except ImportError:
        pass
    values = {}
    for line in (_read(Path("/proc/meminfo")) or "").splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable") and rest.split():
            values[key] = int(rest.split()[0]) * 1024
    return {"total_bytes": values.get("MemTotal"), "available_bytes": values.get("MemAvailable")}


def machine_snapshot() -> dict:
    """The cheap part of the check (no interval): load average, memory, cpufreq, threads."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"load_average": load, "memory": _memory(), "cpufreq": cpufreq_state(), "threads": thread_settings()}


def _process_cpu(psutil) -> dict:
    times = {}
    for process in psutil.process_iter(["pid"]):
        try:
            cpu = process.cpu_times()
            times[process.pid] = (process, cpu.user + cpu.system)
        except (psutil.Error, OSError):
            continue
    return times


def _describe(process) -> str:
    try:
        words = process.cmdline() or [process.name()]
    except Exception:  # noqa: BLE001 - a process may vanish or be unreadable; its pid still names it
        return "?"
    text = " ".join(Path(words[0]).name if i == 0 else word for i, word in enumerate(words[:4]))
    return text if len(text) <= 80 else text[:79] + "…"


def machine_state(interval_s: float = INTERVAL_S) -> dict:
    """Look at the machine for ``interval_s`` seconds (see the module docstring); a JSON-able dict."""
    if not interval_s > 0:
        raise ValueError(f"interval_s must be positive, got {interval_s!r}")
    try:
        import psutil  # noqa: PLC0415 - optional: without it, no per-process list
    except ImportError:
        psutil = None
    me = os.getpid()
    before = _process_cpu(psutil) if psutil else {}
    start = cpu_snapshot()
    running = []
    steps = 5
    for _ in range(steps):
        time.sleep(interval_s / steps)
        count = _procs_running()
        if count is not None:
            running.append(max(0, count - 1))  # less this process, which is running to read it
    end = cpu_snapshot()
    after = _process_cpu(psutil) if psutil else {}
    wall = end.wall - start.wall
    other, steal = cpu_shares(start, end, slack_ticks=0)
    top = []
    for pid, (process, cpu) in after.items():
        if pid == me or pid not in before:
            continue
        cores = (cpu - before[pid][1]) / wall
        if cores >= MIN_LISTED_CORES:
            top.append({"pid": pid, "command": _describe(process), "cores": round(cores, 3)})
    top.sort(key=lambda entry: -entry["cores"])
    state = {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "cpu_count": os.cpu_count(), "interval_s": round(wall, 3),
        "other_cpu_cores": None if other is None else round(other, 3),
        "steal_cores": None if steal is None else round(steal, 3),
        "runnable_besides_this": round(sum(running) / len(running), 2) if running else None,
        "top_processes": top[:TOP_PROCESSES] if psutil else None,
        **machine_snapshot(),
    }
    if psutil is None:
        state["note"] = "psutil is not installed: no per-process list"
    return state


def busy_reasons(state: dict, policy: TimingPolicy = DEFAULT) -> list[str]:
    """What makes the machine busy, each in words (empty: quiet)."""
    reasons = []
    other = state.get("other_cpu_cores")
    if other is not None and other > policy.other_cpu_limit:
        who = ", ".join(f"pid {p['pid']} {p['command']} ({p['cores']:.2f})" for p in state.get("top_processes") or [])
        reasons.append(f"other processes used {other:.2f} cores over {state['interval_s']:.1f} s (limit "
                       f"{policy.other_cpu_limit:g})" + (f": {who}" if who else ""))
    steal = state.get("steal_cores")
    if steal is not None and steal > policy.steal_limit:
        reasons.append(f"the hypervisor stole {steal:.2f} cores (limit {policy.steal_limit:g}): other guests share "
                       "this host's CPUs")
    memory = state.get("memory") or {}
    total, available = memory.get("total_bytes"), memory.get("available_bytes")
    if total and available is not None and available < MIN_AVAILABLE_FRACTION * total:
        reasons.append(f"only {available / 2**30:.1f} GiB of {total / 2**30:.1f} GiB memory available")
    return reasons


def require_quiet_machine(policy: TimingPolicy = DEFAULT, interval_s: float = STRICT_INTERVAL_S) -> dict:
    """The machine state, or ``MachineBusyError`` naming what is busy."""
    state = machine_state(interval_s)
    reasons = busy_reasons(state, policy)
    if reasons:
        raise MachineBusyError("refusing to time on a busy machine (timing.strict / --strict): " + "; ".join(reasons))
    return state


def format_state(state: dict, reasons: list[str]) -> str:
    """The check as a few lines for a terminal."""
    def value(x, unit=""):
        return "not readable" if x is None else f"{x}{unit}"

    memory = state.get("memory") or {}
    cpufreq = state.get("cpufreq") or {}
    threads = state.get("threads") or {}
    lines = [f"machine check ({state.get('host')}, {state.get('cpu_count')} CPUs, {threads.get('usable_cpus')} usable):",
             f"  load average {value(state.get('load_average'))}; runnable besides this check "
             f"{value(state.get('runnable_besides_this'))}",
             f"  other processes' CPU {value(state.get('other_cpu_cores'), ' cores')}, steal "
             f"{value(state.get('steal_cores'), ' cores')} over {state.get('interval_s')} s"]
    for process in state.get("top_processes") or []:
        lines.append(f"    pid {process['pid']:>7} {process['cores']:5.2f} cores  {process['command']}")
    governor = cpufreq.get("governors") or cpufreq.get("note")
    lines.append(f"  cpufreq: {governor}" + (f"; boost {cpufreq['boost']}" if cpufreq.get("boost") is not None else "")
                 + (f"; intel no_turbo {cpufreq['intel_no_turbo']}" if cpufreq.get("intel_no_turbo") is not None else ""))
    if memory.get("total_bytes"):
        lines.append(f"  memory: {memory['available_bytes'] / 2**30:.1f} GiB available of "
                     f"{memory['total_bytes'] / 2**30:.1f} GiB")
    lines.append("  threads: " + ", ".join(f"{k}={v}" for k, v in threads.items() if v is not None))
    lines.append("  busy: " + "; ".join(reasons) if reasons else "  quiet: nothing else is using the CPUs")
    return "\n".join(lines)
