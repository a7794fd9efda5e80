"""``dataclass`` whose generated methods are made when first called (start-up time, ADR 0015).

:func:`dataclasses.dataclass` writes ``__init__``, ``__repr__`` and ``__eq__`` as source text and
compiles each with ``exec`` when the class is defined: most of its cost, and most of the cost of
importing ``natsd.config.options`` (58 options make a long ``__init__``). A server start defines a few
dozen dataclasses and calls few of these methods (the options it builds are never compared nor
printed; the TLS, account or permission records are made only when configured).

:func:`dataclass` here is the standard one with those three methods made on first use: the class is
processed at definition by :func:`dataclasses.dataclass` itself without them (fields, defaults,
``__slots__``, ``__match_args__``, ``__hash__`` as the standard decorator sets it), and each missing
method is a stand-in that, on its first call, has :func:`dataclasses.dataclass` generate that method
on a copy of the class made from the same fields, puts it on the class and runs it. From then on the
class holds exactly the methods the standard decorator would have given it (same code, same
``__qualname__``), so behaviour, error messages and speed are the standard ones; only
``inspect.signature`` of a class not yet instantiated shows the stand-in's ``(*args, **kwargs)``.
A call of ``__init__`` without arguments (``ServerOptions()`` at every start) makes nothing: the
stand-in assigns the fields' defaults as the generated method would (:func:`_defaults_plan`).

Calls with arguments (the tables modules build at import) are bound by the stand-in as the
generated method would for a record's first calls (:func:`_bind_plan`). With ``frozen=True`` the
field-based ``__hash__`` is made on first use as well (the first calls hash the fields as it does),
and the refusing ``__setattr__``/``__delattr__`` are closures with the generated methods' body
(:func:`_add_frozen_methods`), not source compiled with ``exec``. What needs more
(``order``, ``unsafe_hash``, ``weakref_slot``, or a class without a docstring, whose docstring the
decorator renders from ``__init__``'s signature) gets the standard decorator unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar, dataclass_transform, overload

__all__ = ["dataclass"]

_T = TypeVar("_T", bound=type)
_METHODS = ("__init__", "__repr__", "__eq__")
#: Calls of a stand-in ``__init__`` without arguments answered without generating it (see _stand_in).
_PLAN_CALLS = 16
#: Calls of a stand-in ``__init__`` with arguments bound without generating it (see _bind_plan): the
#: loop costs ~1-2 us a call more than the generated code, whose making costs ~0.4 ms.
_BIND_CALLS = 200


@overload
def dataclass(cls: _T, /) -> _T: ...


@overload
def dataclass(cls: None = None, /, **kwargs: Any) -> Callable[[_T], _T]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(cls: Any = None, /, **kwargs: Any) -> Any:
    """:func:`dataclasses.dataclass` (same arguments) with ``__init__``/``__repr__``/``__eq__``
    made on first use (see the module)."""

    def wrap(cls: Any) -> Any:
        return _process(cls, kwargs)

    return wrap if cls is None else wrap(cls)


# the keyword arguments handled here (others, or other values, use the standard decorator)
_LAZY_OK = {k: (True, False) for k in ("init", "repr", "eq", "slots", "kw_only", "match_args", "frozen")}


def _process(cls: Any, kwargs: dict[str, Any]) -> Any:
    if not cls.__dict__.get("__doc__") or any(k not in _LAZY_OK or v not in _LAZY_OK[k] for k, v in kwargs.items()):
        return dataclasses.dataclass(cls, **kwargs)
    wanted = {m: kwargs.get(m.strip("_"), True) for m in _METHODS}  # init=, repr=, eq=
    lazy = [m for m in _METHODS if wanted[m] and m not in cls.__dict__]  # (it never replaces a class's own)
    # what the standard decorator does to __hash__ with eq=True and unsafe_hash=False, unless the class
    # defines one (a class body defining __eq__ alone has None, which does not count): None, or with
    # frozen=True one computed from the fields (made on first use too)
    own_hash = cls.__dict__.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (own_hash is dataclasses.MISSING or (own_hash is None and "__eq__" in cls.__dict__))
    frozen, eq = kwargs.get("frozen", False), wanted["__eq__"]
    if eq and frozen and not explicit_hash:
        lazy.append("__hash__")
    if frozen and _own_frozen_ok(cls):
        # frozen=True's __setattr__/__delattr__ are two more methods written and compiled with exec:
        # ~1.2 M instructions a class, three quarters of a frozen record's definition (issue 31). Made
        # here as closures with the generated code's body instead; what frozen=True changes beyond
        # them is set as the decorator sets it (the parameters' flag, a slotted class's pickling).
        made = dataclasses.dataclass(cls, **{**kwargs, "init": False, "repr": False, "eq": False, "frozen": False})
        made.__dataclass_params__.frozen = True
        _add_frozen_methods(made, cls)
    else:
        made = dataclasses.dataclass(cls, **{**kwargs, "init": False, "repr": False, "eq": False})
    for name in lazy:
        setattr(made, name, _stand_in(made, name, kwargs))
    if eq and not frozen and not explicit_hash:
        made.__hash__ = None
    return made


def _stand_in(owner: Any, name: str, kwargs: dict[str, Any]) -> Callable[..., Any]:
    if name == "__init__":
        # (built on the first call without arguments, see _defaults_plan; then the calls left before the
        # generated method takes over: a record built often without arguments gets its faster loop-free code)
        plan: list = []
        bind: list = []

        def method(self: Any, *args: Any, **kw: Any) -> Any:
            if not args and not kw:
                if not plan:
                    plan.extend((_defaults_plan(owner, kwargs.get("frozen", False)), _PLAN_CALLS))
                plan[1] -= 1
                if plan[0] is not None and plan[1] >= 0:
                    setter, assigns, post_init = plan[0]
                    for n, value, factory in assigns:
                        setter(self, n, factory() if factory else value)
                    if post_init is not None:
                        self.__post_init__(*post_init)
                    return None
            else:
                # (with arguments: bound here for the first _BIND_CALLS calls, see _bind_plan; the
                # module-level tables built at import, gojson's types, the API's routes, the store's
                # records, then make no method: ~0.4 ms each to write and compile, issue 31)
                if not bind:
                    bind.extend((_bind_plan(owner, kwargs.get("frozen", False)), _BIND_CALLS))
                bind[1] -= 1
                if bind[0] is not None and bind[1] >= 0 and _bind(self, bind[0], args, kw):
                    return None
            return _generate(owner, name, kwargs)(self, *args, **kw)

    elif name == "__hash__":
        # (a frozen record's field hash, the generated method's ``hash((self.a, self.b, ...))``, for the
        # first _BIND_CALLS calls: the API's routes are dict keys, issue 31)
        hashed: list = []

        def method(self: Any, *args: Any, **kw: Any) -> Any:
            if not hashed:
                names = tuple(
                    f.name
                    for f in owner.__dataclass_fields__.values()
                    if f._field_type is dataclasses._FIELD and (f.compare if f.hash is None else f.hash)  # type: ignore[attr-defined]
                )
                hashed.extend((names, _BIND_CALLS))
            hashed[1] -= 1
            if hashed[1] >= 0 and not args and not kw:
                return hash(tuple([getattr(self, n) for n in hashed[0]]))
            return _generate(owner, name, kwargs)(self, *args, **kw)

    else:

        def method(self: Any, *args: Any, **kw: Any) -> Any:
            return _generate(owner, name, kwargs)(self, *args, **kw)

    method.__name__ = name
    method.__qualname__ = f"{owner.__qualname__}.{name}"
    # (how _generate, and tests, tell it from the real method)
    method._lazydataclass_stand_in = True  # type: ignore[attr-defined]
    return method


def _generate(owner: Any, name: str, kwargs: dict[str, Any]) -> Callable[..., Any]:
    """Have the standard decorator write method ``name`` (alone: a start calls ``__init__`` and
    rarely the others) for a copy of ``owner`` (its own fields, the same bases,
    ``__post_init__``), put it on ``owner`` in place of the stand-in and return it."""
    fields = owner.__dataclass_fields__
    own = owner.__dict__.get("__annotations__", {})
    ns: dict[str, Any] = {
        "__module__": owner.__module__,
        "__qualname__": owner.__qualname__,
        "__doc__": owner.__doc__,
        "__annotations__": dict(own),
    }
    for n in own:
        f = fields.get(n)
        if f is not None:
            ns[n] = f  # the same Field (default, factory, repr, compare, kw_only)
    if "__post_init__" in owner.__dict__:
        ns["__post_init__"] = owner.__dict__["__post_init__"]
    # (slots kept: a slotted class has no class attribute for an init=False field's default, so
    # the generated __init__ must assign it, as the standard decorator's slotted code does)
    opts = {k: v for k, v in kwargs.items() if k not in ("init", "repr", "eq")}
    which = {"init": name == "__init__", "repr": name == "__repr__", "eq": name in ("__eq__", "__hash__")}
    fn = dataclasses.dataclass(type(owner.__name__, owner.__bases__, ns), **opts, **which).__dict__[name]
    if getattr(owner.__dict__.get(name), "_lazydataclass_stand_in", False):
        setattr(owner, name, fn)
    return fn


def _defaults_plan(owner: Any, frozen: bool) -> tuple | None:
    """What the generated ``__init__`` of ``owner`` does when called without arguments, so that such a
    call (``ServerOptions()`` at every start: its 58-field ``__init__`` took ~18 M instructions to write
    and compile, issue 31) needs no generated method: (the setter, ``(name, default, factory)`` per
    field it assigns, in field order, the ``__post_init__`` arguments or None), or None when the call
    must go to the generated method (a field without a default: the standard TypeError).

    The assignments mirror :func:`dataclasses._field_init` for the class :func:`_generate` decorates
    (the same fields, no ``__slots__``): a field with a factory gets ``factory()``, one with ``init=True``
    its default, one with ``init=False`` and a plain default none (the class attribute answers); an
    ``InitVar`` is assigned nothing and its default goes to ``__post_init__``; ``frozen`` assigns
    through ``object.__setattr__``, as the generated code does."""
    assigns = []
    initvars = []
    slotted = "__slots__" in owner.__dict__
    for f in owner.__dataclass_fields__.values():
        kind = f._field_type
        if kind is dataclasses._FIELD_CLASSVAR:  # type: ignore[attr-defined]
            continue
        if kind is not dataclasses._FIELD and kind is not dataclasses._FIELD_INITVAR:  # type: ignore[attr-defined]
            return None
        has_factory = f.default_factory is not dataclasses.MISSING
        if f.init and not has_factory and f.default is dataclasses.MISSING:
            return None
        if kind is dataclasses._FIELD_INITVAR:  # type: ignore[attr-defined]
            if not f.init or has_factory:  # (rare: left to the generated method)
                return None
            initvars.append(f.default)
            continue
        if has_factory:
            assigns.append((f.name, None, f.default_factory))
        elif f.init or slotted:  # (slotted: no class attribute answers for an init=False default)
            assigns.append((f.name, f.default, None))
    post_init = tuple(initvars) if hasattr(owner, "__post_init__") else None
    return (object.__setattr__ if frozen else setattr), tuple(assigns), post_init


def _bind_plan(owner: Any, frozen: bool) -> tuple | None:
    """For :func:`_bind`: (the setter, ``(name, init, default, factory)`` per field in field order,
    the number of ``__init__`` parameters, whether ``__post_init__`` is called), or None when calls
    must go to the generated method (an ``InitVar``, a ``kw_only`` field, an unknown field kind: rare,
    left to the standard code). The assignments are :func:`_defaults_plan`'s."""
    rows = []
    slotted = "__slots__" in owner.__dict__
    for f in owner.__dataclass_fields__.values():
        kind = f._field_type
        if kind is dataclasses._FIELD_CLASSVAR:  # type: ignore[attr-defined]
            continue
        if kind is not dataclasses._FIELD or f.kw_only is True:  # type: ignore[attr-defined]
            return None
        factory = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if f.init or factory is not None or slotted:
            rows.append((f.name, f.init, f.default, factory))
    n_init = sum(1 for r in rows if r[1])
    return (object.__setattr__ if frozen else setattr), tuple(rows), n_init, hasattr(owner, "__post_init__")


def _bind(self: Any, plan: tuple, args: tuple, kw: dict) -> bool:
    """Assign what the generated ``__init__`` would for ``(*args, **kw)``; False (nothing assigned) when
    the call is not a plain one (too many or unknown arguments, one given twice, one missing), which
    the generated method then answers with the standard TypeError."""
    setter, rows, n_init, post_init = plan
    if len(args) > n_init:
        return False
    values = []
    i = used = 0
    missing = dataclasses.MISSING
    for name, init, default, factory in rows:
        if init:
            if i < len(args):
                if name in kw:
                    return False
                v = args[i]
            elif name in kw:
                v = kw[name]
                used += 1
            elif factory is not None:
                v = factory()
            elif default is not missing:
                v = default
            else:
                return False
            i += 1
        elif factory is not None:
            v = factory()
        elif default is not missing:  # (slotted: no class attribute answers for an init=False default)
            v = default
        else:
            continue
        values.append((name, v))
    if used != len(kw):
        return False
    for name, v in values:
        setter(self, name, v)
    if post_init:
        self.__post_init__()
    return True


def _own_frozen_ok(cls: Any) -> bool:
    """Whether :func:`_add_frozen_methods` may stand for ``frozen=True``: no dataclass among the bases
    (the decorator checks their frozen flags against this one) and no ``__setattr__``/``__delattr__`` of
    the class's own (the decorator refuses those)."""
    return (
        not any("__dataclass_fields__" in b.__dict__ for b in cls.__mro__[1:])
        and "__setattr__" not in cls.__dict__
        and "__delattr__" not in cls.__dict__
    )


def _add_frozen_methods(made: Any, cls: Any) -> None:
    """What ``frozen=True`` adds (dataclasses._frozen_get_del_attr, dataclasses._add_slots): the
    ``__setattr__``/``__delattr__`` that refuse, with the generated code's body and names (``cls``: the
    class the decorator was given, which a slotted class's generated methods name too), and a slotted
    class's ``__getstate__``/``__setstate__``."""
    names = tuple(f.name for f in made.__dataclass_fields__.values() if f._field_type is dataclasses._FIELD)  # type: ignore[attr-defined]
    error = dataclasses.FrozenInstanceError

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for fn in (__setattr__, __delattr__):
        fn.__qualname__ = f"{made.__qualname__}.{fn.__name__}"
        setattr(made, fn.__name__, fn)
    if "__slots__" in made.__dict__ and made is not cls:  # (slots=True: the decorator made a new class)
        if "__getstate__" not in cls.__dict__:
            made.__getstate__ = dataclasses._dataclass_getstate  # type: ignore[attr-defined]
        if "__setstate__" not in cls.__dict__:
            made.__setstate__ = dataclasses._dataclass_setstate  # type: ignore[attr-defined]
