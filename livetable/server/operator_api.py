"""The operator's HTTP API: launch a player at a table, end a session, read the wallet's
calls (docs/design.md §5, docs/operator.md).

These are server-to-server calls, each signed by the operator (v2: an HMAC over the
timestamp and the raw body, with any of its secrets) and named by ``X-Livetable-Operator``,
so :func:`operator_body` checks the signature over the bytes as they came, before anything
is decoded, and bounds the body it reads. The request types are msgspec structs that forbid
unknown fields: the schema is the validator, and a mistyped field is a 400 that names it,
never a silent default. An operator sees its own sessions and its own players' calls only.
"""

from __future__ import annotations

import re
import secrets
from typing import Annotated, Literal, TypeVar
from urllib.parse import urlencode

import msgspec
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from livetable.accounts import AccountError, check_not_guest, is_operator_player_id
from livetable.auth import mint, verify
from livetable.betting.sessions import NO_LIMITS, SessionLimits, SessionRecord
from livetable.bus import SessionEnd
from livetable.chat import clean, visible
from livetable.clock import now_ms
from livetable.operator import registry, signatures
from livetable.operator.launches import KEPT_MS
from livetable.operator.registry import Operator
from livetable.server.process import services_of
from livetable.server.responses import error_response, json_response

#: The largest body an operator endpoint reads (a launch is a few hundred bytes).
MAX_OPERATOR_BODY = 16_384


#: A launch's request id: unique per launch, kept for ten minutes (operator/launches.py).
RequestId = Annotated[str, msgspec.Meta(min_length=8, max_length=128,
                                        pattern=r"^[A-Za-z0-9_.:@+\-]+$")]


class LaunchRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``POST /api/operator/sessions``: the operator puts a player at a table (launch v2)."""

    request_id: RequestId
    player_id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    #: ISO 4217 (amounts are in its minor unit); one of the operator's currencies.
    currency: Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{3}$")]
    language: Literal["en", "th", "hi"] | None = None
    table: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    #: Responsible gaming (betting/sessions.py): every one optional.
    limits: SessionLimits = NO_LIMITS
    #: Where the page sends the player back when the session ends (its button), an http(s)
    #: URL of the operator's; carried in the launch URL's fragment, never stored.
    return_url: Annotated[str, msgspec.Meta(max_length=2048, pattern=r"^https?://[^\s]+$")] \
        | None = None


class EndRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``POST /api/operator/sessions/{session_id}/end``: why the operator ends it."""

    reason: Annotated[str, msgspec.Meta(min_length=1, max_length=64,
                                        pattern=r"^[A-Za-z0-9_.:\-]+$")]


class ReportRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The signed body of ``POST /api/operator/wallet``: which calls to list."""

    round_id: Annotated[str, msgspec.Meta(max_length=128)] | None = None
    player_id: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 10_000
    #: The per-day summary (rounds, players, stakes, returns, GGR by table and currency)
    #: instead of the calls.
    daily: bool = False


OperatorRequest = TypeVar("OperatorRequest", bound=msgspec.Struct)


async def operator_body(request: Request, kind: type[OperatorRequest]
                        ) -> tuple[Operator, OperatorRequest] | Response:
    """The operator named by X-Livetable-Operator (``default`` when the header is absent)
    and its request decoded, once its signature (v2: over the timestamp and the raw body,
    with any of the operator's secrets) checks; else the error response (404 when no
    operator is configured: no integration)."""
    operators = services_of(request).operators
    if not operators.operators:
        return error_response(404, "not_found", "operator integration is not configured")
    operator_id = request.headers.get(signatures.OPERATOR_HEADER, registry.DEFAULT_OPERATOR)
    operator = operators.get(operator_id)
    if operator is None:
        return error_response(401, "unknown_operator",
                              f"{signatures.OPERATOR_HEADER} names no operator of this platform")
    body = b""
    try:
        async for chunk in request.stream():  # bounded: never buffer a huge body
            body += chunk
            if len(body) > MAX_OPERATOR_BODY:
                return error_response(413, "too_large", "the body is at most 16 KiB")
    except ClientDisconnect:  # gone, or too slow (server/guard.py answered it 408)
        return error_response(408, "body_timeout", "the request body did not arrive in time")
    why = signatures.check(operator.operator_secrets, body, request.headers, now_ms())
    if why is not None:
        return error_response(401, "invalid_signature", why)
    try:
        return operator, msgspec.json.decode(body, type=kind)
    except msgspec.DecodeError as exc:
        return error_response(400, "bad_request", str(exc))


async def launch(request: Request) -> Response:
    signed = await operator_body(request, LaunchRequest)
    if isinstance(signed, Response):
        return signed
    operator, launch = signed
    if not is_operator_player_id(launch.player_id):
        return error_response(400, "bad_player_id", f"{launch.player_id[:80]!r} is not a "
                              f"valid player id: 1 to 64 letters, digits or _ - . @ +")
    if operator.id == registry.DEFAULT_OPERATOR:  # namespaced ids never meet a guest's
        try:
            check_not_guest(launch.player_id)
        except AccountError as exc:
            return error_response(400, "bad_player_id", str(exc))
    if operator.currencies and launch.currency not in operator.currencies:
        return error_response(400, "unknown_currency", f"{operator.id} plays in "
                              f"{', '.join(sorted(operator.currencies))}, not {launch.currency}")
    try:
        registry.currency_decimals(launch.currency)
    except ValueError as exc:
        return error_response(400, "unknown_currency", str(exc))
    svc = services_of(request)
    settings = svc.settings
    table_id = launch.table or next(
        (t for t in settings.table_names if operator.may_launch_at(t)), "")
    if table_id not in settings.table_names or not operator.may_launch_at(table_id):
        return error_response(404, "unknown_table", f"no table {table_id!r} for {operator.id}")
    now = now_ms()
    name = clean(launch.name)  # shown to the table (chat, presenter): one line, as chat is
    if not visible(name):
        return error_response(400, "bad_request", "name must show something: it is empty "
                              "once control, zero-width and filler characters are removed")
    if not await svc.store.first_launch(operator.id, launch.request_id, now, now + KEPT_MS):
        return error_response(409, "duplicate_request", f"request_id {launch.request_id!r} "
                              f"was used already: each launch has its own")
    language = launch.language or operator.language
    session_id = secrets.token_urlsafe(12)
    player = registry.ledger_player_id(operator.id, launch.player_id)
    token = mint(svc.secret, "player", player, name, settings.session_ttl,
                 currency=launch.currency, language=language, operator=operator.id,
                 session=session_id)
    expires_at = verify(svc.secret, token).expires * 1000
    # kept before the token is handed out: every gateway sees the session, its limits,
    # and (later) its end
    started_at = now_ms()
    await svc.store.open_session(SessionRecord(
        session_id=session_id, operator=operator.id, player_id=player,
        started_at=started_at, expires_at=expires_at, limits=launch.limits,
        checked_at=started_at))
    base = settings.public_url.rstrip("/") or str(request.base_url).rstrip("/")
    # the token rides in the fragment: browsers never send it to a server, so it stays
    # out of access logs, proxies and Referer headers
    fragment = urlencode({"token": token, **({"lang": language} if language else {}),
                          **({"return": launch.return_url} if launch.return_url else {})})
    url = f"{base}/table.html?{urlencode({'table': table_id})}#{fragment}"
    return JSONResponse({"session_id": session_id, "token": token, "url": url,
                         "expires_at": expires_at})


#: A session id as a launch makes them (``secrets.token_urlsafe(12)``).
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


async def end_session(request: Request) -> Response:
    """``POST /api/operator/sessions/{session_id}/end``: the operator that launched the
    session ends it on every gateway at once (the store keeps the end first, so a gateway
    that misses the bus still refuses the token). Ending it again answers the first end."""
    signed = await operator_body(request, EndRequest)
    if isinstance(signed, Response):
        return signed
    operator, end = signed
    session_id = request.path_params["session_id"]
    svc = services_of(request)
    record = (await svc.store.session(session_id)
              if _SESSION_ID.fullmatch(session_id) else None)
    if record is None or record.operator != operator.id:  # another's is none of its own
        return error_response(404, "unknown_session",
                              f"{operator.id} has no session {session_id[:80]!r} in force")
    record = await svc.store.end_session(session_id, end.reason, now_ms())
    assert record is not None and record.ended_at is not None
    await svc.bus.end_session(SessionEnd(session_id=session_id,
                                         reason=record.reason or end.reason))
    return JSONResponse({"session_id": session_id, "ended_at": record.ended_at,
                         "reason": record.reason})


async def wallet_report(request: Request) -> Response:
    signed = await operator_body(request, ReportRequest)
    if isinstance(signed, Response):
        return signed
    operator, query = signed
    wallet_log = services_of(request).wallet_log
    if wallet_log is None:
        return error_response(404, "not_seamless", "this server runs the internal wallet")
    from livetable.operator.report import daily, report

    player = (None if query.player_id is None
              else registry.ledger_player_id(operator.id, query.player_id))
    if query.daily:  # over every call of the log (store/sqlite/ledger/wallet_totals.py)
        days = daily(await wallet_log.days(operator.id))
        return json_response(msgspec.json.encode({"days": days}))
    calls = await wallet_log.calls(query.round_id, player, query.limit)
    # an operator reads its own players' calls, never another operator's
    calls = [call for call in calls if registry.operator_of(call.player_id) == operator.id]
    totals = await wallet_log.totals(query.round_id, player, operator.id)
    return json_response(msgspec.json.encode(report(calls, totals)))
