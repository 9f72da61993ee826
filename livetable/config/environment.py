"""Settings from the ``LIVETABLE_*`` environment variables and the flags (flags win).

:func:`load_settings` converts with ``msgspec.convert(..., strict=False)``, which turns the
environment's strings into integers, numbers and booleans, and turns msgspec's message about
a field into one naming the variable or flag it came from (``LIVETABLE_PORT=abc: expected an
integer from 1 to 65535``). Apart from :mod:`livetable.config.settings` because it reads the
Struct's fields (their types, their ranges) as data: the Struct is what it describes.
"""

from __future__ import annotations

import difflib
import os
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from livetable.config.settings import (
    PREFIX,
    Settings,
    SettingsError,
    StreamError,
    parse_presenters,
    parse_streams,
)

_FIELDS = {f.name: f for f in msgspec.structs.fields(Settings)}
_BOOLEANS = {"yes": "true", "on": "true", "no": "false", "off": "false"}
#: Variables of the same prefix that are not settings of a livetable process (deploy/ and
#: the operator-demo read them): never warned about.
NOT_SETTINGS = frozenset({"REDIS_PASSWORD", "REDIS_PASSWORD_PREVIOUS", "DEALER_TOKEN",
                          "REDIS_ADMIN_PASSWORD"})


def variable(name: str) -> str:
    """The environment variable of the setting ``name``: ``port`` → ``LIVETABLE_PORT``."""
    return PREFIX + name.upper()


def _base(tp: Any) -> Any:
    """``T`` of ``T | None`` and of ``Annotated[T, ...]``."""
    if typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        return _base(args[0])
    return tp


def _from_text(name: str, value: Any) -> Any:
    """A setting's value as text (a variable, a flag) → what its type converts from:
    ``a,b`` lists, ``t1=URL,t2=URL`` streams, bytes of a secret, yes/no booleans."""
    if name == "streams":  # --stream is repeated, the variable is one list
        return parse_streams(value.split(",") if isinstance(value, str) else value)
    if name == "presenters":  # as --stream
        return parse_presenters(value.split(",") if isinstance(value, str) else value)
    if not isinstance(value, str):
        return value
    tp = _base(_FIELDS[name].type)
    origin = typing.get_origin(tp)
    if origin is list:
        return [item.strip() for item in value.split(",") if item.strip()]
    if tp is bytes:
        return value.encode()
    if tp is bool:
        return _BOOLEANS.get(value.strip().lower(), value)
    return value


def choices(name: str) -> tuple[str, ...]:
    """The values a setting of a ``Literal`` type takes (else none)."""
    base = _base(_FIELDS[name].type)
    return typing.get_args(base) if typing.get_origin(base) is Literal else ()


def _describe(name: str) -> str:
    """What a setting takes: ``an integer from 1 to 65535``, ``one of auto, manual``."""
    tp = _FIELDS[name].type
    meta = [m for m in typing.get_args(tp)[1:] if isinstance(m, msgspec.Meta)] \
        if typing.get_origin(tp) is Annotated else []
    base = _base(tp)
    if choices(name):
        return "one of " + ", ".join(choices(name))
    what = {int: "an integer", float: "a number", bool: "true or false (1/0, yes/no, on/off)",
            str: "text", Path: "a path", bytes: "text"}.get(base, "a list")
    for m in meta:
        low = m.ge if m.ge is not None else m.gt
        if low is not None and m.le is not None:
            what += f" from {low:g} to {m.le:g}"
        elif m.ge is not None:
            what += f" >= {m.ge:g}"
        elif m.gt is not None:
            what += f" > {m.gt:g}"
    return what


def _path_hook(tp: type, value: Any) -> Any:
    if tp is Path and isinstance(value, str):
        return Path(value)
    raise NotImplementedError


_AT = re.compile(r"^(?P<message>.*) - at `\$\.(?P<name>\w+)(?P<rest>.*)`$")


def load_settings(environ: Mapping[str, str] | None = None,
                  flags: Mapping[str, tuple[str, Any]] | None = None) -> Settings:
    """Settings from ``LIVETABLE_*`` variables of ``environ`` (default: the process's) and
    ``flags``, ``{field: (flag as typed, value)}``; a flag wins over its variable. An empty
    variable is an unset one. :class:`SettingsError` names the variable or flag of a bad
    value."""
    environ = os.environ if environ is None else environ
    raw: dict[str, Any] = {}
    given: dict[str, str] = {}  # field → "LIVETABLE_X=value" / "--x=value"
    sources = [(name, variable(name), environ.get(variable(name), "")) for name in _FIELDS]
    sources += [(name, flag, value) for name, (flag, value) in (flags or {}).items()]
    for name, source, value in sources:
        if value is None or value == "":
            continue
        shown = ",".join(value) if isinstance(value, list) else value
        given[name] = f"{source}={shown}"
        try:
            raw[name] = _from_text(name, value)
        except StreamError as exc:
            raise StreamError(f"{source}: {exc}") from None
    try:
        return msgspec.convert(raw, Settings, strict=False, dec_hook=_path_hook)
    except msgspec.ValidationError as exc:
        where = _AT.match(str(exc))
        if where is None or where["name"] not in given:  # a check of __post_init__
            cause = exc.__cause__ or exc.__context__
            raise (cause if isinstance(cause, SettingsError) else SettingsError(str(exc))) \
                from None
        name = where["name"]
        message = (f"expected {_describe(name)}" if not where["rest"]
                   else where["message"][0].lower() + where["message"][1:])
        raise SettingsError(f"{given[name]}: {message}") from None


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """Warnings for ``LIVETABLE_*`` variables that look like a misspelt setting (other
    tools may set variables of the prefix: those that resemble none are left alone)."""
    environ = os.environ if environ is None else environ
    names = [n.upper() for n in _FIELDS]
    warnings = []
    for key in sorted(environ):
        rest = key[len(PREFIX):]
        if not key.startswith(PREFIX) or rest in names or rest in NOT_SETTINGS:
            continue
        close = difflib.get_close_matches(rest, names, n=1, cutoff=0.75)
        if close:
            warnings.append(f"{key} is not a setting: did you mean {PREFIX}{close[0]}?")
    return warnings
