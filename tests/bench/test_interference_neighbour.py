"""A real neighbour: a busy loop on one core in the middle of a small timed case is seen.

The test starts a bounded busy-loop subprocess (it sleeps a moment, spins on one core for a
fixed time, then exits by itself, printing when it spun) and times two contenders meanwhile.
The blocks of rounds whose CPU window lay inside the spin must be flagged and repeated, and the
case's ratio must fall inside the spread (p20-p80 of the per-round ratios) of the same case
timed undisturbed. Nothing here is a speed: on a loaded machine more rounds are flagged, which
the assertions allow.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from sparsetir.timing import DEFAULT, interference, time_interleaved

pytestmark = pytest.mark.slow

SPIN_DELAY_S = 0.6
SPIN_S = 1.2
SAMPLING_S = 2.5  # the disturbed case samples this long (then repeats its flagged rounds)
NEIGHBOUR = textwrap.dedent("""
    import os, sys, time
    os.sched_setaffinity(0, {int(sys.argv[1])})
    time.sleep(float(sys.argv[2]))
    start = time.time()
    while time.time() < start + float(sys.argv[3]):
        pass
    print(start, time.time(), flush=True)
""")


def contenders():
    x = np.ones(1 << 21, dtype=np.float32)  # 8 MiB
    def once():
        np.add(x, 1.0, out=x)

    def twice():
        np.add(x, 1.0, out=x)
        np.add(x, 1.0, out=x)

    return {"once": once, "twice": twice}


POLICY = DEFAULT.replace(flush=False, warmup_s=0.02, min_warmup=3, samples=5000, min_samples=20, max_time_s=SAMPLING_S,
                         max_repeat_fraction=1.0)


def per_round_ratios(stats):
    return np.asarray(stats["twice"].samples) / np.asarray(stats["once"].samples)


def test_a_busy_neighbour_on_one_core_is_flagged_repeated_and_the_ratio_holds():
    quiet = time_interleaved(contenders(), POLICY.replace(max_time_s=1.0))
    low, high = np.quantile(per_round_ratios(quiet), [0.2, 0.8])

    core = max(os.sched_getaffinity(0))
    neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, str(core), str(SPIN_DELAY_S), str(SPIN_S)],
                                 stdout=subprocess.PIPE, text=True)
    try:
        disturbed = time_interleaved(contenders(), POLICY)
        out, _ = neighbour.communicate(timeout=60)
    finally:
        neighbour.kill()
    spin_start, spin_end = map(float, out.split())

    account = disturbed["once"].interference
    trace = account["trace"]
    assert trace["t0_unix"] + trace["t"][-1] > spin_end, "the case outlasted the neighbour"
    margin = interference.WINDOW_S + 0.1  # a block's CPU window reaches back at least WINDOW_S
    inside = [flag for start, end, flag in zip(trace["t"], trace["t"][1:], trace["flagged"][1:])
              if trace["t0_unix"] + end - margin >= spin_start and trace["t0_unix"] + end <= spin_end]
    assert inside, "some blocks ran while the neighbour spun"
    assert sum(inside) >= 0.9 * len(inside), f"only {sum(inside)} of {len(inside)} overlapped blocks were flagged"
    assert account["flagged"] > 0 and account["repeated"] > 0
    print(f"{sum(inside)} of {len(inside)} overlapped blocks flagged; {account['flagged']} of {account['rounds']} "
          f"rounds flagged, {account['repeated']} repeated; quiet run {quiet['once'].interference['flagged']} flagged")
    assert disturbed["once"].n == disturbed["twice"].n
    ratio = disturbed["twice"].median / disturbed["once"].median
    assert low <= ratio <= high, f"ratio {ratio:.3f} outside the undisturbed spread {low:.3f}-{high:.3f}"
