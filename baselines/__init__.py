"""Baselines: one module per library, each declaring everything it computes.

A library module declares

``VARIANTS = {op_or_family: {variant name: Variant(factory, ...)}}``
    what the library computes: for an op (``spmm``, ``sddmm``, ``sparse_attention``) or an
    experiment family (``rgcn``, ``conv``, ``sage``, ...) of the harness, each variant's
    factory (it converts the inputs once and returns a zero-argument ``run()``), the devices it
    runs on, and whether it counts as a *library reference* (the libraries a speedup is
    measured against) or as a device's reference;
``probe() -> (ok, reason)``
    (optional libraries only) whether the library imports here and which version, tried once
    per process (``functools.cache``), as PyG's ``torch_geometric.typing`` sets its ``WITH_*``
    flags once: a module's declarations import without the library, so a process that needs
    none of its variants never pays for its import. :func:`optional_library` makes ``probe`` and
    the getter the factories call from the module's cached import.

Everything else reads the declarations through this package: :func:`variants` (by op or
family, optionally only some libraries or variants), :func:`library_references`,
:func:`device_references`, :func:`default_names` (what a config that names no baselines
runs, and the GPU bundle's lists) and :func:`availability` (whether a variant can run on a
device, and why not). The workflow's schema and config checks, the benchmark engine and the
GPU bundle never list a variant name themselves.

Only ``sparsetir.bench`` imports this package (import-linter checks it); library modules are
imported on first use, after the harness has set its thread counts.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass

DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Variant:
    """One way a library computes an op or a family's case.

    Parameters
    ----------
    factory : callable, optional
        ``factory(*inputs, device="cpu", **options) -> run``: the inputs converted once, outside
        timing; ``run()`` computes the result (a torch tensor or numpy array), optionally
        carrying ``run.timings`` (its set-up seconds: ``convert_s``, ``compile_s``) and other
        attributes its family reads.
    devices : tuple of str
        Where the variant is listed: ``"cpu"``, ``"cuda"``.
    library_reference : bool
        Whether it computes the same thing as the op and counts among the libraries a speedup is
        measured against ("the best CPU library", "the best baseline").
    reference_on : tuple of str
        The devices on which this variant is *the* reference of its op by default (cuSPARSE for
        SpMM on a GPU).
    default : bool
        Whether it runs when a config names no baselines (False: opt in, e.g. dense attention,
        which computes something else).
    check : callable, optional
        ``check(device) -> (ok, reason)``: a condition beyond the library's probe (a kernel that
        fails under this torch, a GPU build the library does not have).
    never : str, optional
        Why it can never run here (a library that no wheel installs); its rows say so, and it needs
        no factory.
    """

    factory: Callable | None = None
    devices: tuple = DEVICES
    library_reference: bool = False
    reference_on: tuple = ()
    default: bool = True
    check: Callable[[str], tuple[bool, str]] | None = None
    never: str | None = None


@dataclass(frozen=True)
class Baseline:
    """A declared variant with its name and library (the module that declares it)."""

    name: str
    library: str
    variant: Variant

    def __post_init__(self):
        if self.variant.factory is None and not self.variant.never:
            raise TypeError(f"baseline {self.name!r} (baselines.{self.library}) has neither a factory nor a reason "
                            "it never runs")

    def available(self, device: str = "cpu") -> tuple[bool, str]:
        """Whether it can run on ``device`` here, and why not (see :func:`availability`)."""
        return availability(self, device)

    def build(self, *inputs, device: str = "cpu", **options):
        """``run()`` of this variant on ``inputs`` (``RuntimeError`` with the reason when it cannot run)."""
        ok, reason = self.available(device)
        if not ok:
            raise RuntimeError(reason)
        if device != "cpu":
            options["device"] = device
        return self.variant.factory(*inputs, **options)


def library_names() -> list[str]:
    """The library modules of this package, by name."""
    return sorted(module.name for module in pkgutil.iter_modules(__path__) if not module.name.startswith("_"))


@functools.cache
def library(name: str):
    """The library module ``name`` (imported now: its declarations, not the library itself)."""
    if name not in library_names():
        raise ValueError(f"unknown baseline library {name!r}; known: {', '.join(library_names())}")
    return importlib.import_module(f"{__name__}.{name}")


def _broken_libraries() -> dict[str, str]:
    """Library modules that do not import (a bug, or a hard dependency missing): name -> why."""
    broken = {}
    for name in library_names():
        try:
            library(name)
        except Exception as error:  # one broken library must not take the others down
            broken[name] = f"cannot import baselines.{name}: {type(error).__name__}: {error}"
    return broken


def _declared() -> dict[str, dict[str, Baseline]]:
    """``op_or_family -> name -> Baseline`` over every library that imports; a variant name is one library's."""
    found: dict[str, dict[str, Baseline]] = {}
    owner: dict[str, str] = {}
    broken = _broken_libraries()
    for name in library_names():
        if name in broken:
            continue
        for key, declared in getattr(library(name), "VARIANTS", {}).items():
            for variant_name, variant in declared.items():
                if not isinstance(variant, Variant):
                    raise TypeError(f"baselines.{name}.VARIANTS[{key!r}][{variant_name!r}] is not a Variant")
                if owner.setdefault(variant_name, name) != name:
                    raise ValueError(f"variant {variant_name!r} is declared by both baselines.{owner[variant_name]} "
                                     f"and baselines.{name}")
                found.setdefault(key, {})[variant_name] = Baseline(variant_name, name, variant)
    return found


def keys() -> list[str]:
    """Every op and family some library declares variants for."""
    return list(_declared())


def variants(key: str, names: Iterable[str] | None = None, *, device: str | None = None) -> dict[str, Baseline]:
    """The baselines of op or family ``key``, by name, in declaration order.

    ``names``: only these, each a variant name or a library name (all of that library's variants
    of ``key``), in the given order; ``ValueError`` for a name that is neither. ``device``: only
    the variants listed for that device.
    """
    declared = _declared().get(key, {})
    if names is None:
        chosen = dict(declared)
    else:
        chosen = {}
        for name in names:
            if name in declared:
                chosen[name] = declared[name]
            elif name in library_names():
                broken = _broken_libraries().get(name)
                if broken:  # its variants are unknown: one row saying why
                    chosen[name] = Baseline(name, name, Variant(never=broken))
                chosen.update({n: b for n, b in declared.items() if b.library == name})
            else:
                known = sorted({*declared, *{b.library for b in declared.values()}})
                raise ValueError(f"unknown {key} baseline {name!r}; known: {', '.join(known) or 'none'}")
    return {n: b for n, b in chosen.items() if device is None or device in b.variant.devices}


def baseline(key: str, name: str) -> Baseline:
    """The variant ``name`` of op or family ``key`` (``ValueError`` listing the known ones)."""
    declared = _declared().get(key, {})
    if name not in declared:
        raise ValueError(f"unknown {key} baseline {name!r}; known: {', '.join(declared) or 'none'}")
    return declared[name]


def default_names(key: str, device: str = "cpu") -> list[str]:
    """What runs for ``key`` on ``device`` when a config names no baselines (the ``default`` variants)."""
    return [n for n, b in variants(key, device=device).items() if b.variant.default]


def library_references(key: str) -> tuple[str, ...]:
    """The variants of ``key`` that count among "the best library" a speedup is measured against."""
    return tuple(n for n, b in variants(key).items() if b.variant.library_reference)


def device_references(key: str) -> dict[str, str]:
    """``device -> variant``: the reference of ``key`` on each device that declares one."""
    found = {}
    for name, entry in variants(key).items():
        for device in entry.variant.reference_on:
            found.setdefault(device, name)
    return found


def libraries_of(key: str) -> list[str]:
    """The libraries that declare variants of ``key``."""
    return list(dict.fromkeys(b.library for b in variants(key).values()))


def availability(entry: Baseline, device: str = "cpu") -> tuple[bool, str]:
    """Whether ``entry`` can run on ``device`` here: never-installable variants and devices it is not
    listed for say so; then its library's probe (tried once), a GPU for ``"cuda"``, and its own check."""
    variant = entry.variant
    if variant.never:
        return False, variant.never
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; expected one of {DEVICES}")
    if device not in variant.devices:
        return False, f"{entry.name} runs on {' or '.join(variant.devices)}, not on {device!r}"
    module = library(entry.library)
    ok, reason = module.probe() if hasattr(module, "probe") else (True, entry.library)
    if ok and device == "cuda":
        ok, why = _cuda()
        reason = why if not ok else reason
    if ok and variant.check is not None:
        ok, why = variant.check(device)
        reason = why if not ok or why else reason
    return ok, reason


def optional_library(load: Callable[[], tuple[object, str | None]], describe: Callable[[object], str]
                     ) -> tuple[Callable[[], tuple[bool, str]], Callable[[], object]]:
    """``(probe, require)`` of an optional library. ``load()`` gives ``(library, None)`` when it imports,
    else ``(None, why not)`` (the module caches it: tried once per process); ``probe() -> (ok, reason)``,
    the reason being ``describe(library)`` (its version) or why not; ``require()`` returns the library or
    raises ``RuntimeError`` saying why not (a factory's call, once its variant was found available)."""

    def probe() -> tuple[bool, str]:
        library, reason = load()
        return (False, reason) if library is None else (True, describe(library))

    def require():
        library, reason = load()
        if library is None:
            raise RuntimeError(reason)
        return library

    return probe, require


@functools.cache
def _cuda() -> tuple[bool, str]:
    import torch  # noqa: PLC0415 - only when a variant is asked about a GPU, after the thread settings

    if torch.cuda.is_available():
        return True, f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    return False, f"torch {torch.__version__} sees no CUDA GPU"


def declarations() -> dict[str, dict[str, dict]]:
    """``key -> name -> {library, devices, library_reference, reference_on, default, never}``: the facts
    the workflow's schema and checks read (plain data, cacheable)."""
    return {key: {name: {"library": b.library, "devices": list(b.variant.devices),
                         "library_reference": b.variant.library_reference, "reference_on": list(b.variant.reference_on),
                         "default": b.variant.default, "never": b.variant.never}
                  for name, b in declared.items()}
            for key, declared in _declared().items()}
