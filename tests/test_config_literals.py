"""Config fields with a fixed set of values are typed as ``Literal``s (issue 28), and each
refuses any other value with an error that names the field and the values it takes."""

from __future__ import annotations

import dataclasses
import typing

import pytest

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
