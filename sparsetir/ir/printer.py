"""Readable text form of a Stage I function."""

from __future__ import annotations

from .axis import DENSE_FIXED, SPARSE_FIXED, Axis, FusedAxis
from .iteration import IDENTITY


def format_axis(axis: Axis) -> str:
    if axis.kind == DENSE_FIXED:
        return f"{axis.name} = dense_fixed({axis.length})"
    parts = [axis.parent.name if axis.parent is not None else "None", f"length={axis.length}"]
    if axis.kind == SPARSE_FIXED:
        parts.append(f"nnz_cols={axis.nnz_cols}")
    else:
        parts.append(f"nnz={axis.nnz}")
    meta = ", ".join(f"{m.name}[{', '.join(map(str, m.shape))}]" for m in axis.metadata())
    if axis.distinct:
        meta += ", distinct"
    if axis.disjoint:
        meta += ", disjoint"
    return f"{axis.name} = {axis.kind}({', '.join(parts)})  # {meta}"


def format_group(group) -> str:
    if isinstance(group, FusedAxis):
        return f"fuse({', '.join(a.name for a in group.axes)})"
    return group.name


def format_update(reducer, target: str, value, atomic: bool = False) -> str:
    """The right-hand side of a store as the user writes it: ``+= v``, ``= max(C[...], v)``, ``= v``."""
    prefix = "atomic " if atomic else ""
    if reducer == "sum":
        return f"{prefix}+= {value}"
    if reducer in ("max", "min"):
        return f"= {prefix}{reducer}({target}, {value})"
    return f"= {value}"


def format_stage1(func) -> str:
    """Axes, buffers and iterations of ``func``, one declaration per line."""
    lines = [f"# Stage I: sparse function {func.name} (index dtype {func.idtype})"]
    lines += [format_axis(axis) for axis in func.axes]
    for buffer in func.buffers:
        lines.append(f"{buffer.name} = sparse_buffer(({', '.join(a.name for a in buffer.axes)}), {buffer.dtype!r})")
    for it in func.iterations:
        groups = ", ".join(format_group(g) for g in it.groups)
        names = ", ".join(v.name for v in it.iter_vars)
        init = "" if it.init is IDENTITY else f", init={it.init}"
        lines.append(f"with sparse_iteration([{groups}], {it.kinds!r}, name={it.name!r}{init}) as ({names}):")
        for store in it.stores:
            target = f"{store.buffer.name}[{', '.join(map(str, store.indices))}]"
            lines.append(f"    {target} {format_update(store.reducer, target, store.value)}")
    return "\n".join(lines)
