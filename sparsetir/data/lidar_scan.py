"""Point clouds by name: a registered scan (KITTI), or a seeded synthetic LiDAR-like scan (``lidar:<points>``).

The sparse-convolution benchmark, its tests and the smoke run name their clouds this way; a
synthetic scan is a ground disc (denser near the sensor), walls and poles, with a reflectance column.
"""

from __future__ import annotations

import numpy as np

from .registry import load, point_clouds

__all__ = ["LIDAR_PREFIX", "MAX_SYNTHETIC_POINTS", "check_cloud_name", "load_points", "synthetic_scan"]

LIDAR_PREFIX = "lidar:"
MAX_SYNTHETIC_POINTS = 5_000_000


def check_cloud_name(name: str) -> None:
    """``ValueError`` unless ``name`` is a registered point cloud or a valid ``lidar:<points>`` spec."""
    if name.startswith(LIDAR_PREFIX):
        points = name[len(LIDAR_PREFIX):]
        if not points.isdigit() or not 1 <= int(points) <= MAX_SYNTHETIC_POINTS:
            raise ValueError(f"bad synthetic cloud {name!r}; expected {LIDAR_PREFIX}<points> with 1 .. "
                             f"{MAX_SYNTHETIC_POINTS:,} points")
        return
    if name not in point_clouds():
        raise ValueError(f"unknown point cloud {name!r}; known: {', '.join(point_clouds())}, or "
                         f"{LIDAR_PREFIX}<points>")


def synthetic_scan(points: int, seed: int = 0) -> np.ndarray:
    """A seeded ``(points, 4)`` float32 scan: a ground disc (denser near the sensor), walls and poles, with
    a reflectance column, about the shape of a LiDAR sweep."""
    rng = np.random.default_rng(seed)
    n_ground, n_wall = int(points * 0.6), int(points * 0.3)
    n_pole = points - n_ground - n_wall
    r, t = 40.0 * rng.random(n_ground) ** 2, rng.uniform(0, 2 * np.pi, n_ground)
    ground = np.c_[r * np.cos(t), r * np.sin(t), rng.normal(-1.7, 0.03, n_ground)]
    side = rng.integers(0, 4, n_wall)
    along, height = rng.uniform(-30, 30, n_wall), rng.uniform(-1.7, 2.5, n_wall)
    offset = np.where(side % 2 == 0, 12.0, -15.0)
    walls = np.where((side < 2)[:, None], np.c_[along, offset, height], np.c_[offset, along, height])
    centres = rng.uniform(-25, 25, (12, 2))
    which, angle = rng.integers(0, 12, n_pole), rng.uniform(0, 2 * np.pi, n_pole)
    poles = np.c_[centres[which, 0] + 0.15 * np.cos(angle), centres[which, 1] + 0.15 * np.sin(angle),
                  rng.uniform(-1.7, 4.0, n_pole)]
    xyz = np.concatenate([ground, walls, poles])
    return np.c_[xyz, rng.random(points)].astype(np.float32)


def load_points(name: str, seed: int = 0) -> np.ndarray:
    """The ``(P, 4)`` points of cloud ``name`` (the registry: embedded, cache, mirror, download)."""
    check_cloud_name(name)
    if name.startswith(LIDAR_PREFIX):
        return synthetic_scan(int(name[len(LIDAR_PREFIX):]), seed)
    return np.asarray(load(name), dtype=np.float32)
