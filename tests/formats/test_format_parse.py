"""Format strings of the public contract parse; bad parameters and malformed strings get a clear ValueError."""

from __future__ import annotations

import numpy as np
import pytest

from sparsetir.formats import BSR, CSR, DBSR, ELL, SRBCRS, Hyb, parse_format


@pytest.mark.parametrize(("text", "expected"), [
    ("csr", CSR()),
    ("ell", ELL()),
    ("ell:32", ELL(32)),
    ("bsr:16", BSR(16)),
    ("bsr", BSR(16)),  # the block defaults to 16 everywhere a format string is read
    ("dbsr", DBSR(16)),
    ("dbsr:16", DBSR(16)),
    ("srbcrs:8:16", SRBCRS(8, 16)),
    ("hyb", Hyb()),
    ("hyb:8", Hyb(8)),
    ("hyb:8:1,2,4,8,16,32", Hyb(8, [1, 2, 4, 8, 16, 32])),
    (" HYB : 2 : 1, 4 ", Hyb(2, [1, 4])),
])
def test_contract_strings_parse(text, expected):
    fmt = parse_format(text)
    assert type(fmt) is type(expected)
    if not isinstance(fmt, CSR):
        assert fmt == expected


def test_format_objects_pass_through():
    fmt = Hyb(4, [1, 2])
    assert parse_format(fmt) is fmt


def test_auto_is_resolved_by_the_ops_not_by_parse_format():
    with pytest.raises(ValueError, match="tuning database"):
        parse_format("auto")


@pytest.mark.parametrize(("text", "message"), [
    ("srbcrs:8", "missing g"),
    ("ell:32:2", "extra field"),
    ("csr:1", "extra field"),
    ("hyb:8:1,2:4", "extra field"),
    ("ell:x", "width must be an integer, got 'x'"),
    ("bsr:1.5", "block must be an integer"),
    ("hyb:two", "col_parts must be an integer"),
    ("hyb:8:1,b", "bucket width #2 must be an integer"),
    ("hyb:8:", "buckets is empty"),
    ("hyb:8:1,,4", "bucket width #2 is empty"),
    ("ell:", "width is empty"),
    ("bsr:0", "block must be >= 1"),
    ("dbsr:-4", "block must be >= 1"),
    ("srbcrs:0:16", "t .* must be >= 1"),
    ("srbcrs:8:0", "g .* must be >= 1"),
    ("hyb:0", "col_parts must be >= 1"),
    ("hyb:1:4,2", "strictly increasing"),
    ("hyb:1:2,2", "strictly increasing"),
    ("hyb:1:0,2", "bucket width must be >= 1"),
    ("nosuch", "unknown format 'nosuch'"),
    ("", "unknown format"),
    ("auto:3", "takes no fields"),
])
def test_malformed_strings_name_the_problem(text, message):
    with pytest.raises(ValueError, match=message):
        parse_format(text)


def test_non_strings_are_a_type_error():
    with pytest.raises(TypeError, match="format must be"):
        parse_format(16)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: ELL(0), "ELL: width must be >= 1"),
    (lambda: ELL(2.5), "width must be an integer"),
    (lambda: ELL(True), "width must be an integer"),
    (lambda: BSR(0), "BSR: block must be >= 1"),
    (lambda: BSR(None), "block must be an integer"),
    (lambda: DBSR(-1), "DBSR: block must be >= 1"),
    (lambda: SRBCRS(0, 4), "t \\(rows per tile\\) must be >= 1"),
    (lambda: SRBCRS(4, 0), "g \\(columns per group\\) must be >= 1"),
    (lambda: Hyb(0), "col_parts must be >= 1"),
    (lambda: Hyb(1, []), "bucket list is empty"),
    (lambda: Hyb(1, [4, 2, 8]), "strictly increasing"),
    (lambda: Hyb(1, [1, 1]), "strictly increasing"),
    (lambda: Hyb(1, [0, 1]), "bucket width must be >= 1"),
    (lambda: Hyb(1, 4), "list of integer widths"),
    (lambda: Hyb(1, "1,2"), "list of integer widths"),
])
def test_bad_parameters_raise_value_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_numpy_integers_are_accepted():
    assert Hyb(np.int64(2), np.array([1, 2, 4])) == Hyb(2, [1, 2, 4])
    assert BSR(np.int32(4)).block == 4


def test_structure_keys_name_the_format_and_its_parameters():
    assert ELL(8).structure_key() == ("ell", 8)
    assert BSR(16).structure_key() == ("bsr", 16)
    assert DBSR(16).structure_key() == ("dbsr", 16)
    assert SRBCRS(8, 16).structure_key() == ("srbcrs", 8, 16)
    assert Hyb(8, [1, 2]).structure_key() == ("hyb", 8, (1, 2))
    assert len({BSR(16).structure_key(), DBSR(16).structure_key(), BSR(8).structure_key()}) == 3
    hash(Hyb(8, [1, 2]).structure_key())


@pytest.mark.parametrize("fmt", [ELL(), Hyb(4)], ids=repr)
def test_matrix_dependent_parameters_have_no_structure_key_until_resolved(fmt):
    with pytest.raises(ValueError, match=r"call fmt\.resolve\(A\)"):
        fmt.structure_key()


def test_repr_shows_the_parameters():
    assert repr(Hyb(8, [1, 2])) == "Hyb(col_parts=8, buckets=(1, 2))"
    assert repr(SRBCRS(8, 16)) == "SRBCRS(t=8, g=16)"
    assert repr(ELL()) == "ELL(width=None)"
