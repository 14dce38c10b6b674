"""Graphiler (xiezhq-hermann/graphiler), the paper's R-GCN compiler baseline: never installable here.

Its variant is declared so that every R-GCN table has a row saying why it did not run.
"""

from baselines import Variant

REASON = ("Graphiler (xiezhq-hermann/graphiler) has no installable release: no wheel on PyPI; it builds from source "
          "as a C++/CUDA extension against DGL 0.9 and PyTorch 1.x, neither of which installs with Python 3.11 and "
          "torch 2.13")
VARIANTS = {"rgcn": {"graphiler": Variant(never=REASON)}}
