"""MinkowskiEngine, a sparse-convolution library: never installable here.

Its variant is declared so that every convolution table has a row saying why it did not run.
"""

from baselines import Variant

REASON = ("MinkowskiEngine: PyPI has only the 0.5.4 source release (2021), a C++/CUDA extension built against torch "
          "with OpenBLAS; its build step fails here ('Pytorch not found' in pip's build isolation) and it predates "
          "torch 2.x")
VARIANTS = {"conv": {"minkowskiengine": Variant(never=REASON)}}
