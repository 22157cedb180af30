"""unstuck.core.records: a record built cheaply is the frozen record it always was."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field

import pytest

from unstuck.core.records import cheap
from unstuck.core.tools import ToolCall, ToolResult
from unstuck.decide.outcome import StepRecord
from unstuck.decide.policy import Action, RecoveryState
from unstuck.guard.decision import Decision


@cheap
@dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int = 2
    tags: tuple[str, ...] = ()
    seen: list[int] = field(default_factory=list)
    z: int = field(default=0, kw_only=True)


@dataclass(frozen=True, slots=True)
class FrozenPoint:
    x: int
    y: int = 2
    tags: tuple[str, ...] = ()
    seen: list[int] = field(default_factory=list)
    z: int = field(default=0, kw_only=True)


def test_a_cheap_record_holds_what_the_frozen_constructor_would() -> None:
    made, frozen = Point(1, tags=("a",), z=5), FrozenPoint(1, tags=("a",), z=5)
    assert type(made) is Point
    assert dataclasses.astuple(made) == dataclasses.astuple(frozen) == (1, 2, ("a",), [], 5)
    assert made == Point(1, 2, ("a",), [], z=5) and hash(Point(1, seen=())) == hash(FrozenPoint(1, seen=()))  # type: ignore[arg-type]
    assert repr(made) == repr(frozen).replace("FrozenPoint", "Point")
    assert Point(1).seen is not Point(1).seen  # a default factory runs for each record


def test_a_cheap_record_takes_any_field_name_by_keyword() -> None:
    @cheap
    @dataclass(frozen=True, slots=True)
    class Named:
        kind: str
        cls: str = ""
        self: str = ""

    assert Named(kind="a", cls="b", self="c") == Named("a", "b", "c")


def test_a_cheap_record_stays_frozen() -> None:
    for made in (Point(1), FrozenPoint(1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.x = 3  # type: ignore[misc]
        with pytest.raises(TypeError):  # CPython 3.11's frozen slots dataclass refuses a new name so too
            made.w = 3  # type: ignore[union-attr]


def test_a_cheap_record_is_replaced_pickled_and_copied_whole() -> None:
    made = Point(1, 3, ("a",), [4], z=5)
    assert dataclasses.replace(made, y=7) == Point(1, 7, ("a",), [4], z=5)
    for again in (pickle.loads(pickle.dumps(made)), copy.copy(made), copy.deepcopy(made)):
        assert again == made and type(again) is Point


def test_a_cheap_record_refuses_wrong_arguments_in_its_own_name() -> None:
    with pytest.raises(TypeError, match=r"Point.__init__\(\) missing 1 required positional argument: 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'w'"):
        Point(1, w=2)  # type: ignore[call-arg]
    assert str(inspect.signature(Point)) == str(inspect.signature(FrozenPoint))


def test_cheap_refuses_what_its_twin_could_not_build() -> None:
    @dataclass(frozen=True, slots=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True)
    class Derived:
        x: int
        y: int = field(default=0, init=False)

    @dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclass(slots=True)
    class Mutable:
        x: int

    class Unslotted:
        pass

    @dataclass(frozen=True, slots=True)
    class OnAPlainBase(Unslotted):
        x: int

    for refused in (Checked, Derived, NoSlots, Mutable, OnAPlainBase):
        with pytest.raises(TypeError, match=refused.__qualname__):
            cheap(refused)
    with pytest.raises(TypeError, match="cannot be subclassed"):
        type("Sub", (Point,), {})


class Room:
    __slots__ = ("kept",)


@cheap
@dataclass(frozen=True, slots=True)
class Kept(Room):
    x: int


def test_a_cheap_record_on_a_slotted_base_keeps_the_base_slots_unset_and_free() -> None:
    made = Kept(1)
    assert type(made) is Kept and made == Kept(1) and not hasattr(made, "kept")
    object.__setattr__(made, "kept", "text")  # what a record derives from its fields, kept beside them
    assert made.kept == "text" and made == Kept(1) and pickle.loads(pickle.dumps(made)) == made


def test_the_records_of_a_call_are_built_cheaply() -> None:
    call = ToolCall.of("c1", "svc", {"n": 1})
    step = StepRecord(0, call, "svc", True, False, True, None, 0.0, 0.5, content="ok")
    assert step.to_dict() == StepRecord.from_dict(step.to_dict()).to_dict()
    assert Decision(Action.CONTINUE, call, "ok", step=step).step is step
    assert ToolResult("svc", True, "ok") == ToolResult("svc", True, "ok", executed=True)
    assert RecoveryState(unattended=True).calls == 0
