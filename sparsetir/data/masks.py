"""Block masks for sparse attention and the pruned weights of DLMC.

Each generator returns a boolean block layout ``(seq/block, seq/block)`` (numpy), ``True`` where
a block of queries attends to a block of keys; ``sparsetir.ops.sparse_attention`` takes it as is.
``seq`` must be a multiple of ``block``. ``sparsity`` gives the fraction of masked blocks.

* :func:`longformer`: a sliding window around the diagonal;
* :func:`bigbird`: a sliding window, global blocks (the first rows and columns) and seeded random
  blocks per row;
* :func:`butterfly`: the pixelfly pattern of the paper's artifact: block ``(i, j)`` where ``i``
  and ``j`` differ in at most one bit (the block count a power of two);
* :func:`dlmc`: a magnitude-pruned weight of the Deep Learning Matrix Collection, as its
  sparse pattern or, given ``block``, as its block mask;
* :func:`block_pruned`: a seeded block-pruned weight pattern (whole ``block x block`` blocks kept,
  every entry of a kept block non-zero), what structured pruning leaves;
* :func:`pruned_weight`: a weight by name, ``block-pruned/<rows>x<cols>/<block>/<sparsity>`` or a
  DLMC name (PrunedBERT's ``matrices``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .registry import load

MASKS = ("longformer", "bigbird", "butterfly")


def _blocks(seq: int, block: int) -> int:
    for name, value in (("seq", seq), ("block", block)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if seq % block:
        raise ValueError(f"seq ({seq}) must be a multiple of block ({block})")
    return seq // block


def longformer(seq: int, block: int, window: int) -> np.ndarray:
    """A band: query block ``i`` sees key blocks ``j`` with ``|i - j| * block <= window`` (``window``
    keys on each side of the diagonal, rounded up to whole blocks)."""
    blocks = _blocks(seq, block)
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 0:
        raise ValueError(f"window must be an int >= 0, got {window!r}")
    reach = -(-int(window) // block)
    rows = np.arange(blocks)
    return np.abs(rows[:, None] - rows[None, :]) <= reach


def bigbird(seq: int, block: int, window: int, n_global: int, n_random: int, seed: int = 0) -> np.ndarray:
    """BigBird: the ``longformer`` band, the first ``n_global`` block rows and columns in full, and
    ``n_random`` key blocks per query block drawn (without repeats) by a ``seed``-ed generator."""
    layout = longformer(seq, block, window)
    blocks = layout.shape[0]
    for name, value in (("n_global", n_global), ("n_random", n_random)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    n_global = min(int(n_global), blocks)
    layout[:n_global, :] = True
    layout[:, :n_global] = True
    rng = np.random.default_rng(seed)
    count = min(int(n_random), blocks)
    if count:
        picks = np.argsort(rng.random((blocks, blocks)), axis=1)[:, :count]
        layout[np.arange(blocks)[:, None], picks] = True
    return layout


def butterfly(seq: int, block: int) -> np.ndarray:
    """Pixelfly (the flat butterfly of the artifact's ``create_pixelfly``): block ``(i, j)`` is kept
    where ``i XOR j`` is 0 or a power of two, for strides ``blocks/2, blocks/4, ..., 1``."""
    blocks = _blocks(seq, block)
    if blocks & (blocks - 1):
        raise ValueError(f"butterfly needs a power-of-two number of blocks, got {blocks} (seq {seq}, block {block})")
    rows = np.arange(blocks)
    differ = rows[:, None] ^ rows[None, :]
    return (differ & (differ - 1)) == 0


def sparsity(layout: np.ndarray) -> float:
    """The fraction of masked blocks."""
    layout = np.asarray(layout, dtype=bool)
    return 1.0 - float(layout.mean())


def dlmc(name: str, block: int | None = None):
    """A DLMC matrix (``dlmc/<model>/magnitude/<sparsity>/<layer>``, or the part after ``dlmc/``),
    through the dataset registry (embedded copy, cache, the mirror ``../shared/data``, download).

    Returns its boolean pattern as a scipy CSR matrix, or with ``block`` its block mask
    ``(ceil(rows/block), ceil(cols/block))``: ``True`` where the block holds an entry.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    full = name if name.startswith("dlmc/") else f"dlmc/{name}"
    matrix = load(full).tocsr()
    pattern = sp.csr_matrix((np.ones(matrix.nnz, dtype=bool), matrix.indices, matrix.indptr), shape=matrix.shape)
    if block is None:
        return pattern
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"block must be an int >= 1, got {block!r}")
    coo = pattern.tocoo()
    shape = (-(-matrix.shape[0] // block), -(-matrix.shape[1] // block))
    layout = np.zeros(shape, dtype=bool)
    layout[coo.row // block, coo.col // block] = True
    return layout


BLOCK_PRUNED = "block-pruned/"


def block_pruned(rows: int, cols: int, block: int, sparsity: float = 0.9, seed: int = 0) -> sp.csr_matrix:
    """A ``rows x cols`` weight pattern (boolean scipy CSR) pruned in whole ``block x block`` blocks.

    ``round((1 - sparsity) * blocks)`` of the blocks are kept, at least one (seeded, uniformly), and
    every entry of a kept block is non-zero; ``rows`` and ``cols`` must be multiples of ``block``."""
    for name, value in (("rows", rows), ("cols", cols), ("block", block)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if rows % block or cols % block:
        raise ValueError(f"rows and cols must be multiples of block {block}, got {rows}x{cols}")
    if isinstance(sparsity, bool) or not isinstance(sparsity, (int, float)) or not 0.0 <= sparsity < 1.0:
        raise ValueError(f"sparsity must be a number in [0, 1), got {sparsity!r}")
    grid = (rows // block, cols // block)
    blocks = grid[0] * grid[1]
    kept = max(1, int(round((1.0 - sparsity) * blocks)))
    chosen = np.random.default_rng(seed).choice(blocks, size=kept, replace=False)
    layout = np.zeros(blocks, dtype=bool)
    layout[chosen] = True
    dense_blocks = np.ones((block, block), dtype=bool)
    return sp.csr_matrix(np.kron(layout.reshape(grid), dense_blocks))


def pruned_weight(name: str) -> sp.csr_matrix:
    """A pruned weight's pattern by name: ``block-pruned/<rows>x<cols>/<block>/<sparsity>`` (:func:`block_pruned`,
    seed 0) or a DLMC weight (:func:`dlmc`)."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    if not name.startswith(BLOCK_PRUNED):
        return dlmc(name)
    parts = name[len(BLOCK_PRUNED):].split("/")
    try:
        shape, block, sparsity_text = parts
        rows, cols = (int(v) for v in shape.split("x"))
        return block_pruned(rows, cols, int(block), float(sparsity_text))
    except ValueError as error:
        raise ValueError(f"a block-pruned weight is named {BLOCK_PRUNED}<rows>x<cols>/<block>/<sparsity> (e.g. "
                         f"{BLOCK_PRUNED}2048x512/32/0.9), got {name!r}: {error}") from None


__all__ = ["BLOCK_PRUNED", "MASKS", "bigbird", "block_pruned", "butterfly", "dlmc", "longformer", "pruned_weight",
           "sparsity"]
