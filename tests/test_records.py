"""`Record` behaves as `typing.NamedTuple` does for every use the package makes of it."""

from __future__ import annotations

import pickle
from typing import NamedTuple

import pytest

from sagemem.store.records import Record


class Hit(Record):
    """A record with a default, a method and a property."""

    name: str
    score: float
    tags: tuple[str, ...] = ()

    def doubled(self) -> float:
        return self.score * 2

    @property
    def tagged(self) -> bool:
        return bool(self.tags)


class Typed(NamedTuple):
    name: str
    score: float
    tags: tuple[str, ...] = ()


def test_a_record_is_the_tuple_typing_would_make() -> None:
    hit, typed = Hit("a", 1.5), Typed("a", 1.5)
    assert hit == typed == ("a", 1.5, ())
    assert Hit._fields == Typed._fields and Hit._field_defaults == Typed._field_defaults
    assert hit._replace(tags=("x",)) == Hit("a", 1.5, ("x",)) and hit._asdict() == typed._asdict()
    assert Hit._make(["b", 2.0, ()]) == Hit("b", 2.0) and Hit(name="c", score=3.0).name == "c"
    assert repr(hit) == "Hit(name='a', score=1.5, tags=())"
    assert hit.doubled() == 3.0 and not hit.tagged and Hit("a", 1, ("t",)).tagged
    assert isinstance(hit, tuple) and list(Hit.__annotations__) == list(Typed.__annotations__)


def test_a_record_holds_no_instance_dict_and_pickles() -> None:
    hit = Hit("a", 1.5, ("t",))
    with pytest.raises(AttributeError):
        hit.other = 1  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(hit)) == hit and type(pickle.loads(pickle.dumps(hit))) is Hit


def test_a_field_without_a_default_after_one_with_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="Wrong: a field without a default"):

        class Wrong(Record):
            first: int = 0
            second: int
