"""A single-node SLURM cluster on this machine, to try ``--profile profiles/slurm`` (workflows/README.md).

    python workflows/scripts/slurm_localhost.py up DIR [--cpus N] [--mem-mb M] [--install]
    python workflows/scripts/slurm_localhost.py down DIR

``up`` writes ``/etc/slurm/slurm.conf`` (the configuration workflows/README.md "Running on a cluster"
gives: one node, one default partition ``debug``, CPUs and memory consumable, no accounting,
``MinJobAge=300``) and a munge key, then starts munged, slurmctld and slurmd with their sockets, state,
logs and pid files in DIR, on free ports. The configuration has to be at SLURM's default path: the
plugin's job step drops ``SLURM_CONF`` before its ``srun``. ``up`` refuses to replace a slurm.conf it did
not write; ``down`` stops exactly the daemons whose pid files ``up`` wrote and removes the slurm.conf it
wrote. Needs root (slurmd launches jobs) and Debian's ``slurmd slurmctld slurm-client munge``
(``install_packages`` installs them with apt).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
COMMANDS = ("munged", "slurmctld", "slurmd", "sinfo", "sbatch", "squeue", "scontrol", "srun")
DAEMONS = ("munged", "slurmctld", "slurmd")  # started in this order, stopped in the reverse one
PARTITION = "debug"
#: SLURM's compiled-in configuration path (Debian's packages): every client command and srun reads it
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
MARKER = "# written by workflows/scripts/slurm_localhost.py for "

SLURM_CONF = """\
{marker}{dir}
# A single-node SLURM cluster on localhost (workflows/scripts/slurm_localhost.py; workflows/README.md
# "Running on a cluster"). CPUs and memory are consumable (a job gets exactly the CPUs it asks for);
# no accounting (no slurmdbd): the SLURM profile's status command is squeue, which sees finished jobs for
# MinJobAge seconds.
ClusterName=localhost
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge.socket
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=300
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN
PartitionName={partition} Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def missing_commands() -> list[str]:
    """The SLURM and munge commands not on PATH (sbin included)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [command for command in COMMANDS if shutil.which(command, path=path) is None]


def install_packages(timeout: float = 600) -> str | None:
    """Install Debian's SLURM and munge with apt when a command is missing; ``None``, or why it could not."""
    if not missing_commands():
        return None
    if os.geteuid() != 0:
        return f"SLURM is not installed ({', '.join(missing_commands())} missing) and installing it needs root"
    if shutil.which("apt-get") is None:
        return "SLURM is not installed and there is no apt-get to install Debian's slurm-wlm and munge"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    command = ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]
    for attempt in (command, None):
        if attempt is None:  # the package lists may be stale or absent: update once, then try again
            update = subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True, timeout=timeout)
            if update.returncode != 0:
                return f"apt-get update failed: {update.stderr.strip()[-500:]}"
            attempt = command
        result = subprocess.run(attempt, env=env, capture_output=True, text=True, timeout=timeout)
        if result.returncode == 0 and not missing_commands():
            return None
    return f"apt-get install {' '.join(PACKAGES)} failed: {(result.stderr or result.stdout).strip()[-500:]}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _sbin(name: str) -> str:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])) or name


def write_config(folder: Path, *, cpus: int, mem_mb: int, conf: Path = SYSTEM_CONF) -> Path:
    """``conf`` for one node of ``cpus`` CPUs and ``mem_mb`` MB with its state in ``folder``, and a munge key.

    Raises ``RuntimeError`` when ``conf`` exists and this module did not write it.
    """
    folder = folder.resolve()
    if conf.exists() and not conf.read_text().startswith(MARKER):
        raise RuntimeError(f"{conf} exists and was not written by slurm_localhost.py: this machine has its own "
                           "SLURM configuration, which this script will not replace")
    for sub in ("state", "spool"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)  # munged refuses a socket folder others may write to
    key = folder / "munge.key"
    key.write_bytes(os.urandom(128))
    os.chmod(key, 0o400)
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(SLURM_CONF.format(marker=MARKER, host=socket.gethostname().split(".")[0], dir=folder, cpus=cpus,
                                      mem_mb=mem_mb, partition=PARTITION, ctld_port=_free_port(),
                                      slurmd_port=_free_port()))
    return conf


def _environment(folder: Path) -> dict:
    return {key: value for key, value in os.environ.items() if key != "SLURM_CONF"}


def _start(folder: Path, name: str, command: list[str]) -> int:
    log = (folder / f"{name}.out").open("ab")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env=_environment(folder), start_new_session=True)
    (folder / f"{name}.started").write_text(str(process.pid))
    return process.pid


def node_state(folder: Path) -> str:
    """The node's state as sinfo reports it ("idle", "down*", ...), or the error sinfo printed."""
    result = subprocess.run(["sinfo", "--noheader", "--Node", "--format=%t"], env=_environment(folder),
                            capture_output=True, text=True, timeout=30)
    return result.stdout.strip() if result.returncode == 0 else f"sinfo failed: {result.stderr.strip()}"


def up(folder: Path, *, cpus: int | None = None, mem_mb: int | None = None, timeout: float = 60) -> Path:
    """Start munged, slurmctld and slurmd for a one-node cluster in ``folder``; return its slurm.conf.

    ``cpus`` and ``mem_mb`` default to this machine's (``slurmd -C``). Raises ``RuntimeError`` naming the
    daemon log when the node is not idle within ``timeout`` seconds (the daemons started are stopped).
    """
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    hardware = dict(item.split("=", 1) for item in subprocess.run(
        [_sbin("slurmd"), "-C"], capture_output=True, text=True, timeout=30).stdout.split() if "=" in item)
    conf = write_config(folder, cpus=cpus or int(hardware.get("CPUs", os.cpu_count() or 1)),
                        mem_mb=mem_mb or int(int(hardware.get("RealMemory", 2000)) * 0.9))
    try:
        _start(folder, "munged", [_sbin("munged"), "--foreground", "--force", f"--socket={folder}/munge.socket",
                                  f"--key-file={folder}/munge.key", f"--pid-file={folder}/munged.pid",
                                  f"--log-file={folder}/munged.log", f"--seed-file={folder}/munged.seed"])
        _wait(lambda: (folder / "munge.socket").exists(), timeout, folder, "munged")
        _start(folder, "slurmctld", [_sbin("slurmctld"), "-D", "-i", "-f", str(conf)])
        _start(folder, "slurmd", [_sbin("slurmd"), "-D", "-f", str(conf)])
        _wait(lambda: node_state(folder) in ("idle", "mix", "alloc"), timeout, folder, "slurmd")
    except BaseException:
        down(folder)
        raise
    return conf


def _remove_config(folder: Path, conf: Path = SYSTEM_CONF) -> bool:
    if conf.exists() and conf.read_text().startswith(f"{MARKER}{folder}\n"):
        conf.unlink()
        return True
    return False


def _wait(ready, timeout: float, folder: Path, daemon: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            logs = {path.name: path.read_text(errors="replace")[-1500:] for path in sorted(folder.glob("*.log"))}
            raise RuntimeError(f"{daemon} did not come up within {timeout:.0f} s (node: {node_state(folder)}); "
                               f"logs: {logs}")
        time.sleep(0.5)


def down(folder: Path, timeout: float = 20) -> list[str]:
    """Stop the daemons ``up`` started in ``folder`` (by their pid files, newest first); return their names."""
    folder = Path(folder).resolve()
    stopped = []
    for name in reversed(DAEMONS):
        started = folder / f"{name}.started"
        if not started.exists():
            continue
        pid = int(started.read_text())
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            started.unlink()
            continue
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        started.unlink()
        stopped.append(name)
    _remove_config(folder)
    return stopped


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # our own child: reap it
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="write /etc/slurm/slurm.conf and start munged, slurmctld, slurmd (state in DIR)")
    start.add_argument("dir", type=Path)
    start.add_argument("--cpus", type=int, help="the node's CPUs (default: this machine's)")
    start.add_argument("--mem-mb", type=int, help="the node's memory in MB (default: 90%% of this machine's)")
    start.add_argument("--install", action="store_true", help="apt-get install the packages when missing")
    stop = commands.add_parser("down", help="stop the daemons `up` started in DIR")
    stop.add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    if args.command == "down":
        print("stopped:", ", ".join(down(args.dir)) or "nothing")
        return 0
    if args.install and (reason := install_packages()):
        parser.exit(1, f"{reason}\n")
    if missing := missing_commands():
        parser.exit(1, f"missing: {', '.join(missing)} (apt-get install {' '.join(PACKAGES)}, or --install)\n")
    conf = up(args.dir, cpus=args.cpus, mem_mb=args.mem_mb)
    print(f"a one-node cluster is up ({conf}): sinfo")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
