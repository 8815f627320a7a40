"""The one validation mechanism of every on-disk format: typed decoding with located, fixable problems.

Each format declares its models as msgspec Structs (types, bounds, patterns, closed vocabularies and
descriptions in the annotations). Valid input takes msgspec's C fast path. Invalid input is walked a
second time against the same type description (``msgspec.inspect``) to list every problem with the
project's wording: ``file:line: key: what is wrong and how to fix it``. The limits every reader shares
(nesting depth, integer range, file size, regular files only, duplicate keys) live here, once.
"""

from __future__ import annotations

import functools
import json
import math
import os
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import msgspec.inspect as mi

from mtpverdict.errors import InputError, Problem

T = TypeVar("T")

MAX_DEPTH = 32  # nesting of any value read; the deepest of our formats needs 5
MAX_INT = 2**53  # the largest integer a float64 holds exactly (pandas, JSON readers in other languages)
MAX_DOCUMENT_BYTES = 16 << 20  # one-document files: campaign.json, policies, campaign TOML, serve configs
MAX_DECISION_BYTES = 256 << 20  # a decision of a very large campaign (10k arms) stays well below this
UTF8_BOM = b"\xef\xbb\xbf"

Located = tuple[str | None, str]  # (key or None, message)


# ---------------------------------------------------------------------------------------------------
# bounded scalar types shared by the format modules (a field adds its description with Annotated)

Int = Annotated[int, msgspec.Meta(ge=-MAX_INT, le=MAX_INT)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]
Nonneg = Annotated[float, msgspec.Meta(ge=0)]
Fraction = Annotated[float, msgspec.Meta(ge=0, le=1)]


# ---------------------------------------------------------------------------------------------------
# reading files


def read_document(
    path: str | os.PathLike[str],
    *,
    limit: int = MAX_DOCUMENT_BYTES,
    what: str = "this file",
    error: type[InputError] = InputError,
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; raise `error` saying which limit.

    A FIFO, a device (a symlink to /dev/zero) or a directory is refused at once (mtpverdict._files).
    """
    from mtpverdict._files import NotReadable, read_regular

    try:
        return read_regular(path, limit, what)
    except NotReadable as exc:
        raise error([Problem(str(path), str(exc))]) from None


def text_of(data: bytes, source: str, error: type[InputError] = InputError) -> str:
    """UTF-8 text of a document; a byte order mark or invalid bytes are located problems."""
    if data.startswith(UTF8_BOM):
        raise error([Problem(source, "starts with a UTF-8 byte order mark; save it as UTF-8 without BOM")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error([Problem(source, f"not valid UTF-8 at byte {exc.start}")]) from None


# ---------------------------------------------------------------------------------------------------
# JSON with the shared limits


class LimitError(ValueError):
    """A document breaks a limit every reader shares: nesting, integer range, a duplicate key, NaN."""


class DuplicateKeyError(LimitError):
    """A JSON object names one key twice (readers disagree on which value wins)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"key {key!r} appears twice in one object; keep one")
        out[key] = value
    return out


def _reject_constant(name: str) -> float:
    raise LimitError(f"{name} is not a number in JSON; write null or a finite value")


_STRICT_JSON = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_reject_constant)
# other tools' files (vllm bench) write NaN for an empty mean; everything else in them is held strictly
_STRICT_JSON_WITH_NAN = json.JSONDecoder(object_pairs_hook=_pairs)


class JsonSyntaxError(ValueError):
    """Text that is not JSON, with the line the decoder stopped on (json's position text dropped)."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(message)
        self.lineno = lineno


def loads_strict(text: str) -> Any:
    """Python objects of a JSON text, refusing duplicate keys, NaN/Infinity, excessive nesting and
    integers beyond +-MAX_INT.

    Raises LimitError for a breached limit, ValueError for text that is not JSON; either message is
    fit for a Problem (json's own position text is dropped).
    """
    try:
        value = _STRICT_JSON.decode(text)
    except RecursionError:
        raise LimitError(f"nested deeper than {MAX_DEPTH} levels") from None
    except LimitError:
        raise
    except json.JSONDecodeError as exc:
        raise JsonSyntaxError(f"not valid JSON: {exc.msg}", exc.lineno) from None
    breach = limits_problem(value)
    if breach is not None:
        key, message = breach
        raise LimitError(f"{key}: {message}" if key else message)
    return value


def raw_decode_strict(text: str, position: int, *, allow_nan: bool = False) -> tuple[Any, int]:
    """One JSON value starting at `position` (documents written one after another) and the position
    after it, with loads_strict's limits (NaN and Infinity read as floats when `allow_nan`)."""
    decoder = _STRICT_JSON_WITH_NAN if allow_nan else _STRICT_JSON
    try:
        value, end = decoder.raw_decode(text, position)
    except RecursionError:
        raise LimitError(f"nested deeper than {MAX_DEPTH} levels") from None
    breach = limits_problem(value)
    if breach is not None:
        key, message = breach
        raise LimitError(f"{key}: {message}" if key else message)
    return value, end


def json_line(exc: ValueError) -> int | None:
    """The line of a JSON syntax error, when the decoder gave one."""
    return exc.lineno if isinstance(exc, (JsonSyntaxError, json.JSONDecodeError)) else None


def int_range_text(value: int) -> str:
    """How a message shows an integer out of range: whole when short, else its head and digit count."""
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text.lstrip('-'))} digits)"


INT_RANGE_MESSAGE = "must be between -2**53 and 2**53 (the integers every reader holds exactly)"


def limits_problem(value: Any, prefix: str = "") -> Located | None:
    """The first breach of the shared limits in a decoded value (nesting deeper than MAX_DEPTH, an
    integer beyond +-MAX_INT) as (key or None, message), else None.

    Iterative (no recursion) and pushing only containers, so a decision of thousands of arms is walked
    in one cheap pass; keys are named by a second walk, only when something is wrong.
    """
    if type(value) is int:
        return None if -MAX_INT <= value <= MAX_INT else _locate_int(value, prefix)
    if not isinstance(value, dict | list | tuple):
        return None
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        for child in item.values() if isinstance(item, dict) else item:
            if type(child) is int:  # bool is an int subclass but never out of range
                if not -MAX_INT <= child <= MAX_INT:
                    return _locate_int(value, prefix)
            elif isinstance(child, dict | list | tuple):
                if depth >= MAX_DEPTH:
                    return (prefix.rstrip(".") or None, f"nested deeper than {MAX_DEPTH} levels")
                stack.append((child, depth + 1))
    return None


def _locate_int(value: Any, prefix: str) -> Located:
    """The key of the first integer out of range (a second walk, with paths: only on failure)."""
    stack: list[tuple[Any, str]] = [(value, prefix.rstrip("."))]
    while stack:
        item, where = stack.pop()
        if type(item) is int and not -MAX_INT <= item <= MAX_INT:
            return (where or None, f"{INT_RANGE_MESSAGE}, got {int_range_text(item)}")
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in reversed(item.items()))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(item))))
    raise AssertionError("an integer out of range was found in the first walk")


def _any_nonfinite(value: Any) -> bool:
    """Whether a decoded value holds a NaN or infinite float anywhere (one walk, no key paths)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def nonfinite_keys(value: Any, prefix: str = "") -> Iterator[str]:
    """Keys (dotted, with [i]) holding a NaN or infinite float (TOML and YAML can write them)."""
    if not _any_nonfinite(value):  # the usual case, without building a key path for every value
        return
    stack: list[tuple[Any, str]] = [(value, prefix)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            yield where
        elif isinstance(item, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))


# ---------------------------------------------------------------------------------------------------
# typed conversion with located problems


def convert(obj: Any, model: type[T], source: str, *, line: int | None = None, prefix: str = "") -> T:
    """Validate a Python value (from JSON, TOML or YAML) against a model; raise InputError if invalid."""
    problems = check(obj, model, prefix)
    if problems:
        raise InputError([Problem(source, msg, line=line, key=key) for key, msg in problems])
    return msgspec.convert(obj, model, strict=True)


def check(obj: Any, model: Any, prefix: str = "") -> list[Located]:
    """Every problem of `obj` against `model` (empty when valid): the shared limits, then the types."""
    breach = limits_problem(obj, prefix)
    if breach is not None:
        return [breach]
    located: list[Located] = [
        (key, "must be a finite number") for key in nonfinite_keys(obj, prefix.rstrip("."))
    ]
    if located:
        return located
    try:
        msgspec.convert(obj, model, strict=True)
    except msgspec.ValidationError:
        found = diagnose(obj, model, prefix)
        return found or [(prefix.rstrip(".") or None, "does not fit the format")]
    return []


@functools.cache
def _info(model: Any) -> mi.Type:
    return mi.type_info(model)


def diagnose(obj: Any, model: Any, prefix: str = "") -> list[Located]:
    """Walk `obj` against the model's type description and name each problem (slow path only)."""
    return _Walker().value(obj, _info(model), prefix.rstrip("."))


@dataclass(frozen=True, slots=True)
class _Shape:
    """A type with its nullability split off."""

    base: mi.Type
    nullable: bool


def _shape(tp: mi.Type) -> _Shape:
    if isinstance(tp, mi.Metadata):
        return _shape(tp.type)
    if isinstance(tp, mi.UnionType):
        others = tuple(t for t in tp.types if not isinstance(t, mi.NoneType))
        nullable = len(others) != len(tp.types)
        if len(others) == 1:
            return _Shape(_shape(others[0]).base, nullable)
        return _Shape(mi.UnionType(others), nullable)
    return _Shape(tp, False)


def type_name(tp: mi.Type) -> str:
    """How a message names a type: 'an integer', 'a list of strings', 'an object'."""
    base = _shape(tp).base
    names: dict[type, str] = {
        mi.StrType: "a string",
        mi.IntType: "an integer",
        mi.FloatType: "a number",
        mi.BoolType: "true or false",
        mi.StructType: "an object",
        mi.DictType: "an object",
        mi.LiteralType: "one of the listed values",
        mi.EnumType: "one of the listed values",
        mi.AnyType: "a value",
    }
    if isinstance(base, mi.ListType | mi.VarTupleType):
        item = type_name(base.item_type)
        return "a list of " + {"a string": "strings", "an integer": "integers", "a number": "numbers"}.get(
            item, "objects" if item == "an object" else "values"
        )
    if isinstance(base, mi.DictType) and isinstance(_shape(base.value_type).base, mi.StrType):
        return "an object of string values"
    if isinstance(base, mi.UnionType):
        return " or ".join(type_name(t) for t in base.types)
    return names.get(type(base), "a value")


def _json_type(value: Any) -> str:
    return type(value).__name__


class _Walker:
    """One pass of diagnose(): appends (key, message) for each problem found."""

    def __init__(self) -> None:
        self.found: list[Located] = []

    def value(self, obj: Any, tp: mi.Type, key: str) -> list[Located]:
        shape = _shape(tp)
        if obj is None:
            if not shape.nullable and not isinstance(shape.base, mi.AnyType):
                self._add(key, f"must be {type_name(shape.base)}, not null")
            return self.found
        self._base(obj, shape.base, key)
        return self.found

    def _add(self, key: str, message: str) -> None:
        self.found.append((key or None, message))

    def _base(self, obj: Any, tp: mi.Type, key: str) -> None:
        handlers: dict[type, Callable[[Any, Any, str], None]] = {
            mi.StructType: self._struct,
            mi.IntType: self._int,
            mi.FloatType: self._float,
            mi.StrType: self._str,
            mi.BoolType: self._bool,
            mi.ListType: self._list,
            mi.VarTupleType: self._list,
            mi.DictType: self._dict,
            mi.LiteralType: self._choice,
            mi.EnumType: self._choice,
            mi.UnionType: self._union,
        }
        handler = handlers.get(type(tp))
        if handler is not None:
            handler(obj, tp, key)

    def _struct(self, obj: Any, tp: mi.StructType, key: str) -> None:
        if not isinstance(obj, Mapping):
            self._add(key, f"must be an object, got {_json_type(obj)}")
            return
        names = {f.encode_name: f for f in tp.fields}
        dot = f"{key}." if key else ""
        if tp.forbid_unknown_fields:
            allowed = ", ".join(sorted(names))
            for name in obj:
                if name not in names and name != tp.tag_field:
                    self._add(f"{dot}{name}", f"unknown key; allowed keys are {allowed}")
        for name, field in names.items():
            if name not in obj:
                if field.required:
                    self._add(f"{dot}{name}", f"missing; it must be {type_name(field.type)}")
                continue
            self.value(obj[name], field.type, f"{dot}{name}")

    def _int(self, obj: Any, tp: mi.IntType, key: str) -> None:
        if type(obj) is not int:
            self._add(key, f"must be an integer, got {_json_type(obj)}")
            return
        self._bounds(obj, tp, key)

    def _float(self, obj: Any, tp: mi.FloatType, key: str) -> None:
        if type(obj) not in (int, float):
            self._add(key, f"must be a number, got {_json_type(obj)}")
        elif not math.isfinite(obj):
            self._add(key, "must be a finite number")
        else:
            self._bounds(obj, tp, key)

    def _bounds(self, obj: float, tp: mi.IntType | mi.FloatType, key: str) -> None:
        if isinstance(obj, int) and not -MAX_INT <= obj <= MAX_INT:
            self._add(key, f"{INT_RANGE_MESSAGE}, got {int_range_text(obj)}")
            return
        low = tp.ge if tp.ge is not None else tp.gt
        high = tp.le if tp.le is not None else tp.lt
        fraction = low == 0 and high == 1
        hint = " (a fraction between 0 and 1)" if fraction else ""
        if low is not None and (obj < low or (tp.gt is not None and obj <= tp.gt)):
            op = ">" if tp.gt is not None else ">="
            self._add(key, f"must be {op} {low:g}, got {obj}{hint}")
        elif high is not None and (obj > high or (tp.lt is not None and obj >= tp.lt)):
            op = "<" if tp.lt is not None else "<="
            self._add(key, f"must be {op} {high:g}, got {obj}{hint}")

    def _str(self, obj: Any, tp: mi.StrType, key: str) -> None:
        if not isinstance(obj, str):
            self._add(key, f"must be a string, got {_json_type(obj)}")
        elif tp.pattern is not None and not _matcher(tp.pattern)(obj):
            self._add(key, f"{obj[:80]!r} does not match {tp.pattern}")
        elif tp.min_length is not None and len(obj) < tp.min_length:
            self._add(
                key,
                "must not be empty" if tp.min_length == 1 else f"must be at least {tp.min_length} characters",
            )

    def _bool(self, obj: Any, tp: mi.BoolType, key: str) -> None:
        if not isinstance(obj, bool):
            self._add(key, f"must be true or false, got {_json_type(obj)}")

    def _list(self, obj: Any, tp: mi.ListType | mi.VarTupleType, key: str) -> None:
        if not isinstance(obj, list | tuple):
            self._add(key, f"must be {type_name(tp)}, got {_json_type(obj)}")
            return
        before = len(self.found)
        for i, item in enumerate(obj):
            self.value(item, tp.item_type, f"{key}[{i}]")
            if len(self.found) > before:  # the first bad item is enough; the key names it
                break
        if tp.min_length is not None and len(obj) < tp.min_length:
            self._add(key, f"must hold at least {tp.min_length} item{'s' if tp.min_length != 1 else ''}")

    def _dict(self, obj: Any, tp: mi.DictType, key: str) -> None:
        if not isinstance(obj, Mapping):
            self._add(key, f"must be {type_name(tp)}, got {_json_type(obj)}")
            return
        dot = f"{key}." if key else ""
        for name, item in obj.items():
            self.value(item, tp.value_type, f"{dot}{name}")

    def _choice(self, obj: Any, tp: mi.LiteralType | mi.EnumType, key: str) -> None:
        values = (
            tuple(str(v.value) for v in tp.cls) if isinstance(tp, mi.EnumType) else tuple(map(str, tp.values))
        )
        if not isinstance(obj, str) or obj not in values:
            got = repr(obj) if isinstance(obj, str) else _json_type(obj)
            self._add(key, f"must be one of {', '.join(values)}; got {got}")

    def _union(self, obj: Any, tp: mi.UnionType, key: str) -> None:
        structs = [t for t in tp.types if isinstance(t, mi.StructType) and t.tag_field]
        if structs and isinstance(obj, Mapping):
            tag_field = structs[0].tag_field
            by_tag = {str(t.tag): t for t in structs}
            tag = obj.get(tag_field)
            if tag not in by_tag:
                self._add(
                    f"{key}.{tag_field}" if key else str(tag_field),
                    f"unknown {tag_field} {tag!r}; use one of {', '.join(by_tag)}",
                )
                return
            self._struct(obj, by_tag[tag], key)
            return
        for option in tp.types:  # a union of scalars: valid when any member accepts it
            probe = _Walker()
            probe.value(obj, option, key)
            if not probe.found:
                return
        self._add(key, f"must be {type_name(tp)}, got {_json_type(obj)}")


@functools.cache
def _matcher(pattern: str) -> Callable[[str], Any]:
    import re

    return re.compile(pattern).search


# ---------------------------------------------------------------------------------------------------
# JSON Schema


def json_schema(model: Any, *, schema_id: str, title: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a model, generated by msgspec and labelled."""
    schema: dict[str, Any] = msgspec.json.schema(model)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = schema_id
    schema["title"] = title
    return schema


def render_json_schema(schema: dict[str, Any]) -> str:
    """A schema file's text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_text(path: Path, text: str) -> None:
    """Write a generated file (schemas); callers regenerate on purpose."""
    path.write_text(text, encoding="utf-8")


# ---------------------------------------------------------------------------------------------------
# fast decoding of many records: the models without string patterns (checked afterwards on unique values)


def _without_patterns(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *metas = typing.get_args(tp)
        kept = [m for m in metas if not (isinstance(m, msgspec.Meta) and m.pattern is not None)]
        inner = _without_patterns(base)
        return Annotated[(inner, *kept)] if kept else inner
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_without_patterns(a) for a in typing.get_args(tp))]  # noqa: UP007
    if origin is tuple:
        args = typing.get_args(tp)
        return tuple[tuple(a if a is Ellipsis else _without_patterns(a) for a in args)]  # type: ignore[misc]
    return tp


def _struct_without_patterns(cls: type[msgspec.Struct]) -> type[msgspec.Struct]:
    hints = typing.get_type_hints(cls, include_extras=True)
    names = cls.__struct_fields__
    defaults = dict(
        zip(names[len(names) - len(cls.__struct_defaults__) :], cls.__struct_defaults__, strict=True)
    )
    fields: list[Any] = [
        (name, _without_patterns(hints[name]), defaults[name])
        if name in defaults
        else (name, _without_patterns(hints[name]))
        for name in names
    ]
    config = cls.__struct_config__
    return msgspec.defstruct(
        cls.__name__,
        fields,
        tag_field=config.tag_field,
        tag=config.tag,
        forbid_unknown_fields=config.forbid_unknown_fields,
        frozen=config.frozen,
    )


def fast_model(model: Any) -> Any:
    """The same tagged union of Structs with string patterns removed (regexes dominate decoding).

    The patterns are then checked once per distinct value with `pattern_fields`, so a value breaking
    one is still refused with the same message.
    """
    members = typing.get_args(model) or (model,)
    return typing.Union[tuple(_struct_without_patterns(m) for m in members)]  # noqa: UP007


def pattern_fields(cls: type[msgspec.Struct]) -> dict[str, str]:
    """Field name -> pattern, for the string fields of a Struct that carry one."""
    out: dict[str, str] = {}
    for field in _info(cls).fields:  # type: ignore[attr-defined]
        base = _shape(field.type).base
        if isinstance(base, mi.StrType) and base.pattern is not None:
            out[field.name] = base.pattern
    return out


def pattern_matcher(pattern: str) -> Callable[[str], Any]:
    """The compiled search of a pattern (msgspec patterns are searched, not matched)."""
    return _matcher(pattern)
