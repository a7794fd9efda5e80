"""natsd.lazydataclass: the standard dataclass, its ``__init__``/``__repr__``/``__eq__`` made on first use.
Each case defines the same class with both decorators and compares what users of the class see."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from natsd import lazydataclass
from natsd.lazydataclass import dataclass

pytestmark = pytest.mark.unit


def _pair(**kwargs):
    """(standard, lazy) versions of one class: defaults, a factory, a field kept out of repr and
    one kept out of comparisons, a keyword-only field."""

    def body(deco):
        @deco(**kwargs)
        class Rec:
            """A record."""

            name: str
            port: int = 4222
            tags: list[str] = dataclasses.field(default_factory=list)
            key: str = dataclasses.field(default="", repr=False)
            seen: int = dataclasses.field(default=0, compare=False)

        return Rec

    return body(dataclasses.dataclass), body(dataclass)


def _stand_in(cls, name: str) -> bool:
    return getattr(cls.__dict__.get(name), "_lazydataclass_stand_in", False)


@pytest.mark.parametrize("slots", [False, True])
def test_instances_behave_as_the_standard_dataclass(slots):
    std, lazy = _pair(slots=slots)
    assert all(_stand_in(lazy, m) for m in ("__init__", "__repr__", "__eq__"))
    a, b = std("a", tags=["x"], key="secret", seen=3), lazy("a", tags=["x"], key="secret", seen=3)
    assert repr(b) == repr(a).replace(std.__qualname__, lazy.__qualname__)
    assert "secret" not in repr(b)
    assert b == lazy("a", tags=["x"], seen=9, key="secret")  # (seen is not compared)
    assert b != lazy("a", port=1) and b != a and (b == 1) is False
    assert lazy.__hash__ is None and std.__hash__ is None
    with pytest.raises(TypeError, match="unhashable"):
        hash(b)
    assert [(f.name, f.default, f.repr, f.compare) for f in dataclasses.fields(lazy)] == [
        (f.name, f.default, f.repr, f.compare) for f in dataclasses.fields(std)
    ]
    assert lazy.__match_args__ == std.__match_args__
    assert hasattr(b, "__dict__") is hasattr(a, "__dict__") is (not slots)
    assert dataclasses.replace(b, port=1).port == 1 and dataclasses.asdict(b) == dataclasses.asdict(a)
    assert lazy("a").tags is not lazy("a").tags  # (a fresh list each time)
    assert not any(_stand_in(lazy, m) for m in ("__repr__", "__eq__"))
    for _ in range(lazydataclass._BIND_CALLS):  # (calls with arguments: bound, then the generated method)
        lazy("a")
    assert not _stand_in(lazy, "__init__") and lazy.__init__.__qualname__ == f"{lazy.__qualname__}.__init__"
    assert repr(lazy("a", 1, ["t"], "k", 2)) == repr(std("a", 1, ["t"], "k", 2)).replace(
        std.__qualname__, lazy.__qualname__
    )


def test_wrong_arguments_fail_with_the_standard_messages():
    std, lazy = _pair(slots=True)
    for args, kw in (((), {}), (("a",), {"nope": 1}), (("a", 1, [], "", 0, "extra"), {})):
        with pytest.raises(TypeError) as want:
            std(*args, **kw)
        with pytest.raises(TypeError) as got:
            lazy(*args, **kw)
        assert str(got.value) == str(want.value)


def test_only_the_method_called_is_made():
    _, lazy = _pair(slots=True)
    assert lazy("a") == lazy("a")
    assert not _stand_in(lazy, "__eq__") and _stand_in(lazy, "__repr__")
    assert _stand_in(lazy, "__init__")  # (calls with arguments bound without it: issue 31)


def test_post_init_and_inheritance():
    @dataclass(slots=True)
    class Base:
        """Base."""

        a: int = 1

    @dataclass(slots=True)
    class Child(Base):
        """Child."""

        b: list[int] = dataclasses.field(default_factory=list)
        total: int = 0

        def __post_init__(self) -> None:
            self.total = self.a + len(self.b)

    c = Child(2, [5, 6])
    assert (c.a, c.b, c.total) == (2, [5, 6], 4)
    assert repr(c) == "test_post_init_and_inheritance.<locals>.Child(a=2, b=[5, 6], total=4)"
    assert Base(1) == Base() and Base(1) != Child(1)


def test_pickling_a_module_level_record():
    o = _Module(3)
    assert pickle.loads(pickle.dumps(o)) == o


@dataclass(slots=True)
class _Module:
    """A record importable by pickle."""

    n: int = 0


@pytest.mark.parametrize("slots", [False, True])
def test_frozen_records_hash_refuse_changes_and_pickle_as_the_standard(slots):
    std, lazy = _pair(slots=slots, frozen=True)
    assert _stand_in(lazy, "__hash__") and _stand_in(lazy, "__init__")
    a, b = std("a", tags=("x",)), lazy("a", tags=("x",))  # (a tuple: hashable)
    assert hash(b) == hash(lazy("a", tags=("x",), seen=5)) == hash(a)  # (seen is not compared nor hashed)
    assert _stand_in(lazy, "__hash__")  # (the first calls hash the fields without it: issue 31)
    for _ in range(lazydataclass._BIND_CALLS):
        hash(b)
    assert hash(b) == hash(a) and not _stand_in(lazy, "__hash__")
    for obj in (a, b):
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.port = 1
        with pytest.raises(dataclasses.FrozenInstanceError):
            del obj.port
    assert {b: 1}[lazy("a", tags=("x",))] == 1
    assert repr(b) == repr(a).replace(std.__qualname__, lazy.__qualname__)
    assert pickle.loads(pickle.dumps(_Frozen(2, "x"))) == _Frozen(2, "x")


@dataclass(frozen=True, slots=True)
class _Frozen:
    """A frozen record importable by pickle."""

    n: int = 0
    s: str = ""


def test_what_it_does_not_defer_uses_the_standard_decorator():
    @dataclass(order=True)
    class Ordered:
        """Ordered."""

        a: int = 0

    @dataclass
    class NoDoc:
        a: int = 0

    assert not _stand_in(Ordered, "__init__") and Ordered(1) < Ordered(2)
    assert not _stand_in(NoDoc, "__init__") and NoDoc.__doc__ == "NoDoc(a: 'int' = 0)"


def test_a_class_s_own_methods_are_kept():
    @dataclass(slots=True)
    class Own:
        """Own repr and hash."""

        a: int = 0

        def __repr__(self) -> str:
            return "own"

        def __hash__(self) -> int:
            return 7

    assert repr(Own()) == "own" and hash(Own()) == 7 and Own(1) == Own(1)


def test_server_options_compare_and_print_as_before():
    from natsd.config.options import JetStreamOptions, ServerOptions

    assert ServerOptions() == ServerOptions() and ServerOptions(port=1) != ServerOptions()
    assert "key=" not in repr(JetStreamOptions(key="k")) and repr(JetStreamOptions()).startswith(
        "JetStreamOptions(enabled=False, "
    )
    assert lazydataclass.__all__ == ["dataclass"]


def test_methods_turned_off_stay_off():
    @dataclass(slots=True, repr=False, eq=False)
    class Plain:
        """No repr, no eq: identity and object's repr, hashable by id."""

        a: int = 0

    p = Plain(1)
    assert p.a == 1
    assert "__repr__" not in Plain.__dict__ and "__eq__" not in Plain.__dict__
    assert p != Plain(1) and {p: 1}[p] == 1
    assert repr(p).startswith("<")


def test_keyword_only_fields_and_a_plain_subclass():
    @dataclass(slots=True, kw_only=True)
    class Kw:
        """Keyword-only."""

        a: int = 0
        b: str = ""

    class Sub(Kw):
        __slots__ = ()

        def __init__(self) -> None:
            super().__init__(a=5)

    with pytest.raises(TypeError, match="positional"):
        Kw(1)
    assert Kw(a=1, b="x") == Kw(b="x", a=1) and Sub().a == 5 and repr(Sub()).endswith(".Sub(a=5, b='')")


@pytest.mark.parametrize("slots", [False, True])
@pytest.mark.parametrize("frozen", [False, True])
def test_a_call_without_arguments_makes_no_method_and_the_standard_instance(slots, frozen):
    """``ServerOptions()`` at every start: the fields' defaults are assigned as the generated
    ``__init__`` would, without writing and compiling it (issue 31)."""
    calls = []

    def body(deco):
        @deco(slots=slots, frozen=frozen)
        class Rec:
            """Defaults of every kind."""

            port: int = 4222
            tags: list[str] = dataclasses.field(default_factory=list)
            made: dict = dataclasses.field(default_factory=dict, init=False)
            label: str = dataclasses.field(default="x", init=False)
            scale: dataclasses.InitVar[int] = 3
            total: int = 0

            def __post_init__(self, scale: int) -> None:
                calls.append(scale)
                object.__setattr__(self, "total", self.port * scale)

        return Rec

    std, lazy = body(dataclasses.dataclass), body(dataclass)
    a, b = std(), lazy()
    assert calls == [3, 3]
    assert _stand_in(lazy, "__init__")  # (nothing was generated)
    names = ("port", "tags", "made", "total") + (() if slots else ("label",))
    assert [getattr(b, n) for n in names] == [getattr(a, n) for n in names]
    assert lazy().tags is not b.tags and lazy().made is not b.made  # (a fresh object each time)
    if not slots:
        assert vars(b) == vars(a)
    if frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            b.port = 1
    assert lazy(port=1).total == 3 and not _stand_in(lazy, "__init__")  # (with arguments: generated)


def test_a_call_without_arguments_through_a_custom_setattr_and_a_subclass():
    seen = []

    @dataclass
    class Watched:
        """Assignments go through the class's own __setattr__, as in the generated __init__."""

        a: int = 1
        b: list = dataclasses.field(default_factory=list)

        def __setattr__(self, name, value):
            seen.append(name)
            object.__setattr__(self, name, value)

    class Sub(Watched):
        def __post_init__(self) -> None:  # (not on the dataclass: the generated code never calls it)
            seen.append("post")

    assert Watched().a == 1 and seen == ["a", "b"]
    seen.clear()
    Sub()
    assert seen == ["a", "b"]


def test_server_options_without_arguments_generate_nothing():
    from natsd.config.options import ServerOptions

    plan = lazydataclass._defaults_plan(ServerOptions, False)
    assert plan is not None and len(plan[1]) >= 58
    o = ServerOptions()
    made = object.__new__(ServerOptions)
    lazydataclass._generate(ServerOptions, "__init__", {})(made)
    assert o == made
    assert [getattr(o, f.name) for f in dataclasses.fields(o)] == [getattr(made, f.name) for f in dataclasses.fields(o)]


def test_a_record_built_often_without_arguments_gets_its_generated_init():
    @dataclass(slots=True)
    class Often:
        """Built without arguments again and again."""

        a: int = 1

    for _ in range(lazydataclass._PLAN_CALLS):
        assert Often().a == 1
    assert _stand_in(Often, "__init__")
    assert Often().a == 1 and not _stand_in(Often, "__init__")


@pytest.mark.parametrize("args", [(), (3,)])
def test_a_slotted_record_s_init_false_defaults_are_assigned(args):
    # A slotted class has no class attribute to answer for an init=False field's default: both the
    # no-argument path and the generated __init__ must assign it, as the standard decorator does.
    def make(dec):
        @dec(slots=True)
        class Slotted:
            """A slotted record with fields outside __init__."""

            x: int = 1
            y: int = dataclasses.field(default=5, init=False)
            z: list = dataclasses.field(default_factory=list, init=False)

        return Slotted

    ours, std = make(dataclass)(*args), make(dataclasses.dataclass)(*args)
    assert (ours.x, ours.y, ours.z) == (std.x, std.y, std.z)
    assert repr(ours) == repr(std)


@pytest.mark.parametrize("slots", [False, True])
@pytest.mark.parametrize("frozen", [False, True])
def test_calls_with_arguments_make_no_method_and_the_standard_instance(slots, frozen):
    """The module-level tables built at import (gojson's types, the API's routes, the error table)
    call ``__init__`` with arguments: bound as the generated method would, without making it, for the
    first calls (issue 31)."""
    calls = []

    def body(deco):
        @deco(slots=slots, frozen=frozen)
        class Rec:
            """Fields of every kind but InitVar and keyword-only."""

            name: str
            port: int = 4222
            tags: list[str] = dataclasses.field(default_factory=list)
            made: dict = dataclasses.field(default_factory=dict, init=False)
            label: str = dataclasses.field(default="x", init=False)
            total: int = 0

            def __post_init__(self) -> None:
                calls.append(self.name)
                object.__setattr__(self, "total", self.port + len(self.tags))

        return Rec

    std, lazy = body(dataclasses.dataclass), body(dataclass)
    names = ("name", "port", "tags", "made", "total") + (() if slots else ("label",))
    for args, kw in ((("a",), {}), (("a", 1), {}), (("a",), {"tags": ["t"]}), ((), {"port": 2, "name": "b"})):
        a, b = std(*args, **kw), lazy(*args, **kw)
        assert [getattr(b, n) for n in names] == [getattr(a, n) for n in names]
        if not slots:
            assert vars(b) == vars(a)
    assert calls[0::2] == calls[1::2] and len(calls) == 8
    assert lazy("a").tags is not lazy("a").tags and lazy("a").made is not lazy("a").made
    assert _stand_in(lazy, "__init__")  # (nothing was generated)
    for args, kw in (((), {}), (("a",), {"name": "a"}), (("a", 1, [], 0, 5), {}), (("a",), {"made": {}})):
        with pytest.raises(TypeError) as want:
            std(*args, **kw)
        with pytest.raises(TypeError) as got:
            lazy(*args, **kw)
        assert str(got.value) == str(want.value)


def test_a_record_built_often_with_arguments_gets_its_generated_init():
    @dataclass(slots=True)
    class Often:
        """Built with arguments again and again."""

        a: int

    for i in range(lazydataclass._BIND_CALLS):
        assert Often(i).a == i
    assert _stand_in(Often, "__init__")
    assert Often(a=7).a == 7 and not _stand_in(Often, "__init__")


@pytest.mark.parametrize("slots", [False, True])
def test_a_frozen_record_s_refusals_are_the_standard_without_their_exec(slots):
    """frozen=True's __setattr__/__delattr__ made without writing and compiling them (issue 31):
    the same refusals, flags, pickling and inheritance rules as the standard decorator's."""
    std, lazy = _pair(slots=slots, frozen=True)
    assert lazy.__dataclass_params__.frozen is True
    assert lazy.__setattr__.__qualname__ == f"{lazy.__qualname__}.__setattr__"
    assert lazy.__setattr__.__code__.co_filename == lazydataclass.__file__  # (not exec'd source)
    a, b = std("a"), lazy("a")
    for obj in (a, b):
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'port'"):
            obj.port = 1
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'name'"):
            del obj.name
    for attr in ("other",):
        with pytest.raises(Exception) as want:
            setattr(a, attr, 1)
        with pytest.raises(Exception) as got:
            setattr(b, attr, 1)
        assert type(got.value) is type(want.value)
    assert (std.__getstate__ is dataclasses._dataclass_getstate) is (
        lazy.__getstate__ is dataclasses._dataclass_getstate
    )
    assert pickle.loads(pickle.dumps(_Frozen(3, "y"))) == _Frozen(3, "y")

    @dataclass(frozen=True, slots=slots)
    class Child(lazy):
        """A frozen child of a frozen record (the standard decorator checks the base's flag)."""

        extra: int = 0

    c = Child("c", extra=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.extra = 3
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):

        @dataclass(slots=slots)
        class Thawed(lazy):
            """Refused, as by the standard decorator."""

            more: int = 0
