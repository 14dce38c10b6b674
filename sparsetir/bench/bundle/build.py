"""Build a GPU bundle here (the compile host), and the command line of the bundle package.

    python -m sparsetir.bench.bundle build --dataset cora --dataset pubmed --feat 64 --out results/gpu-bundle
    bash results/gpu-bundle/run.sh --out "$OUT"          # on the GPU host (no TVM compiler needed)
    python -m sparsetir.bench.bundle ingest --records <folder the records came back in>

``build`` compiles a short list of SpMM candidates (``shortlist``: CSR and the best few hyb
settings x a few knob settings) per (dataset, feature size), with real device code for CUDA,
and writes a folder no larger than ``max_bytes`` (60 MiB):

=================  ====================================================================
``kernels/``       one ``.so`` (+ generated source) per distinct compiled library; kernels
                   are compiled for symbolic sizes, so one library serves many graphs
``candidates/``    each candidate's kernel manifest (``.json``: spec, sizes, signature) and
                   structure arrays (``.npz``, compressed), deduplicated by content
``inputs/``        one ``.npz`` per graph (CSR arrays); B is drawn on the host from the seed
``lib/``           libtvm_runtime.so (+ libtvm_runtime_cuda.so, libcudart.so.13 for CUDA)
``wheels/``        the apache-tvm-ffi wheel for the GPU host's Python (3.12), and typing-extensions
``manifest.json``  cases, candidates (config, files, tuning key), timing, versions, provenance
``run.sh``         installs the wheels when tvm_ffi is missing, then runs ``runner.py``
=================  ====================================================================

The runner (:mod:`sparsetir.bench.bundle.runner`) runs from the repository's working tree on
the GPU host; ``ingest`` lives in :mod:`sparsetir.bench.bundle.ingestion`.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from ...backend import device_of, normalize_target
from ...backend.cache import cache_dir
from ...backend.cuda import find_nvcc
from ...data import dataset_slug, is_generated, names
from ...formats import read_sparse_input
from ...ops import get_op
from ...runtime.function import SIDECAR_SHA256, file_sha256
from ...runtime.manifest import seal
from ...timing import BUNDLE, TimingPolicy, package_versions
from ...tune.database import TuningDatabase, tuning_key
from ...tune.fingerprint import fingerprint
from ...tune.shortlist import DEFAULT_RANKED_FORMATS, shortlist
from ...version import __version__
from ..datasets import load_matrix
from .ingestion import ingest
from .manifest import BUNDLE_FORMAT, bundle_baselines
from .parts import bundle_parts

MAX_BUNDLE_BYTES = 60 << 20
DEFAULT_LIMIT = 6  # candidates per (dataset, feature size)
DEFAULT_FEATS = (32, 64, 128, 256)
DEFAULT_TIME_LIMIT_S = {"cuda": 300.0, "cpu": 120.0}  # the runner stops starting cases after this
BASELINE_OPTIONS = {"cuda": {"torch-dense": {"limit_bytes": 16 << 30}},
                    "cpu": {"torch-dense": {"limit_bytes": 64 << 20}}}
# (requirement, file pattern): tvm_ffi for the GPU host's Python, and the one package it requires
RUNNER_WHEELS = (("apache-tvm-ffi==0.1.14.post1", "apache_tvm_ffi-0.1.14.post1-{tag}-{tag}-*.whl"),
                 ("typing-extensions>=4.13", "typing_extensions-*-py3-none-any.whl"))
GPU_HOST_PYTHON = "3.12"
RUNTIME_LIBRARIES = {"cpu": ("libtvm_runtime.so",), "cuda": ("libtvm_runtime.so", "libtvm_runtime_cuda.so")}
CUDART = "libcudart.so.13"

RUN_SH = """#!/usr/bin/env bash
# Run this bundle's candidates and baselines on this machine; records go to --out (default $OUT).
# Needs python3 with numpy, scipy and torch, and the sparsetir working tree (the current folder,
# $SPARSETIR_REPO, or a folder above this bundle). The TVM compiler is not needed.
set -euo pipefail
BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
REPO="${SPARSETIR_REPO:-}"
if [ -z "$REPO" ]; then
  for candidate in "$PWD" "$BUNDLE/.." "$BUNDLE/../.." "$BUNDLE/../../.."; do
    if [ -f "$candidate/sparsetir/runtime/loader.py" ]; then REPO="$(cd "$candidate" && pwd)"; break; fi
  done
fi
if [ -z "$REPO" ]; then echo "run.sh: sparsetir working tree not found; set SPARSETIR_REPO" >&2; exit 2; fi
if ! "$PYTHON" -c "import tvm_ffi" 2>/dev/null; then
  if ! ls "$BUNDLE"/wheels/*.whl >/dev/null 2>&1; then
    echo "run.sh: tvm_ffi is not importable and the bundle has no wheel to install" >&2; exit 2
  fi
  echo "run.sh: installing" "$BUNDLE"/wheels/*.whl "into $BUNDLE/.site" >&2
  "$PYTHON" -m pip install -q --no-index --no-deps --upgrade --target "$BUNDLE/.site" "$BUNDLE"/wheels/*.whl
  export PYTHONPATH="$BUNDLE/.site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export SPARSETIR_TVM_RUNTIME_DIR="$BUNDLE/lib"
export TVM_USE_RUNTIME_LIB=1
cd "$REPO"
exec "$PYTHON" -m sparsetir.bench.bundle.runner "$BUNDLE" "$@"
"""


def _say(progress: bool, message: str) -> None:
    if progress:
        print(f"[bundle] {message}", file=sys.stderr, flush=True)


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file())


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB"


class BundleTooLarge(ValueError):
    """The bundle would exceed its size limit."""


def check_size(folder: Path, max_bytes: int, what: str) -> int:
    """The folder's size; ``BundleTooLarge`` (a ValueError) once it exceeds ``max_bytes``."""
    size = folder_bytes(folder)
    if size > max_bytes:
        raise BundleTooLarge(
            f"the bundle is {_mib(size)} after {what}, over its {_mib(max_bytes)} limit; "
            "use fewer datasets or feature sizes, or a smaller candidate limit")
    return size


# ---------------------------------------------------------------- what the GPU host needs


def tvm_library_dir() -> Path:
    """The installed apache-tvm wheel's ``tvm/lib`` (never ``$SPARSETIR_TVM_RUNTIME_DIR``)."""
    try:
        return Path(importlib.metadata.distribution("apache-tvm").locate_file("tvm/lib"))
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError("building a bundle needs the apache-tvm wheel (its runtime libraries are copied)") from None


def cudart_path() -> Path:
    """``libcudart.so.13`` of the CUDA toolkit: beside nvcc, in ``$CUDA_HOME``/``$CUDA_PATH`` or /usr/local/cuda*."""
    nvcc = find_nvcc()
    homes = [Path(nvcc).resolve().parent.parent] if nvcc else []
    homes += [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    homes += sorted(Path("/usr/local").glob("cuda*"))
    for home in homes:
        for lib in ("lib64", "lib", "targets/x86_64-linux/lib"):
            if (home / lib / CUDART).exists():
                return home / lib / CUDART
    raise RuntimeError(f"{CUDART} not found next to nvcc, in $CUDA_HOME or /usr/local/cuda*; a CUDA bundle needs it")


def copy_runtime_libraries(lib: Path, device: str) -> list[str]:
    """Copy the TVM runtime (and for CUDA its CUDA part and cudart) into ``lib``; their names."""
    lib.mkdir(parents=True, exist_ok=True)
    sources = [tvm_library_dir() / name for name in RUNTIME_LIBRARIES[device]]
    if device == "cuda":
        sources.append(cudart_path())
    for source in sources:
        if not source.exists():
            raise RuntimeError(f"{source} is missing; the TVM wheel is incomplete")
        shutil.copyfile(source, lib / source.name)  # follows symlinks: the bundle holds real files
    return [source.name for source in sources]


def runner_wheels(*, python: str = GPU_HOST_PYTHON) -> list[Path]:
    """The wheels the runner needs on a host without TVM (apache-tvm-ffi and its one dependency,
    typing-extensions) for ``python``, manylinux x86-64, each downloaded once into the cache."""
    tag = f"cp{python.replace('.', '')}"
    folder = cache_dir() / "wheels" / tag
    wheels = []
    for requirement, pattern in RUNNER_WHEELS:
        pattern = pattern.format(tag=tag)
        found = sorted(folder.glob(pattern))
        if not found:
            folder.mkdir(parents=True, exist_ok=True)
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                       "--python-version", python, "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
                       "--platform", "manylinux_2_17_x86_64", "-d", str(folder), requirement]
            try:
                result = subprocess.run(command, capture_output=True, text=True, timeout=300)
            except (OSError, subprocess.TimeoutExpired) as error:
                raise RuntimeError(f"pip download {requirement} failed: {error}") from None
            found = sorted(folder.glob(pattern))
            if result.returncode != 0 or not found:
                reason = (result.stderr.strip().splitlines() or ["no wheel was written"])[-1]
                raise RuntimeError(f"pip download {requirement} (Python {python}) failed: {reason}")
        wheels.append(found[-1])
    return wheels


# ---------------------------------------------------------------- content-addressed files


def _digest_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:20]


def _digest_arrays(arrays: dict) -> str:
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:20]


def _store_library(bundle: Path, library: Path) -> tuple[str, bool]:
    """Copy a kernel library (and its generated source) into ``kernels/`` once; (relative path, new?)."""
    relative = f"kernels/{_digest_file(library)}.so"
    if (bundle / relative).exists():
        return relative, False
    shutil.copyfile(library, bundle / relative)
    manifest = json.loads(library.with_name(library.name + ".json").read_text())
    source = library.with_name(library.name + manifest["source_suffix"])
    if source.exists():
        shutil.copyfile(source, bundle / (relative + manifest["source_suffix"]))
    return relative, True


def _store_candidate_files(bundle: Path, kernel, scratch: Path) -> tuple[str, str]:
    """The kernel's manifest and structure arrays in ``candidates/``, deduplicated; their relative paths.

    The structure is stored compressed, so the manifest records that file's sha256 (which
    ``runtime.load`` on the GPU host checks).
    """
    exported = kernel.export(scratch / "kernel.so")
    with np.load(exported.with_name(exported.name + ".npz"), allow_pickle=False) as loaded:
        arrays = {name: loaded[name] for name in loaded.files}
    structure_rel = f"candidates/{_digest_arrays(arrays)}.npz"
    if not (bundle / structure_rel).exists():
        np.savez_compressed(bundle / structure_rel, **arrays)
    manifest = json.loads(exported.with_name(exported.name + ".json").read_text())
    manifest[SIDECAR_SHA256] = file_sha256(bundle / structure_rel)
    manifest = seal(manifest)  # the sidecar's digest changed: seal again, or runtime.load refuses the manifest
    manifest_text = json.dumps(manifest, indent=1)
    manifest_rel = f"candidates/{hashlib.sha256(manifest_text.encode()).hexdigest()[:20]}.json"
    if not (bundle / manifest_rel).exists():
        (bundle / manifest_rel).write_text(manifest_text)
    return manifest_rel, structure_rel


# ---------------------------------------------------------------- build


def _check_datasets(datasets) -> list[str]:
    if isinstance(datasets, str) or not datasets:
        raise ValueError(f"datasets must be a non-empty list of dataset names, got {datasets!r}")
    known = set(names())
    for name in datasets:
        if not isinstance(name, str) or not (name in known or is_generated(name)):
            raise ValueError(f"unknown dataset {name!r}; known: {', '.join(sorted(known))}, or a generator "
                             "spec such as rmat:12:16")
    return list(dict.fromkeys(datasets))


def _check_feats(feats) -> list[int]:
    if isinstance(feats, (int, str)) or not feats:
        raise ValueError(f"feats must be a non-empty list of positive ints, got {feats!r}")
    for feat in feats:
        if not isinstance(feat, int) or isinstance(feat, bool) or feat < 1:
            raise ValueError(f"feature sizes must be positive ints, got {feat!r}")
    return list(dict.fromkeys(feats))


def build_bundle(out, datasets, feats=DEFAULT_FEATS, *, target="cuda", limit: int = DEFAULT_LIMIT,
                 hyb_formats: dict | None = None, knob_settings=None, ranked: int = DEFAULT_RANKED_FORMATS,
                 seed: int = 0, timing: TimingPolicy | dict | None = None, baselines=None, time_limit_s: float | None = None,
                 max_bytes: int = MAX_BUNDLE_BYTES, wheel: bool | None = None, progress: bool = True,
                 op: str = "spmm", **families: dict | None) -> dict:
    """Compile the candidates of every (dataset, feat) and write the bundle folder ``out``; returns its manifest.

    ``target``: "cuda" (default) or "llvm" (a CPU bundle, for testing the runner here).
    ``hyb_formats``: dataset -> an extra hyb format string (e.g. the paper's setting).
    ``ranked``: formats ranked by their static cost on the list (``tune.shortlist``).
    ``wheel``: carry the apache-tvm-ffi and typing-extensions wheels (default: required for CUDA;
    for llvm tried, and left out with a warning when the download fails; ``False``: left out, for
    hosts that have tvm_ffi). The folder is built beside ``out`` and moved into place only when
    complete; ``BundleTooLarge`` (a ValueError) past ``max_bytes``.
    ``families``: a family's bundle part (``bundle.parts``; a module of this package per family) by name,
    with its settings (the config's ``bundle.<family>`` section, which its module documents): that
    family's candidates too, in the manifest's section of that name. ``ValueError`` for a name no part
    declares.
    """
    spec = get_op(op)
    parts = bundle_parts()
    unknown = sorted(set(families) - set(parts))
    if unknown:
        raise ValueError(f"unknown bundle part(s) {unknown}; known: {', '.join(parts)}")
    datasets, feats = _check_datasets(datasets), _check_feats(feats)
    target = normalize_target(target)
    device = device_of(target)
    if not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"max_bytes must be a positive int, got {max_bytes!r}")
    hyb_formats = dict(hyb_formats or {})
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    staging.chmod(0o755)
    try:
        for folder in ("kernels", "candidates", "inputs", "lib", "wheels"):
            (staging / folder).mkdir()
        libraries = copy_runtime_libraries(staging / "lib", device)
        check_size(staging, max_bytes, "copying the runtime libraries")
        wheel_files, wheel_note = [], None
        if wheel is not False:
            try:
                for source in runner_wheels():
                    shutil.copyfile(source, staging / "wheels" / source.name)
                    wheel_files.append(f"wheels/{source.name}")
            except RuntimeError as error:
                if device == "cuda" or wheel:
                    raise RuntimeError(f"{error}; the GPU host has no network, so a CUDA bundle must carry "
                                       "the tvm-ffi wheel (retry where PyPI is reachable)") from None
                wheel_note = f"no tvm-ffi wheel: {error}"
                print(f"[bundle] warning: {wheel_note}; the bundle runs only where tvm_ffi is installed",
                      file=sys.stderr, flush=True)
        _say(progress, f"{device} bundle: {len(datasets)} dataset(s) x feats {feats}, up to {limit} candidates "
                       f"each; runtime {', '.join(libraries)}; wheels {', '.join(wheel_files) or 'none'}")
        cases, inputs, kernels = [], {}, {}
        with tempfile.TemporaryDirectory(prefix="sparsetir-bundle-export-") as scratch:
            for dataset in datasets:
                A = load_matrix(dataset, seed)
                slug = dataset_slug(dataset)
                np.savez_compressed(staging / "inputs" / f"{slug}.npz", indptr=A.indptr, indices=A.indices,
                                    data=A.data, shape=np.asarray(A.shape, dtype=np.int64))
                inputs[dataset] = {"file": f"inputs/{slug}.npz", "shape": list(A.shape), "nnz": int(A.nnz)}
                matrix = read_sparse_input(A, canonical=True)
                matrix_fingerprint = fingerprint(matrix)
                extra = [hyb_formats[dataset]] if dataset in hyb_formats else []
                for feat in feats:
                    case_started = time.perf_counter()
                    configs = shortlist(matrix, device, op=op, limit=limit, extra_formats=extra, knob_settings=knob_settings,
                                        ranked=ranked)
                    if not configs:
                        raise ValueError(f"{dataset} feat {feat}: the candidate list is empty")
                    key = tuning_key(op, matrix_fingerprint, feat, "float32", target)
                    candidates, new = [], 0
                    for index, config in enumerate(configs):
                        kernel = spec.compile(A, feat, target=target, dtype="float32", **config)
                        library, is_new = _store_library(staging, Path(kernel.function.library))
                        new += is_new
                        manifest_rel, structure_rel = _store_candidate_files(staging, kernel, Path(scratch))
                        kernels.setdefault(library, {"fatbin": kernel.function.manifest.get("fatbin"), "used_by": 0})
                        kernels[library]["used_by"] += 1
                        candidates.append({"id": f"{slug}-f{feat}-{index:02d}", "config": config, "library": library,
                                           "manifest": manifest_rel, "structure": structure_rel,
                                           "compile_s": kernel.timings.get("compile_s"),
                                           "convert_s": kernel.timings.get("convert_s")})
                    cases.append({"dataset": dataset, "feat": feat, "tuning_key": key, "candidates": candidates})
                    size = check_size(staging, max_bytes, f"{dataset} feat {feat}")
                    _say(progress, f"{dataset} feat {feat}: {len(candidates)} candidates ({new} new kernel(s)) in "
                                   f"{time.perf_counter() - case_started:.1f} s; bundle {_mib(size)}")
            sections = {}
            for name, part in parts.items():
                if families.get(name):
                    sections[name] = part.build(staging, families[name], target=target, seed=seed,
                                                scratch=Path(scratch), store_library=_store_library,
                                                store_candidate_files=_store_candidate_files,
                                                say=lambda message: _say(progress, message))
                    check_size(staging, max_bytes, part.what)
        manifest = {
            "format": BUNDLE_FORMAT, "id": uuid.uuid4().hex[:12], "op": op, "target": target, "device": device,
            "dtype": "float32", "seed": seed,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "build": {"host": platform.node(), "versions": {"sparsetir": __version__, **package_versions()},
                      "seconds": None},
            "timing": TimingPolicy.from_mapping(timing, BUNDLE[device]).to_dict(),
            "time_limit_s": float(time_limit_s or DEFAULT_TIME_LIMIT_S[device]),
            "baselines": bundle_baselines(op, baselines, device),
            "baseline_options": BASELINE_OPTIONS[device],
            "runtime_libraries": [f"lib/{name}" for name in libraries],
            "wheels": wheel_files, "wheel_note": wheel_note,
            "inputs": inputs, "kernels": kernels, "cases": cases,
        }
        manifest.update(sections)
        manifest["build"]["seconds"] = round(time.perf_counter() - started, 1)
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1))
        (staging / "run.sh").write_text(RUN_SH)
        (staging / "run.sh").chmod(0o755)
        size = check_size(staging, max_bytes, "writing the manifest")
        if out.exists():
            shutil.rmtree(out)
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    count = sum(len(case["candidates"]) for case in cases)
    _say(progress, f"wrote {out}: {len(cases)} cases, {count} candidates, {len(kernels)} distinct kernels, "
                   f"{_mib(size)} (limit {_mib(max_bytes)}) in {manifest['build']['seconds']:.0f} s")
    return manifest


# ---------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sparsetir.bench.bundle", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="compile candidates into a bundle folder")
    build.add_argument("--dataset", action="append", required=True, help="dataset name (repeatable)")
    build.add_argument("--feat", action="append", type=int, help=f"feature size (repeatable; default {DEFAULT_FEATS})")
    build.add_argument("--target", default="cuda", choices=("cuda", "llvm"))
    build.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="candidates per (dataset, feat)")
    build.add_argument("--hyb", action="append", default=[], metavar="DATASET=FORMAT",
                       help="an extra hyb candidate for a dataset, e.g. cora=hyb:1:1,2,4 (repeatable)")
    build.add_argument("--time-limit-s", type=float, help="the runner's default time limit")
    build.add_argument("--max-mib", type=float, default=MAX_BUNDLE_BYTES / 2**20, help="size limit (default 60)")
    build.add_argument("--no-wheel", action="store_true",
                       help="leave out the tvm-ffi wheel (for hosts that have tvm_ffi)")
    build.add_argument("--seed", type=int, default=0)
    for part in bundle_parts().values():  # each family's own options
        if part.add_arguments is not None:
            part.add_arguments(build)
    build.add_argument("--out", required=True, help="bundle folder (replaced when the build succeeds)")
    ingest = commands.add_parser("ingest", help="pick the best candidates from returned records")
    ingest.add_argument("--records", required=True, help="folder holding the runner's records/ (or the records)")
    ingest.add_argument("--reference-dir", default="results/reference/gpu",
                        help="where the merged records go (default results/reference/gpu)")
    ingest.add_argument("--database", help="tuning database file (default: $SPARSETIR_CACHE_DIR/tune/database.jsonl)")
    return parser


def _hyb_option(items: list[str]) -> dict:
    pairs = {}
    for item in items:
        dataset, sep, fmt = item.partition("=")
        if not sep or not fmt.startswith("hyb"):
            raise ValueError(f"--hyb takes DATASET=hyb:<parts>:<widths>, got {item!r}")
        pairs[dataset] = fmt
    return pairs


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "build":
        build_bundle(args.out, args.dataset, args.feat or DEFAULT_FEATS, target=args.target, limit=args.limit,
                     hyb_formats=_hyb_option(args.hyb), time_limit_s=args.time_limit_s,
                     max_bytes=int(args.max_mib * 2**20), wheel=False if args.no_wheel else None, seed=args.seed,
                     **{name: part.from_arguments(args) for name, part in bundle_parts().items()
                        if part.from_arguments is not None})
        return 0
    ingest(args.records, reference_dir=args.reference_dir,
           database=TuningDatabase(args.database) if args.database else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
