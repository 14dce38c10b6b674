"""The machine check before timing, on the command line (see :mod:`sparsetir.timing.machine`).

    python -m sparsetir.timing                                    # print it
    python -m sparsetir.timing --json results/machine.json       # and keep it with the run
    python -m sparsetir.timing --strict                           # exit status 1 on a busy machine
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .machine import INTERVAL_S, busy_reasons, format_state, machine_state
from .policy import DEFAULT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparsetir.timing", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="also write the check (and what is busy) to this file")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when the machine is busy")
    parser.add_argument("--interval", type=float, default=INTERVAL_S, help=f"seconds to look (default {INTERVAL_S})")
    parser.add_argument("--other-cpu-limit", type=float, default=DEFAULT.other_cpu_limit,
                        help=f"cores other processes may use (default {DEFAULT.other_cpu_limit})")
    args = parser.parse_args(argv)
    if not args.interval > 0:
        parser.error(f"--interval must be positive, got {args.interval}")
    policy = DEFAULT.replace(other_cpu_limit=args.other_cpu_limit)
    state = machine_state(args.interval)
    reasons = busy_reasons(state, policy)
    print(format_state(state, reasons), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        partial = args.json.with_name(f".{args.json.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps({**state, "busy": reasons, "strict": args.strict}, indent=1) + "\n")
        os.replace(partial, args.json)
    if args.strict and reasons:
        print("refusing to time on a busy machine (--strict): " + "; ".join(reasons), file=sys.stderr)
        return 1
    return 0




if __name__ == "__main__":
    sys.exit(main())
