"""JSON Schema of a function's parameters, read from its signature and type hints.

Covers what tools take: ``str``, ``int``, ``float``, ``bool``, ``None``; ``list[X]``,
``tuple[X, ...]``, ``set[X]``, ``dict[str, X]``; ``Optional[X]`` and ``X | None``; ``Union``;
``Literal[...]``; ``enum.Enum`` subclasses; ``TypedDict``; dataclasses; pydantic models (their own
``model_json_schema()``); ``typing.Annotated[X, "description"]`` for a parameter's description.
A parameter with a default is optional and its default is shown; ``*args`` / ``**kwargs`` are
left out. A hint it cannot read becomes an unconstrained value rather than an error.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from typing import Any, Callable, Dict, List, Optional

__all__ = ["parameters_schema", "description_of"]

_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean"}
# Nesting of hints followed at most (a recursive model stops here as an unconstrained value).
_MAX_DEPTH = 32


def description_of(func: Callable[..., Any]) -> str:
    """The first paragraph of a function's docstring, or its name."""
    doc = inspect.getdoc(func) or ""
    first = doc.strip().split("\n\n", 1)[0].strip()
    return " ".join(first.split()) or getattr(func, "__name__", "tool")


def parameters_schema(func: Callable[..., Any]) -> Dict[str, Any]:
    """The JSON Schema (an object) of ``func``'s keyword arguments."""
    signature = inspect.signature(func)
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # unresolvable forward references: read what the annotations say
        hints = {}
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            continue
        hint = hints.get(name, param.annotation)
        schema = _schema(hint, 0) if hint is not inspect.Parameter.empty else {}
        if param.default is inspect.Parameter.empty:
            required.append(name)
        elif _json_value(param.default):
            schema = dict(schema, default=param.default)
        properties[name] = schema
    out: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    # A pydantic model's schema keeps its sub-models under `$defs`, referred to from its root:
    # the root is now the parameters object, so they move there.
    defs: Dict[str, Any] = {}
    for schema in properties.values():
        defs.update(schema.pop("$defs", {}))
    if defs:
        out["$defs"] = defs
    return out


def _json_value(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, list, dict))


def _schema(hint: Any, depth: int) -> Dict[str, Any]:
    if depth > _MAX_DEPTH or hint is Any or hint is inspect.Parameter.empty:
        return {}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        inner = _schema(args[0], depth + 1)
        notes = [a for a in args[1:] if isinstance(a, str)]
        return dict(inner, description=" ".join(notes)) if notes else inner
    if hint is None or hint is type(None):
        return {"type": "null"}
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is typing.Union or _is_pipe_union(hint):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return _schema(members[0], depth + 1)
        return {"anyOf": [_schema(a, depth + 1) for a in members]}
    if origin in (list, set, frozenset, tuple) or hint in (list, set, frozenset, tuple):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return {"type": "array", "prefixItems": [_schema(a, depth + 1) for a in args],
                    "minItems": len(args), "maxItems": len(args)}
        item = _schema(args[0], depth + 1) if args else {}
        out: Dict[str, Any] = {"type": "array"}
        if item:
            out["items"] = item
        if origin in (set, frozenset):
            out["uniqueItems"] = True
        return out
    if origin is dict or hint is dict:
        value = _schema(args[1], depth + 1) if len(args) == 2 else {}
        return {"type": "object", "additionalProperties": value} if value else {"type": "object"}
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return {"enum": [m.value for m in hint]}
        model_schema = model_parameters(hint)
        if model_schema is not None:
            return model_schema
        if dataclasses.is_dataclass(hint):
            return _fields_schema(hint, depth)
        if _is_typed_dict(hint):
            return _typed_dict_schema(hint, depth)
    return {}


def _is_pipe_union(hint: Any) -> bool:
    union_type = getattr(types, "UnionType", None)
    return union_type is not None and isinstance(hint, union_type)


def _is_typed_dict(hint: type) -> bool:
    return isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__annotations__") \
        and hasattr(hint, "__total__")


def _typed_dict_schema(hint: type, depth: int) -> Dict[str, Any]:
    hints = typing.get_type_hints(hint, include_extras=True)
    required = sorted(getattr(hint, "__required_keys__", set(hints)))
    out: Dict[str, Any] = {
        "type": "object",
        "properties": {k: _schema(v, depth + 1) for k, v in hints.items()},
    }
    if required:
        out["required"] = required
    return out


def _fields_schema(hint: type, depth: int) -> Dict[str, Any]:
    try:
        hints = typing.get_type_hints(hint, include_extras=True)
    except Exception:
        hints = {}
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for field in dataclasses.fields(hint):
        properties[field.name] = _schema(hints.get(field.name, field.type), depth + 1)
        no_default = field.default is dataclasses.MISSING and \
            field.default_factory is dataclasses.MISSING  # type: ignore[misc]
        if no_default:
            required.append(field.name)
    out: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


def model_parameters(model: Any) -> Optional[Dict[str, Any]]:
    """The schema of a pydantic model class given as a tool's parameters, else ``None``."""
    schema = getattr(model, "model_json_schema", None)
    return schema() if isinstance(model, type) and callable(schema) else None
