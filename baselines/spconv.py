"""spconv 2.3.8 (the conv extra): sparse 3-D convolution, one layer and a network, in spconv's own kernels.

Every variant computes what ``sparsetir.ops.sparse_conv3d`` computes for a layer: output row
``q`` of ``Y = sum_k sum_{(p, q) in pairs(k)} X[p] @ W[k]``. A layer is read through its
interface (``sparsetir.bench.families.conv.ConvLayer``): ``coords (N, 4)`` int, ``X (N, c_in)``
and ``W (K, c_in, c_out)`` float32 numpy (``W[k]`` goes with offset ``k``, x slowest),
``kernel_size``, ``stride``, ``dilation``, ``submanifold``, ``spatial_shape``, and the kernel
map ``kmap`` (``out_coords``). A factory ``factory(layer, device="cpu", threads=None)`` prepares
once and returns a zero-argument ``run()`` giving the ``(M, c_out)`` output as a torch tensor
(under ``torch.no_grad()``), with

* ``run.rows``: None when the output's rows are ``kmap.out_coords``' rows, else an index array
  such that ``output[run.rows]`` is in that order (spconv orders its outputs itself);
* ``run.map_s``: seconds spconv took to build its own kernel map (rules), which is set-up, not
  kernel time; ``run.build_map()`` builds it again (the benchmark times it).

``spconv``: ``SubMConv3d`` / ``SparseConv3d(kernel_size, stride, padding=kernel_size // 2,
dilation)`` with the layer's weights; its rules built once (``ops.get_indice_pairs``), then the
module's own kernel path (``functional.indice_subm_conv`` / ``indice_conv``: gather, GEMM,
scatter-add per offset) on every call, all torch threads. ``spconv-1thread``: the same with one
torch thread (spconv's CPU scatter was seen to write a few wrong rows at >= 32 channels with two
threads; exact with one): a CPU question, so it is not listed on a GPU. The network forms
(family ``conv-network``) build every layer's rules first (a subm layer's once per level, as an
``indice_key`` caches them); one call runs every layer with a ReLU between them.

spconv is probed once (:func:`probe`, on first use).
"""

from __future__ import annotations

import functools
import importlib
import time

import numpy as np
import torch

from baselines import Variant, optional_library

SPCONV_VERSION = "2.3.8"


@functools.cache
def import_spconv():
    """``(spconv modules, None)`` or ``(None, reason)``: ``spconv.pytorch`` with its ``ops`` and
    ``functional`` and ``ConvAlgo``, imported on first use (once per process)."""
    try:
        spconv = importlib.import_module("spconv")
        modules = {"spconv": spconv, "nn": importlib.import_module("spconv.pytorch"),
                   "ops": importlib.import_module("spconv.pytorch.ops"),
                   "functional": importlib.import_module("spconv.pytorch.functional"),
                   "ConvAlgo": importlib.import_module("spconv.core").ConvAlgo}
    except Exception as error:  # an ImportError, or cumm failing to load its library
        return None, (f"spconv is not importable ({type(error).__name__}: {error}); install the conv extra "
                      f"(pip install 'sparsetir[conv]', spconv=={SPCONV_VERSION})")
    return modules, None


#: ``probe()``: whether spconv imports here, and its version or why not; ``_modules()``: the modules.
probe, _modules = optional_library(
    lambda: import_spconv(),
    lambda modules: f"spconv {getattr(modules['spconv'], '__version__', '?')} on torch {torch.__version__}")


def spconv_weight(W: np.ndarray, kernel_size: int) -> np.ndarray:
    """Our ``(K, c_in, c_out)`` weights in spconv 2's layout, ``(c_out, k, k, k, c_in)``."""
    K, c_in, c_out = W.shape
    return np.ascontiguousarray(np.asarray(W).reshape(kernel_size, kernel_size, kernel_size, c_in, c_out)
                                .transpose(4, 0, 1, 2, 3))


def _row_order(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray | None:
    """Indices into ``theirs`` giving ``ours``' row order (None when they agree); ValueError when the
    two coordinate sets differ."""
    ours, theirs = np.asarray(ours, np.int64), np.asarray(theirs, np.int64)
    if ours.shape == theirs.shape and np.array_equal(ours, theirs):
        return None
    if ours.shape != theirs.shape:
        raise ValueError(f"spconv produced {theirs.shape[0]} output voxels, the kernel map {ours.shape[0]}")
    extent = np.maximum(ours.max(axis=0, initial=0), theirs.max(axis=0, initial=0)) + 1
    mult = np.array([extent[1] * extent[2] * extent[3], extent[2] * extent[3], extent[3], 1], dtype=np.int64)
    their_keys = theirs @ mult
    order = np.argsort(their_keys)
    position = np.searchsorted(their_keys[order], ours @ mult)
    rows = order[np.minimum(position, len(order) - 1)]
    if not np.array_equal(theirs[rows], ours):
        raise ValueError("spconv's output voxels differ from the kernel map's")
    return rows



def spconv_factory(layer, device: str = "cpu", threads: int | None = None, *, single_thread: bool = False):
    """spconv's layer with the layer's weights (see the module docstring); ``single_thread`` runs it with
    one torch thread (restored after every call)."""
    modules = _modules()
    nn, spconv_ops, functional, algo = modules["nn"], modules["ops"], modules["functional"], modules["ConvAlgo"].Native
    ks, stride, dilation = int(layer.kernel_size), int(layer.stride), int(layer.dilation)
    c_in, c_out = int(layer.W.shape[1]), int(layer.W.shape[2])
    if layer.submanifold:
        module = nn.SubMConv3d(c_in, c_out, ks, stride=1, dilation=dilation, bias=False, algo=algo)
    else:
        module = nn.SparseConv3d(c_in, c_out, ks, stride=stride, padding=ks // 2, dilation=dilation, bias=False,
                                 algo=algo)
    module = module.to(device).eval()
    with torch.no_grad():
        module.weight.copy_(torch.from_numpy(spconv_weight(layer.W, ks)))
    coords = torch.from_numpy(np.ascontiguousarray(layer.coords, dtype=np.int32)).to(device)
    features = torch.from_numpy(np.ascontiguousarray(layer.X, dtype=np.float32)).to(device)
    batch_size = int(layer.coords[:, 0].max()) + 1 if len(layer.coords) else 1
    shape = [int(s) for s in layer.spatial_shape]

    def build_map():  # what the module's forward does when no rules are cached under its indice_key
        return spconv_ops.get_indice_pairs(coords, batch_size, shape, algo, list(module.kernel_size),
                                           list(module.stride), list(module.padding), list(module.dilation),
                                           list(module.output_padding), module.subm, module.transposed)

    started = time.perf_counter()
    out_ids, pairs, pair_counts = build_map()
    map_s = time.perf_counter() - started
    rows = None if layer.submanifold else _row_order(layer.kmap.out_coords, out_ids.cpu().numpy())
    num_out = int(out_ids.shape[0])
    conv = functional.indice_subm_conv if layer.submanifold else functional.indice_conv
    weight = module.weight

    def call():
        with torch.no_grad():
            return conv(features, weight, pairs, pair_counts, num_out, algo, None, None)

    run = _one_thread(call) if single_thread else call
    run.rows, run.map_s, run.build_map, run.module = rows, map_s, build_map, module
    return run


def spconv_network_factory(network, device: str = "cpu", threads: int | None = None, *, single_thread: bool = False):
    """The network in spconv: its own rules for every layer (a subm layer's once per level, as an
    ``indice_key`` caches them), built first (``run.map_s``); one call runs every layer with ReLU between."""
    modules = _modules()
    spconv_ops, functional, algo = modules["ops"], modules["functional"], modules["ConvAlgo"].Native
    started = time.perf_counter()
    coords = torch.from_numpy(np.ascontiguousarray(network.coords, dtype=np.int32)).to(device)
    batch_size = int(network.coords[:, 0].max()) + 1 if len(network.coords) else 1
    steps, subm_rules, level = [], {}, 0
    for layer in network.layers:
        ks, stride, dilation = int(layer.kernel_size), int(layer.stride), int(layer.dilation)
        shape = [int(s) for s in layer.spatial_shape]
        key = (level, ks, dilation)
        if layer.submanifold and key in subm_rules:
            rules = subm_rules[key]
        else:
            rules = spconv_ops.get_indice_pairs(coords, batch_size, shape, algo, [ks] * 3,
                                                [1 if layer.submanifold else stride] * 3,
                                                [0 if layer.submanifold else ks // 2] * 3, [dilation] * 3, [0] * 3,
                                                bool(layer.submanifold), False)
            if layer.submanifold:
                subm_rules[key] = rules
        out_ids, pairs, counts = rules
        weight = torch.from_numpy(spconv_weight(layer.W, ks)).to(device)
        conv = functional.indice_subm_conv if layer.submanifold else functional.indice_conv
        steps.append((conv, weight, pairs, counts, int(out_ids.shape[0])))
        if not layer.submanifold:
            coords, level = out_ids, level + 1
    map_s = time.perf_counter() - started
    rows = _row_order(network.layers[-1].kmap.out_coords, coords.cpu().numpy())
    X = torch.from_numpy(np.ascontiguousarray(network.X, dtype=np.float32)).to(device)

    def call():
        with torch.no_grad():
            h = X
            for index, (conv, weight, pairs, counts, num_out) in enumerate(steps):
                h = conv(h, weight, pairs, counts, num_out, algo, None, None)
                if index + 1 < len(steps):
                    h = torch.relu_(h)
            return h

    run = _one_thread(call) if single_thread else call
    run.rows, run.map_s, run.build_map = rows, map_s, None
    return run


def _one_thread(call):
    def run():
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return call()
        finally:
            torch.set_num_threads(before)

    return run



VARIANTS = {
    "conv": {"spconv": Variant(spconv_factory, library_reference=True),
             "spconv-1thread": Variant(functools.partial(spconv_factory, single_thread=True), devices=("cpu",),
                                       library_reference=True)},
    "conv-network": {"spconv": Variant(spconv_network_factory),
                     "spconv-1thread": Variant(functools.partial(spconv_network_factory, single_thread=True),
                                               devices=("cpu",))},
}
