"""Settings of a livetable process, from flags and ``LIVETABLE_*`` environment variables.

:class:`Settings` is one frozen msgspec Struct: each field carries its type, its range and
its one default, and every default that the engine also knows (the timing) is the engine's
own :class:`~livetable.engine.Timing` default, never restated. :func:`load_settings`
builds it from the environment and the flags (flags win) with ``msgspec.convert(...,
strict=False)``, which turns the environment's strings into integers, numbers and booleans.
A bad value is a :class:`SettingsError` naming the variable or the flag it came from
(``LIVETABLE_PORT=abc: expected an integer from 1 to 65535``); the CLI prints it as a usage
error. docs/operations.md §3 lists every field (a test checks the table against the Struct).

Why msgspec and not a dataclass or pydantic: the house rule is one schema library for every
schema — protocol frames, stored states, wallet calls and the settings too — so that types,
ranges and error messages work one way everywhere.

The package: :mod:`~livetable.config.settings` (the Struct, its checks, its secret and shoe
key on disk), :mod:`~livetable.config.environment` (from variables and flags), and
:mod:`~livetable.config.urls` (a URL as it may be shown). Every name is imported from here.
"""

from livetable.config.environment import (
    NOT_SETTINGS,
    choices,
    load_settings,
    unknown_variables,
    variable,
)
from livetable.config.settings import (
    PREFIX,
    Count,
    Port,
    Positive,
    PositiveSeconds,
    Rate,
    Seconds,
    Settings,
    SettingsError,
    StreamError,
    parse_presenters,
    parse_stream,
    parse_streams,
    presenter_of,
)
from livetable.config.urls import masked_url

__all__ = [
    "NOT_SETTINGS", "PREFIX", "Count", "Port", "Positive", "PositiveSeconds", "Rate",
    "Seconds", "Settings", "SettingsError", "StreamError", "choices", "load_settings",
    "masked_url", "parse_presenters", "parse_stream", "parse_streams", "presenter_of",
    "unknown_variables", "variable",
]
