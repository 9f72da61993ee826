"""The operator registry: which operators this platform serves, and on what terms.

Why a file of its own. A live-casino provider serves many operators from one deployment;
each has its own wallet, its own secrets, its own currencies with their chips and limits.
They are kept in one TOML file (``--operators FILE`` / ``LIVETABLE_OPERATORS``), read at
start and again on SIGHUP, so an operator is added or a secret rotated without a restart:

.. code-block:: toml

    [operators.acme]
    name = "ACME Casino"
    wallet_url = "https://wallet.acme.example/livetable"
    wallet_secrets = ["env:ACME_WALLET_SECRET"]
    operator_secrets = ["env:ACME_OP_SECRET", "env:ACME_OP_SECRET_NEXT"]
    tables = ["t1", "t2"]          # optional: every table
    language = "th"                # optional
    blocked_words = ["spam"]       # optional: table chat
    winner_names = "masked"        # optional: "masked" (Pl***), "hidden" or "full"
    tips = false                   # optional: no tips to the dealer (default: tips on)

    [operators.acme.currencies.THB]  # minor units (THB has 2 decimals: 100000 = ฿1,000.00)
    chips = [1000, 2500, 5000, 10000, 50000, 100000]
    player = [1000, 500000]
    pair = [1000, 100000]
    round_max = 2000000
    tip = [1000, 100000]             # optional: a tip's min and max (default: player's)

Rules the loader holds, each refused with the file's line:

* A file is taken whole or not at all: one bad entry and the registry in force stays.
* Secrets never sit in the file: ``env:NAME`` or ``file:/path`` only. Every one listed must
  resolve when the file is read (a rotation's next secret included), so a typo is found at
  load, not at the first launch. Any of ``operator_secrets`` verifies an operator's request
  (two during a rotation); wallet calls are signed with the first of ``wallet_secrets``.
* A currency's decimals are ISO 4217's, from Babel (the CLDR data), never typed by hand; an
  unknown code is refused.
* Operator ids are ``[a-z0-9-]``, 1–32 characters: they prefix their players' ledger ids
  (:func:`ledger_player_id`), so ``acme``'s ``p-1`` and ``bet365``'s ``p-1`` share nothing.

A deployment configured the single-operator way (``LIVETABLE_OPERATOR_SECRET`` and
``--wallet-url`` with ``LIVETABLE_WALLET_SECRET``) is one operator named ``default``
(:func:`from_settings`): its players keep their unprefixed ledger ids.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, TypeVar

import msgspec
from babel.core import Locale
from babel.numbers import get_currency_precision, get_currency_symbol

from livetable import protocol as p
from livetable.betting.tips import TipPolicy

#: The operator of a single-operator deployment (no registry file).
DEFAULT_OPERATOR = "default"
#: Between an operator's id and its player's id in a ledger account id. ``~`` is in no
#: player id an operator may send (livetable.accounts) and in no operator id.
NAMESPACE_SEPARATOR = "~"
_OPERATOR_ID = re.compile(r"[a-z0-9-]{1,32}")

Amount = Annotated[int, msgspec.Meta(ge=1, le=10**15)]
Range = Annotated[list[Amount], msgspec.Meta(min_length=2, max_length=2)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=80)]
#: How an operator's players' names are shown in a round's biggest wins (``round_winners``;
#: livetable/engine/announce.py's ``NameShown``).
WinnerNames = Literal["masked", "hidden", "full"]


class RegistryError(ValueError):
    """A registry file that is refused whole; the message names the file and the line."""


class _CurrencyEntry(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    chips: Annotated[list[Amount], msgspec.Meta(min_length=1, max_length=8)]
    player: Range
    pair: Range
    round_max: Amount
    tip: Range | None = None


class _OperatorEntry(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: Name
    operator_secrets: Annotated[list[str], msgspec.Meta(min_length=1, max_length=4)]
    wallet_url: Annotated[str, msgspec.Meta(pattern=r"^https?://")] | None = None
    wallet_secrets: Annotated[list[str], msgspec.Meta(max_length=4)] = []
    tables: list[str] | None = None
    language: Literal["en", "th", "hi"] | None = None
    blocked_words: Annotated[list[Name], msgspec.Meta(max_length=1000)] = []
    winner_names: WinnerNames = "masked"
    tips: bool = True
    #: Each converted on its own (:func:`_currency`), so an error names its currency.
    currencies: dict[str, dict[str, object]] = {}


@dataclass(frozen=True, slots=True)
class Currency:
    """A currency an operator's players play in, with its chips and limits (minor units)."""

    code: str
    #: ISO 4217's minor-unit digits: 2 for THB and INR, 0 for JPY.
    decimals: int
    chips: tuple[int, ...]
    player: tuple[int, int]
    pair: tuple[int, int]
    round_max: int
    #: A tip's smallest and largest amount; None: the player bet's (``player``).
    tip: tuple[int, int] | None = None

    def symbol(self, language: str = "en") -> str:
        return str(get_currency_symbol(self.code, locale=_LOCALES.get(language, "en")))

    @property
    def limits(self) -> p.Limits:
        """The table limits of a session in this currency, as the wire and the betting
        rules (``betting.slips.judge_slip``) name them: they replace the table's own."""
        return p.Limits(min=self.player[0], max=self.player[1], pair_min=self.pair[0],
                        pair_max=self.pair[1], round_max=self.round_max)


_LOCALES = {"en": "en", "th": "th_TH", "hi": "hi_IN"}


@dataclass(frozen=True, slots=True)
class Operator:
    id: str
    name: str
    #: Any one verifies a signed request from the operator (two during a rotation).
    operator_secrets: tuple[bytes, ...]
    wallet_url: str | None = None
    #: The first signs wallet calls; the rest are listed for the rotation that follows.
    wallet_secrets: tuple[bytes, ...] = ()
    #: The tables its players may be launched at; None = every table.
    tables: frozenset[str] | None = None
    language: str | None = None
    blocked_words: tuple[str, ...] = ()
    currencies: Mapping[str, Currency] = field(default_factory=dict)
    #: How its players' names are shown in a round's biggest wins (``round_winners``).
    winner_names: WinnerNames = "masked"
    #: Whether its players may tip the dealer (livetable/betting/tips.py).
    tips: bool = True

    def may_launch_at(self, table: str) -> bool:
        return self.tables is None or table in self.tables

    def terms(self, currency: str | None) -> Currency | None:
        """The chips and limits of its players' sessions in ``currency``, or None when the
        entry lists none for it (the table's own limits then hold)."""
        return self.currencies.get(currency) if currency is not None else None

    def tip_policy(self, currency: str | None) -> TipPolicy:
        """Whether its players may tip, and a tip's range in ``currency`` (None: the
        player's bet limits)."""
        terms = self.terms(currency)
        return TipPolicy(on=self.tips, range=None if terms is None else terms.tip)


#: Why a launched player may not play at a table: its operator is no longer served (its
#: sessions end), or the table is not one of its operator's ``tables``.
Refusal = Literal["operator_removed", "not_your_table"]


@dataclass(frozen=True, slots=True)
class Registry:
    operators: Mapping[str, Operator]
    #: Where it was read from (None: built from the single-operator settings).
    source: Path | None = None

    def get(self, operator_id: str) -> Operator | None:
        return self.operators.get(operator_id)

    def refusal(self, operator_id: str, table: str) -> Refusal | None:
        """Why ``operator_id``'s launched player may not play at ``table`` now, or None.
        Asked at every hello and every slip, not only at the launch: a reload (SIGHUP)
        that removes the operator, or a table from its ``tables``, holds at once."""
        operator = self.operators.get(operator_id)
        if operator is None:
            return "operator_removed"
        return None if operator.may_launch_at(table) else "not_your_table"
    def winner_terms(self, ledger_player: str) -> tuple[WinnerNames, str | None]:
        """How a winner's name is shown (their operator's ``winner_names``; masked without
        one) and the currency of their win (their operator's only one, else None)."""
        operator = self.get(operator_of(ledger_player))
        if operator is None:
            return "masked", None
        only = list(operator.currencies)
        return operator.winner_names, only[0] if len(only) == 1 else None


def ledger_player_id(operator_id: str, player_id: str) -> str:
    """The ledger's id for ``operator_id``'s player ``player_id``: namespaced, except for the
    single-operator deployment's ``default``, whose ids stay as they were."""
    if operator_id == DEFAULT_OPERATOR:
        return player_id
    return f"{operator_id}{NAMESPACE_SEPARATOR}{player_id}"


def currency_decimals(code: str) -> int:
    """ISO 4217's minor-unit digits of ``code`` (from Babel); ValueError if unknown."""
    if not re.fullmatch(r"[A-Z]{3}", code) or code not in Locale("en").currencies:
        raise ValueError(f"{code!r} is not an ISO 4217 currency code")
    return int(get_currency_precision(code))


def load(path: Path, env: Mapping[str, str] | None = None,
         table_ids: Sequence[str] | None = None, *, wallets: bool = False) -> Registry:
    """The registry in ``path``, or :class:`RegistryError` naming the line that is wrong.
    ``table_ids``, when given, are the tables an operator's ``tables`` may name;
    ``wallets``: every operator must have a wallet (the seamless wallet is in force)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"{path}: cannot be read: {exc}") from None
    return parse(text, str(path), os.environ if env is None else env, table_ids, path,
                 wallets=wallets)


def parse(text: str, where: str, env: Mapping[str, str],
          table_ids: Sequence[str] | None = None, path: Path | None = None, *,
          wallets: bool = False) -> Registry:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{where}: not valid TOML: {exc}") from None
    entries = raw.get("operators")
    unknown = sorted(set(raw) - {"operators"})
    if unknown or not isinstance(entries, dict):
        keys = unknown[:1] or ["operators"]
        raise RegistryError(f"{where}, line {_line_of(text, keys)}: the file holds "
                            f"[operators.<id>] tables only")
    operators = {}
    for operator_id, entry in entries.items():
        try:
            converted = _convert(entry, _OperatorEntry)
            if wallets and converted.wallet_url is None:
                raise _EntryError([], "the seamless wallet calls every operator's own "
                                      "wallet: give it a wallet_url and wallet_secrets")
            operators[operator_id] = _operator(operator_id, converted, env, table_ids)
        except _EntryError as exc:
            keys = ["operators", operator_id, *exc.keys]
            raise RegistryError(f"{where}, line {_line_of(text, keys)}: operators."
                                f"{'.'.join(keys[1:])}: {exc.message}") from None
    return Registry(operators, path)


class _EntryError(Exception):
    """What is wrong with one operator's entry, and the keys under it that say where."""

    def __init__(self, keys: list[str], message: str) -> None:
        super().__init__(message)
        self.keys, self.message = keys, message


T = TypeVar("T")


def _convert(value: object, kind: type[T], keys: tuple[str, ...] = ()) -> T:
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise _EntryError([*keys, *_path_keys(str(exc))], str(exc)) from None


def _operator(operator_id: str, entry: _OperatorEntry, env: Mapping[str, str],
              table_ids: Sequence[str] | None) -> Operator:
    if not _OPERATOR_ID.fullmatch(operator_id):
        raise _EntryError([], "an operator id is 1 to 32 of a-z, 0-9 and -")
    if operator_id == DEFAULT_OPERATOR:
        raise _EntryError([], f"{DEFAULT_OPERATOR!r} is the single-operator deployment's "
                              f"name; give this operator its own")
    if entry.wallet_url and not entry.wallet_secrets:
        raise _EntryError(["wallet_secrets"], "a wallet_url needs wallet_secrets")
    unknown = sorted(set(entry.tables or ()) - set(table_ids or entry.tables or ()))
    if unknown:
        raise _EntryError(["tables"], f"no table {', '.join(unknown)}")
    currencies = {code: _currency(code, limits) for code, limits in entry.currencies.items()}
    return Operator(
        id=operator_id, name=entry.name,
        operator_secrets=tuple(_secret(ref, env, "operator_secrets")
                               for ref in entry.operator_secrets),
        wallet_url=entry.wallet_url,
        wallet_secrets=tuple(_secret(ref, env, "wallet_secrets")
                             for ref in entry.wallet_secrets),
        tables=None if entry.tables is None else frozenset(entry.tables),
        language=entry.language, blocked_words=tuple(entry.blocked_words),
        currencies=currencies, winner_names=entry.winner_names, tips=entry.tips)


def _currency(code: str, entry: object) -> Currency:
    keys = ["currencies", code]
    limits = _convert(entry, _CurrencyEntry, tuple(keys))
    try:
        decimals = currency_decimals(code)
    except ValueError as exc:
        raise _EntryError(keys, str(exc)) from None
    for name in ("player", "pair", "tip"):
        low, high = getattr(limits, name) or (0, 0)
        if low > high:
            raise _EntryError([*keys, name], f"min {low} is above max {high}")
    if limits.chips != sorted(set(limits.chips)):
        raise _EntryError([*keys, "chips"], "chips go from the smallest up, each once")
    if limits.round_max < limits.player[0]:
        raise _EntryError([*keys, "round_max"], "round_max is below the smallest bet")
    tip = None if limits.tip is None else (limits.tip[0], limits.tip[1])
    return Currency(code, decimals, tuple(limits.chips), (limits.player[0], limits.player[1]),
                    (limits.pair[0], limits.pair[1]), limits.round_max, tip)


def _secret(reference: str, env: Mapping[str, str], key: str) -> bytes:
    """A secret named by reference: ``env:NAME`` or ``file:/path`` (its text, stripped)."""
    kind, _, name = reference.partition(":")
    if kind == "env" and name:
        value = env.get(name)
        if not value:
            raise _EntryError([key], f"{reference}: the environment has no {name}")
        return value.encode()
    if kind == "file" and name:
        try:
            value = Path(name).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise _EntryError([key], f"{reference}: {exc.__class__.__name__}") from None
        if not value:
            raise _EntryError([key], f"{reference}: the file is empty")
        return value.encode()
    raise _EntryError([key], "a secret is given by reference, env:NAME or file:/path, "
                             "never in the file")


def from_settings(operator_secret: bytes | None, wallet_url: str | None,
                  wallet_secret: bytes | None) -> Registry:
    """The single-operator deployment as a registry: one operator, ``default``, when an
    operator secret is set; no operator otherwise (no launches)."""
    if operator_secret is None:
        return Registry({})
    return Registry({DEFAULT_OPERATOR: Operator(
        id=DEFAULT_OPERATOR, name="default", operator_secrets=(operator_secret,),
        wallet_url=wallet_url, wallet_secrets=(wallet_secret,) if wallet_secret else ())})


def _path_keys(message: str) -> list[str]:
    """The keys of msgspec's ``at `$.player[0]``` in an error, or of the unknown field
    it names (msgspec points at the table that holds it)."""
    found = re.search(r"at `\$((?:\.[^.`\[]+|\[[^\]]*\])*)`", message)
    keys = [] if not found else [part for part in re.split(r"[.\[\]]", found.group(1))
                                 if part and not part.isdigit() and part != "..."]
    field_name = re.match(r"Object contains unknown field `([^`]+)`", message)
    return [*keys, field_name.group(1)] if field_name else keys


def _line_of(text: str, keys: list[str]) -> int:
    """The line of the deepest of ``keys`` the file spells out: a table header such as
    ``[operators.acme.currencies.THB]`` or a ``key =`` in the section it belongs to."""
    best, depth, section = 1, 0, []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("["):
            section = [part.strip().strip('"') for part in stripped.strip("[]").split(".")]
            spelled = section
        else:
            key = re.match(r'"?([^"=\s]+)"?\s*=', stripped)
            if key is None:
                continue
            spelled = [*section, key.group(1)]
        if len(spelled) > depth and keys[:len(spelled)] == spelled:
            best, depth = number, len(spelled)
    return best


def operator_of(ledger_player: str) -> str:
    """The operator a ledger player id belongs to (the inverse of
    :func:`ledger_player_id`): an id without the separator is ``default``'s."""
    operator_id, separator, _ = ledger_player.partition(NAMESPACE_SEPARATOR)
    return operator_id if separator else DEFAULT_OPERATOR


def operator_player_id(ledger_player: str) -> str:
    """The id the operator knows its player by (the wallet calls carry it)."""
    return ledger_player.partition(NAMESPACE_SEPARATOR)[2] or ledger_player
