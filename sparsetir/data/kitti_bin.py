"""KITTI velodyne scans (``.bin``): raw little-endian float32, four values per point.

The values are ``x, y, z`` in metres and the reflectance in ``[0, 1]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .size_limits import size_limits

__all__ = ["read_kitti_bin"]

_POINT_BYTES = 16


def read_kitti_bin(path: str | Path, *, max_nnz: int | None = None, max_bytes: int | None = None) -> np.ndarray:
    """Read a KITTI scan as a read-only ``(points, 4)`` float32 array, validating it.

    The file must fit ``max_bytes`` and its points ``max_nnz`` (:mod:`sparsetir.data.size_limits`).
    """
    path = Path(path)
    limits = size_limits(max_nnz, max_bytes)
    limits.file(path)
    nbytes = path.stat().st_size
    if nbytes == 0 or nbytes % _POINT_BYTES:
        raise ValueError(
            f"{path}: {nbytes} bytes is not a whole number of points ({_POINT_BYTES} bytes each); "
            "the file is truncated or not a KITTI scan"
        )
    limits.entries(nbytes // _POINT_BYTES, str(path), "points")
    points = np.fromfile(path, dtype="<f4").reshape(-1, 4).astype(np.float32, copy=False)
    if not np.isfinite(points).all():
        raise ValueError(f"{path}: the scan holds non-finite coordinates")
    points.flags.writeable = False
    return points
