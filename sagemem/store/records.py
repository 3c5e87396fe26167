"""`Record`: `typing.NamedTuple` to the type checker, a plain `collections.namedtuple` when
the code runs; and `TYPE_CHECKING`, which a type checker reads as true.

The prompt hook pays for every import on every message. `typing` costs it about 2 ms to
import, and each `typing.NamedTuple` class another fifth of one to build (its annotations
checked one by one): 4.4 ms for the two dozen records the hook loads, measured in fresh
processes. A record here is the same tuple class as `typing.NamedTuple` makes (fields,
defaults, `_replace`, methods and properties), built by `collections`, which the
interpreter has loaded anyway. Modules on the hook's path take `TYPE_CHECKING` from here
and import `typing` only under it.
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:

    class _Records(type):
        """Makes each subclass of `Record` a named tuple of its annotated fields."""

        def __new__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, object]) -> type:
            if not bases:  # `Record` itself
                return super().__new__(cls, name, bases, namespace)
            fields = list(namespace.get("__annotations__", {}))
            given = [f in namespace for f in fields]
            if given != sorted(given):  # namedtuple would give the defaults to the last fields
                raise TypeError(f"{name}: a field without a default follows one with a default")
            defaults = [namespace[f] for f in fields if f in namespace]
            base = namedtuple(name, fields, defaults=defaults, module=namespace.get("__module__"))
            body = {k: v for k, v in namespace.items() if k not in fields and k != "__annotations__"}
            body["__slots__"] = ()
            made = type(name, (base,), body)
            made.__annotations__ = namespace.get("__annotations__", {})
            return made

    class Record(metaclass=_Records):
        """Subclass with annotated fields, as `typing.NamedTuple`."""
