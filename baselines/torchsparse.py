"""TorchSparse (mit-han-lab/torchsparse), the paper's sparse-convolution baseline: never installable here.

Its variant is declared so that every convolution table has a row saying why it did not run.
"""

from baselines import Variant

REASON = ("TorchSparse (mit-han-lab/torchsparse) has no distribution on PyPI (pip: no matching distribution); it "
          "ships source and its own CUDA wheel index, which this machine cannot reach")
VARIANTS = {"conv": {"torchsparse": Variant(never=REASON)}}
