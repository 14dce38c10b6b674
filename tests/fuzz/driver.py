"""The fuzz driver: run seeded cases in worker processes until a time budget is spent.

``python tests/fuzz/driver.py --budget-s 1200 --seed 0 [--json out.json]`` (``make fuzz``). A worker
runs a batch of cases; when one dies by a signal (or hangs past ``--case-timeout-s``), that case is
a finding and a new worker continues with the next case, so each case runs as if in its own process
without paying the compiler's import for every one. Prints the number of cases and every finding;
exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

WORKER = Path(__file__).with_name("worker.py")


def fuzz(budget_s: float, seed: int = 0, batch: int = 25, case_timeout_s: float = 600.0, names=(),
         max_cases: int | None = None) -> dict:
    """Cases ``0, 1, ...`` of ``seed`` until ``budget_s`` is spent or ``max_cases`` have run (the test's
    fixed count: the same cases on any machine, however fast)."""
    started, case = time.monotonic(), 0
    counts, findings = {"ok": 0, "refused": 0, "finding": 0}, []
    while time.monotonic() - started < budget_s and (max_cases is None or case < max_cases):
        size = batch if max_cases is None else min(batch, max_cases - case)
        worker = subprocess.Popen([sys.executable, str(WORKER), str(seed), str(case), str(size), *names],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        current = None
        deadline = time.monotonic() + case_timeout_s
        for line in worker.stdout:
            record = json.loads(line)
            if record.get("start"):
                current, deadline = record["case"], time.monotonic() + case_timeout_s
                if time.monotonic() - started >= budget_s:
                    break
                continue
            counts[record["outcome"]] += 1
            if record["outcome"] == "finding":
                findings.append(record)
            current, case = None, record["case"] + 1
            if time.monotonic() > deadline:
                break
        worker.stdout.close()
        try:
            code = worker.wait(timeout=5 if current is None else case_timeout_s)
        except subprocess.TimeoutExpired:
            worker.kill()
            code = worker.wait()
        stderr = worker.stderr.read()[-1500:]
        worker.stderr.close()
        if current is not None and time.monotonic() - started < budget_s:  # the worker died in this case
            counts["finding"] += 1
            findings.append({"case": current, "outcome": "finding", "detail": f"worker exit {code}: {stderr}"})
            case = current + 1
        elif current is not None:
            break
    return {"seed": seed, "cases": sum(counts.values()), **counts, "findings": findings,
            "seconds": round(time.monotonic() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=1200.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    parser.add_argument("targets", nargs="*")
    args = parser.parse_args()
    summary = fuzz(args.budget_s, args.seed, names=args.targets)
    print(f"fuzz: {summary['cases']} cases in {summary['seconds']} s (seed {args.seed}): {summary['ok']} correct, "
          f"{summary['refused']} refused clearly, {summary['finding']} findings")
    for finding in summary["findings"]:
        print(f"- case {finding['case']} ({finding.get('target', '?')}): {finding['detail']}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    sys.exit(1 if summary["findings"] else 0)


if __name__ == "__main__":
    main()
