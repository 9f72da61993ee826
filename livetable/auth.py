"""Signed tokens: players (minted by an operator), demo guests, dealers and supervisors.

A token is ``base64url(payload).base64url(HMAC-SHA256(secret, payload))`` with a JSON payload
``{"k": kind, "sub": id, "name": name, "exp": epoch seconds}``, and for a session an
operator launched, ``"cur"`` (its currency), ``"lang"`` (the page's language), ``"op"`` (the
operator, livetable/operator/registry.py) and ``"sid"`` (the session's id, which the
operator can end): the session carries them, so no store has to. It is small, needs no store
to check, and cannot be forged without the server's secret; a staff token (dealer or
supervisor) is accepted only on ``/ws/dealer`` and a player or guest token never is.

A staff token names the tables it may drive (``"tables": ["t1", "t2"]``, or ``["*"]`` for
every table): a studio's dealer at table 1 cannot drive table 2. A staff token that names no
tables (minted before tokens were scoped) drives none. A supervisor does what a dealer does
and approves card corrections (docs/dealer.md).

A supervisor's *approval* of one card correction is not a token: :func:`sign_approval`
binds it to the table, the round and the count, a random nonce and a short life
(:data:`APPROVAL_TTL`), under a key derived from the secret for approvals only — so it
never verifies as a token (it cannot open ``/ws/dealer``) and a token never verifies as an
approval. The table's engine records each nonce it accepted in the round, so an approval
is used once (docs/dealer.md).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Literal

from livetable.accounts import GUEST_PREFIX, AccountError, check_player_id

Kind = Literal["player", "guest", "dealer", "supervisor"]
KINDS: tuple[Kind, ...] = ("player", "guest", "dealer", "supervisor")
STAFF: tuple[Kind, ...] = ("dealer", "supervisor")
#: In a staff token's tables: every table.
ALL_TABLES = "*"


class TokenError(ValueError):
    """A token that is malformed, forged (bad signature) or expired. The message says which."""


@dataclass(frozen=True, slots=True)
class Identity:
    kind: Kind
    id: str
    name: str
    expires: int
    #: A staff token's tables (:data:`ALL_TABLES` for every one); empty for players.
    tables: tuple[str, ...] = ()
    #: The operator's currency and language for this session (launch tokens only).
    currency: str | None = None
    language: str | None = None
    #: The operator that launched the session, and the session's id (launch tokens only).
    operator: str | None = None
    session: str | None = None

    @property
    def is_player(self) -> bool:
        return self.kind in ("player", "guest")

    @property
    def is_staff(self) -> bool:
        return self.kind in STAFF

    def may_drive(self, table: str) -> bool:
        """A dealer or supervisor token scoped to ``table`` (or to every table)."""
        return self.is_staff and (ALL_TABLES in self.tables or table in self.tables)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


_B64URL = re.compile(r"[A-Za-z0-9_-]*")


def _unb64(text: str) -> bytes:
    """Strict base64url: only the alphabet, no padding, and the one canonical spelling
    (Python's decoder would skip stray characters and ignore trailing bits, so many strings
    would name one token)."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not canonical base64url")
    return data


def mint(secret: bytes, kind: Kind, subject: str, name: str, ttl_seconds: int,
         tables: tuple[str, ...] | list[str] = (), *, currency: str | None = None,
         language: str | None = None, operator: str | None = None,
         session: str | None = None) -> str:
    """A signed token. A player's or guest's ``subject`` must be a valid player id
    (:func:`livetable.accounts.check_player_id`): :class:`AccountError` otherwise. Staff
    kinds need ``tables`` (ids, or ``["*"]`` for every table)."""
    if kind in ("player", "guest"):
        check_player_id(subject)
    claims: dict[str, object] = {"k": kind, "sub": subject, "name": name,
                                 "exp": int(time.time()) + ttl_seconds}
    if kind in STAFF:
        if not tables or not all(isinstance(t, str) and t for t in tables):
            raise ValueError(f"a {kind} token names its tables (or {ALL_TABLES!r} for all)")
        claims["tables"] = list(tables)
    elif tables:
        raise ValueError("only dealer and supervisor tokens name tables")
    if currency is not None:
        claims["cur"] = currency
    if language is not None:
        claims["lang"] = language
    if operator is not None:
        claims["op"] = operator
    if session is not None:
        claims["sid"] = session
    payload = json.dumps(claims, separators=(",", ":")).encode()
    signature = hmac.new(secret, payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(signature)}"


def verify(secret: bytes, token: str, now: float | None = None) -> Identity:
    try:
        payload_text, signature_text = token.split(".")
        payload, signature = _unb64(payload_text), _unb64(signature_text)
    except (ValueError, TypeError, binascii.Error):
        raise TokenError("malformed token") from None
    expected = hmac.new(secret, payload, hashlib.sha256).digest()
    if not hmac.compare_digest(signature, expected):
        raise TokenError("bad token signature")
    try:
        data = json.loads(payload)
        tables = data.get("tables", [])
        if not isinstance(tables, list) or not all(isinstance(t, str) for t in tables):
            raise TypeError("tables")
        if not isinstance(data["sub"], str) or not isinstance(data["name"], str):
            raise TypeError("sub")  # 123, null, true: never the player "123"/"None"/"True"
        identity = Identity(kind=data["k"], id=data["sub"], name=data["name"],
                            expires=int(data["exp"]), tables=tuple(tables),
                            currency=_text(data.get("cur")),
                            language=_text(data.get("lang")), operator=_text(data.get("op")),
                            session=_text(data.get("sid")))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise TokenError("malformed token payload") from None
    if identity.kind not in KINDS:
        raise TokenError("unknown token kind")
    if identity.is_player:
        try:
            check_player_id(identity.id)
        except AccountError as exc:  # signed, but for an id no player may have
            raise TokenError(str(exc)) from None
    if identity.expires < (time.time() if now is None else now):
        raise TokenError("token expired")
    return identity


def _text(value: object) -> str | None:
    """An optional claim: absent, or text (anything else is a malformed payload)."""
    if value is None or isinstance(value, str):
        return value
    raise TypeError("a claim that must be text")


def new_guest_id() -> str:
    return GUEST_PREFIX + secrets.token_urlsafe(9)


#: Seconds an approval lives after the supervisor's console asked for it.
APPROVAL_TTL = 120


@dataclass(frozen=True, slots=True)
class Approval:
    """A supervisor's approval of voiding the last ``count`` cards of one round."""

    table: str
    round_id: str
    count: int
    nonce: str
    supervisor_id: str
    supervisor: str
    expires: int


def _approval_key(secret: bytes) -> bytes:
    # Its own key: an approval is never a token, and a token never an approval.
    return hmac.new(secret, b"livetable approval v1", hashlib.sha256).digest()


def sign_approval(secret: bytes, supervisor: Identity, table: str, round_id: str, count: int,
                  now: float | None = None, ttl: int = APPROVAL_TTL) -> tuple[str, Approval]:
    """The code a supervisor's console shows for one correction, and what it says."""
    approval = Approval(table=table, round_id=round_id, count=count,
                        nonce=secrets.token_urlsafe(12), supervisor_id=supervisor.id,
                        supervisor=supervisor.name,
                        expires=int((time.time() if now is None else now) + ttl))
    payload = json.dumps({"a": 1, "tbl": table, "rnd": round_id, "n": count,
                          "nonce": approval.nonce, "sub": supervisor.id,
                          "name": supervisor.name, "exp": approval.expires},
                         separators=(",", ":")).encode()
    signature = hmac.new(_approval_key(secret), payload, hashlib.sha256).digest()
    return f"A.{_b64(payload)}.{_b64(signature)}", approval


def verify_approval(secret: bytes, code: str, now: float | None = None) -> Approval:
    """The approval ``code`` stands for; :class:`TokenError` if malformed, forged or
    expired. Whether it fits the correction asked (table, round, count) and was not used
    yet is the caller's and the engine's to check."""
    try:
        mark, payload_text, signature_text = code.split(".")
        if mark != "A":
            raise ValueError("not an approval")
        payload, signature = _unb64(payload_text), _unb64(signature_text)
    except (ValueError, TypeError, binascii.Error):
        raise TokenError("malformed approval (a supervisor's token is not an approval: "
                         "ask the supervisor's console for one)") from None
    expected = hmac.new(_approval_key(secret), payload, hashlib.sha256).digest()
    if not hmac.compare_digest(signature, expected):
        raise TokenError("bad approval signature")
    try:
        data = json.loads(payload)
        fields = (data["tbl"], data["rnd"], data["nonce"], data["sub"], data["name"])
        if data.get("a") != 1 or not all(isinstance(x, str) for x in fields) or \
                type(data["n"]) is not int or type(data["exp"]) is not int:
            raise TypeError("approval")
        approval = Approval(table=data["tbl"], round_id=data["rnd"], count=data["n"],
                            nonce=data["nonce"], supervisor_id=data["sub"],
                            supervisor=data["name"], expires=data["exp"])
    except (ValueError, KeyError, TypeError, AttributeError):
        raise TokenError("malformed approval payload") from None
    if approval.expires < (time.time() if now is None else now):
        raise TokenError("approval expired")
    return approval
