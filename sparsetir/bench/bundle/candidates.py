"""A bundle's candidates on the run host: each linked beside its sidecars, loaded with the TVM runtime only.

``assemble_kernel`` puts a candidate's shared library, kernel manifest and structure side by side
as ``Kernel.export`` writes them (the bundle stores each once, by content); ``candidate_factory``
loads one and runs it into a preallocated output; ``load_input`` reads a stored CSR input. A
candidate whose config names a ``dtype`` (the tensor-core candidates: float16/bfloat16 operands,
float32 accumulation) runs on its inputs rounded to that dtype (``rounded_to``) and is checked
against their float64 result with a half-precision tolerance (``half_precision_case``). The
runner and every family's bundle part use them; nothing here imports the compiler.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ...reference.case import Case
from ...runtime import load

#: a half-precision candidate's check allows this much error relative to the output's largest value
#: (the block-sparse softmax family's bundle allows 1e-2 for its tensor-core kernels too)
HALF_RELATIVE_TOLERANCE = {"float16": 1e-2, "bfloat16": 3e-2}


def candidate_dtype(config: dict) -> str:
    """The operand dtype of a candidate configuration (float32 unless it names one)."""
    dtype = config.get("dtype", "float32")
    if dtype != "float32" and dtype not in HALF_RELATIVE_TOLERANCE:
        raise ValueError(f"a bundle candidate's dtype must be float32, float16 or bfloat16, got {dtype!r}")
    return dtype


def candidate_variant(config: dict, *fields: str) -> str:
    """``<fields' values> <dtype>``: a candidate's variant (the dtype only where its config names one)."""
    return " ".join([str(config[field]) for field in fields] + ([config["dtype"]] if "dtype" in config else []))


def candidate_label(config: dict, *fields: str) -> str:
    """``sparsetir[<variant>]``: a candidate's contender name (``candidate_variant``)."""
    return f"sparsetir[{candidate_variant(config, *fields)}]"


def note_candidate(fields: dict, candidate: dict | None) -> dict:
    """``fields`` (a record's family section) with ``"candidate": {"id", "config"}`` where the row is a
    bundle candidate (``candidate`` not None; a baseline's section gets no such key). Returns ``fields``."""
    if candidate is not None:
        fields["candidate"] = {"id": candidate["id"], "config": candidate["config"]}
    return fields


def rounded_to(array: np.ndarray, dtype: str) -> np.ndarray:
    """``array`` as float32 holding the nearest values of ``dtype`` (what a candidate of that dtype is given)."""
    if dtype == "float32":
        return np.asarray(array, dtype=np.float32)
    import torch  # noqa: PLC0415 - the GPU host has torch; numpy has no bfloat16

    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(getattr(torch, dtype)).float().numpy()


def half_precision_case(case: Case, dtype: str) -> Case:
    """``case`` (the float64 result of inputs already rounded to ``dtype``) with the tolerance widened to
    ``HALF_RELATIVE_TOLERANCE[dtype]`` of its largest value, where that is wider (the output's own
    rounding to ``dtype``)."""
    if dtype == "float32":
        return case
    scale = float(np.abs(case.reference).max()) or 1.0
    tolerance = np.maximum(case.tolerance, HALF_RELATIVE_TOLERANCE[dtype] * scale)
    return Case(case.inputs, case.reference, tolerance, case.min_bytes)


def assemble_kernel(bundle: Path, candidate: dict, scratch: Path) -> Path:
    """Link a candidate's shared library and its own sidecars side by side, as ``Kernel.export`` writes them
    (a function without a structure, ``CompiledFunction.export``'s, has no ``structure``)."""
    library = bundle / candidate["library"]
    manifest = json.loads((bundle / candidate["manifest"]).read_text())
    path = scratch / f"{candidate['id']}.so"
    links = {path: library, path.with_name(path.name + ".json"): bundle / candidate["manifest"]}
    if candidate.get("structure"):
        links[path.with_name(path.name + ".npz")] = bundle / candidate["structure"]
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


def candidate_factory(library: Path, B: np.ndarray, device: str, dtype: str = "float32"):
    """``factory() -> run``: load the kernel, move B to the device once (as a torch tensor in ``dtype`` for a
    half-precision candidate, whose operands are float16/bfloat16), run into a preallocated C."""
    def factory():
        kernel = load(library)
        if device == "cuda" or dtype != "float32":
            import torch  # noqa: PLC0415 - only a CUDA bundle or a half candidate needs torch (numpy has no bfloat16)

            B_device = torch.from_numpy(np.ascontiguousarray(B)).to(device=device, dtype=getattr(torch, dtype))
            out = torch.empty((kernel.output_shape()), dtype=B_device.dtype, device=device)
        else:
            B_device, out = B, np.empty(kernel.output_shape(), dtype=B.dtype)

        def run():
            kernel(B_device, out=out)
            return out

        return run

    return factory
