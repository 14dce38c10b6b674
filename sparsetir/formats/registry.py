"""The format registry: one declaration per format, read by the parser, the ops and the tuner.

A format registers itself with the class decorator ``register_format``; its name and
``fields`` define its format string (``"hyb:8:1,2,4"`` is ``Hyb(col_parts=8, buckets=[1, 2, 4])``).
``parse_format`` reads any registered format's string; ``registered_formats`` lists them in
the order the tuner tries them. The registry is filled when ``sparsetir.formats`` is
imported: that package imports every module in its folder, so a new format is one new module.
"""

from __future__ import annotations

import re

from ..registry import Registry
from .base import Format

_FORMATS: Registry[type] = Registry("format")


def register_format(cls: type) -> type:
    """Class decorator: add a :class:`~sparsetir.formats.base.Format` subclass to the registry under ``cls.name``."""
    if not (isinstance(cls, type) and issubclass(cls, Format)):
        raise TypeError(f"register_format takes a Format subclass, got {cls!r}")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", cls.name or ""):
        raise ValueError(f"{cls.__name__}: a format name is lower-case letters, digits and _, got {cls.name!r}")
    if cls.name == "auto":
        raise ValueError("format name 'auto' is taken (the tuning database's choice)")
    return _FORMATS.register(cls.name, cls)


def registered_formats() -> list[type]:
    """Every registered format class, in tuning order (then by name)."""
    return sorted(_FORMATS.items(), key=lambda cls: (cls.tuning_order, cls.name))


def format_class(name: str) -> type:
    """The format class registered as ``name``; ``ValueError`` listing the known ones otherwise."""
    if name not in _FORMATS:  # the message gives each format's syntax, not only its name
        raise ValueError(f"unknown format {name!r}; known: {known_syntax()}, auto (e.g. 'hyb:8:1,2,4')")
    return _FORMATS.get(name)


def known_syntax() -> str:
    return ", ".join(cls.syntax() for cls in registered_formats())


def parse_format(fmt) -> Format:
    """A format object for ``fmt``: a format object (returned as is) or a string such as ``"hyb:8:1,2,4"``.

    Parameters
    ----------
    fmt : Format or str
        ``"<name>[:<field>...]"``, case-insensitive, with the fields of the named format
        (``sparsetir.formats`` lists them); ``"auto"`` is not a format but a choice the ops
        make from the tuning database.

    Returns
    -------
    Format
        The format object (its parameters validated by its constructor).

    Raises
    ------
    TypeError
        ``fmt`` is neither a string nor a format object.
    ValueError
        Unknown name, missing, extra or malformed fields, or a parameter out of range.
    """
    if isinstance(fmt, Format):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"format must be a string or a format object, got {type(fmt).__name__}")
    name, *texts = [text.strip() for text in fmt.strip().lower().split(":")]
    if name == "auto":
        if texts:
            raise ValueError(f"format {fmt!r}: 'auto' takes no fields")
        raise ValueError("format 'auto' is a choice the ops make (sparsetir.ops.spmm/sddmm, compile_spmm/"
                         "compile_sddmm) from the tuning database; it is not a format object")
    cls = format_class(name) if name else format_class(fmt)
    where = f"format {fmt!r} (expected {cls.syntax()})"
    if len(texts) > len(cls.fields):
        raise ValueError(f"{where}: {len(texts) - len(cls.fields)} extra field(s) {texts[len(cls.fields):]}")
    missing = [field.name for field in cls.fields[len(texts):] if field.required]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    arguments = {}
    for text, field in zip(texts, cls.fields):
        if not text:
            raise ValueError(f"{where}: {field.name} is empty")
        if field.kind == "int":
            arguments[field.name] = _integer(text, field.name, where)
        else:
            arguments[field.name] = [_integer(part.strip(), f"{field.item} #{i + 1}", where)
                                     for i, part in enumerate(text.split(","))]
    try:
        return cls(**arguments)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _integer(text: str, field: str, where: str) -> int:
    if not text:
        raise ValueError(f"{where}: {field} is empty")
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(f"{where}: {field} must be an integer, got {text!r}")
    return int(text)
