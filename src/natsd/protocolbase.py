"""``Protocol`` for natsd's structural types: ``typing.Protocol`` to the type checker, a plain base
class at run time.

natsd names what one layer needs of another with protocol classes (the ports, the store seams, a
context). Defining a class on ``typing.Protocol`` costs ~70 µs at import (its metaclass inspects every
member), and some 30 are defined on the start, stream and consumer paths (issue 31, ADR 0017). None is
``runtime_checkable``, generic or used with ``isinstance``, so at run time they need no more than a
plain base. Import it as ``from natsd.protocolbase import Protocol``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["Protocol"]

if TYPE_CHECKING:
    from typing import Protocol as Protocol
else:
    Protocol = object
