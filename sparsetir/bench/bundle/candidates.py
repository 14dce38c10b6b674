"""A bundle's candidates on the run host: each linked beside its sidecars, loaded with the TVM runtime only.

``assemble_kernel`` puts a candidate's shared library, kernel manifest and structure side by side
as ``Kernel.export`` writes them (the bundle stores each once, by content); ``candidate_factory``
loads one and runs it into a preallocated output; ``load_input`` reads a stored CSR input. The
runner and every family's bundle part use them; nothing here imports the compiler.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ...runtime import load


def assemble_kernel(bundle: Path, candidate: dict, scratch: Path) -> Path:
    """Link a candidate's shared library and its own sidecars side by side, as ``Kernel.export`` writes them."""
    library = bundle / candidate["library"]
    manifest = json.loads((bundle / candidate["manifest"]).read_text())
    path = scratch / f"{candidate['id']}.so"
    links = {path: library, path.with_name(path.name + ".json"): bundle / candidate["manifest"],
             path.with_name(path.name + ".npz"): bundle / candidate["structure"]}
    source = library.with_name(library.name + manifest["source_suffix"])
    if source.exists():
        links[path.with_name(path.name + manifest["source_suffix"])] = source
    for link, target in links.items():
        if not link.exists():
            link.symlink_to(target.resolve())
    return path


def load_input(bundle: Path, entry: dict):
    with np.load(bundle / entry["file"], allow_pickle=False) as arrays:
        return sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(arrays["shape"]))


def candidate_factory(library: Path, B: np.ndarray, device: str):
    """``factory() -> run``: load the kernel, move B to the device once, run into a preallocated C."""
    def factory():
        kernel = load(library)
        if device == "cuda":
            import torch  # noqa: PLC0415 - only a CUDA bundle needs torch (for device tensors)

            B_device = torch.from_numpy(B).cuda()
            out = torch.empty((kernel.output_shape()), dtype=B_device.dtype, device="cuda")
        else:
            B_device, out = B, np.empty(kernel.output_shape(), dtype=B.dtype)

        def run():
            kernel(B_device, out=out)
            return out

        return run

    return factory
