"""Config fields with a fixed set of values are typed as ``Literal``s (issue 28), and each
refuses any other value with an error that names the field and the values it takes; every
field belongs to a section and its bounds are declared, each refusing what lies outside."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.core import config as config_module
from lossless.core.config import Config
from lossless.core.errors import ValidationError

_HINTS = typing.get_type_hints(Config, vars(config_module))
_CHOICES = {f.name: [a for a in typing.get_args(_HINTS[f.name]) if a is not type(None)]
            for f in dataclasses.fields(Config)
            if typing.get_origin(_HINTS[f.name]) is typing.Literal
            or any(typing.get_origin(a) is typing.Literal for a in typing.get_args(_HINTS[f.name]))}


def _values(name: str) -> list[str]:
    out: list[str] = []
    for a in _CHOICES[name]:
        out += list(typing.get_args(a)) if typing.get_origin(a) is typing.Literal else [a]
    return out


def test_the_fields_with_fixed_values_are_literals() -> None:
    assert {"compaction", "vector_backend", "fusion", "rerank"} <= set(_CHOICES)


@pytest.mark.parametrize("name", sorted(_CHOICES))
def test_each_value_is_taken_and_any_other_refused_by_name(name: str) -> None:
    for value in _values(name):
        assert getattr(Config.from_kwargs(**{name: value}), name) == value
    with pytest.raises(ValidationError, match=rf"{name} must be .*got 'bogus'"):
        Config.from_kwargs(**{name: "bogus"})


# -- declared bounds and sections ----------------------------------------------------------

_BOUNDED = [(f.name, f.metadata["bound"]) for f in dataclasses.fields(Config) if f.metadata["bound"] is not None]


def test_every_field_has_a_section_and_the_sections_cover_the_config() -> None:
    config = Config()
    seen: list[str] = []
    for name in config_module.SECTIONS:
        part = config.section(name)
        assert part, f"section {name} is empty"
        seen += part
    assert sorted(seen) == sorted(Config.field_names())
    with pytest.raises(ValidationError, match="unknown config section 'nope'"):
        config.section("nope")


@pytest.mark.parametrize(("name", "bound"), _BOUNDED, ids=[n for n, _ in _BOUNDED])
def test_each_bound_refuses_what_is_outside_it_by_name(name: str, bound: config_module.Bound) -> None:
    integer = int in config_module._kinds(_HINTS[name])
    outside = []
    if bound.lo is not None:
        outside.append(bound.lo if bound.lo_open else bound.lo - 1)
    if bound.hi is not None:
        outside.append(bound.hi + 1)
    for value in outside:
        value = int(value) if integer else float(value)
        with pytest.raises(ValidationError, match=rf"^{name} must be .*got {value!r}$"):
            Config.from_kwargs(**{name: value})
    inside = bound.hi if bound.hi is not None else (bound.lo or 0) + 1
    value = int(inside) if integer else float(inside)
    assert getattr(Config.from_kwargs(**{name: value}), name) == value


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-10, max_value=10))
def test_a_share_is_taken_exactly_when_it_lies_in_0_1(share: float) -> None:
    if 0 <= share <= 1:
        assert Config.from_kwargs(recall_share=share).recall_share == share
    else:
        with pytest.raises(ValidationError, match=r"recall_share must be in \[0, 1\]"):
            Config.from_kwargs(recall_share=share)
