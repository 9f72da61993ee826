"""The public side of a gateway: the websockets, the tables, rounds and shoes anyone may
read, the player's Bet Record, demo guests and the dealer's page.

Each endpoint is thin: decode, authorize, hand over (to the gateway, its feeds or the
store), encode. The tables come from the gateway's feeds, already encoded, so a page of
watchers costs no store read; a round or a shoe is served only once it is over (settled or
cancelled, an ended shoe), so nothing here tells what is still in play. A player's token is
checked here as on the websocket, and an operator's session that has ended refuses it on
both.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urljoin

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.websockets import WebSocket

from livetable import protocol as p
from livetable.auth import Identity, TokenError, mint, new_guest_id, verify
from livetable.clock import now_ms
from livetable.server.process import services_of
from livetable.server.records import page_tips, record_totals
from livetable.server.responses import error_response, json_response


class BetsQuery(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """The query of ``GET /api/bets``: the same bounds as ``get_bets`` on the websocket."""

    limit: Annotated[int, msgspec.Meta(ge=-(2**53), le=2**53)] = 20  # clamped to 1…200
    before: p.Cursor | None = None
    #: The player's offset from UTC in minutes (east): the days of the totals are theirs.
    tz: Annotated[int, msgspec.Meta(ge=-840, le=840)] = 0


# --- the websockets: the gateway's ----------------------------------------------------


async def ws_player(websocket: WebSocket) -> None:
    await services_of(websocket).gateway.serve(websocket, "player")


async def ws_dealer(websocket: WebSocket) -> None:
    await services_of(websocket).gateway.serve(websocket, "dealer")


# --- tables, rounds and shoes: public, read from the gateway's feeds or the store -----


async def tables(request: Request) -> Response:
    return json_response(services_of(request).gateway.tables_json())


async def table(request: Request) -> Response:
    feed = services_of(request).gateway.feeds.get(request.path_params["table"])
    if feed is None:
        return error_response(404, "unknown_table", "no such table")
    return json_response(feed.snapshot)


async def still(request: Request) -> Response:
    """A still of the table's video, for the lobby (server/stills.py); 404 ``no_video``
    for a table without one, ``no_still`` while no frame could be grabbed."""
    services = services_of(request)
    table_id = request.path_params["table"]
    if table_id not in services.gateway.feeds:
        return error_response(404, "unknown_table", "no such table")
    stream = services.settings.streams.get(table_id)
    if not stream:
        return error_response(404, "no_video", "this table has no video")
    playlist = urljoin(str(request.base_url), stream)
    shot = await services.stills.still(table_id, playlist, wait=True)
    if shot is None:
        return error_response(404, "no_still", "no picture of this table yet")
    return Response(shot.jpeg, media_type="image/jpeg", headers={"Cache-Control": "max-age=5"})


async def roadmap(request: Request) -> Response:
    feed = services_of(request).gateway.feeds.get(request.path_params["table"])
    if feed is None:
        return error_response(404, "unknown_table", "no such table")
    snap = feed.view()
    return json_response(p.ENCODER.encode({"table": snap.id, "shoe_id": snap.shoe_id,
                                   "roadmap": snap.roadmap}))


async def round_(request: Request) -> Response:
    view = await services_of(request).store.round_view(request.path_params["round_id"])
    if view is None or view.state not in ("settled", "cancelled"):
        return error_response(404, "unknown_round", "no settled or cancelled round with that id")
    body = msgspec.to_builtins(view)
    if view.spots is not None:  # name the fields, so that v1 can add more
        body["spots"] = {spot: {"outcome": r[0], "odds": r[1], "returned_per_unit": r[2]}
                         for spot, r in view.spots.items()}
    return JSONResponse(body)


async def shoe(request: Request) -> Response:
    # Only an ended auto shoe has a record: nothing of a shoe in play is ever served.
    record = await services_of(request).store.shoe_view(request.path_params["shoe_id"])
    if record is None:
        return error_response(404, "unknown_shoe", "no ended shoe with that id: a shoe is "
                              "revealed when it ends, and a manual (physical) shoe never is")
    return json_response(p.ENCODER.encode(record))


# --- players: the Bet Record, demo guests ---------------------------------------------


def identity_of(request: Request) -> Identity | Response:
    """The player or guest a request's bearer token names; else the error to answer."""
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("bearer "):
        return error_response(401, "no_token", "send Authorization: Bearer <token>")
    try:
        identity = verify(services_of(request).secret, header[7:].strip())
    except TokenError as exc:
        return error_response(401, "bad_token", str(exc))
    if not identity.is_player:
        return error_response(403, "not_a_player", "a player or guest token is needed")
    return identity


async def session_ended(request: Request, identity: Identity) -> Response | None:
    """401 ``session_ended`` when the operator's session ``identity`` belongs to has
    ended: its token is refused from then on."""
    if identity.session is None:
        return None
    svc = services_of(request)
    if identity.operator is not None and svc.operators.get(identity.operator) is None:
        # its operator was removed from the registry: its sessions ended with it
        return error_response(401, "session_ended", "this session has ended (operator_removed)")
    record = await svc.store.session(identity.session)
    if record is None:
        return None
    if record.ended_at is None:
        ends_at = record.ends_at  # its time limit came while no gateway was timing it
        if ends_at is None or now_ms() < ends_at:
            return None
        return error_response(401, "session_ended", "this session has ended (time_limit)")
    return error_response(401, "session_ended", f"this session has ended ({record.reason})")


async def bets(request: Request) -> Response:
    identity = identity_of(request)
    if isinstance(identity, Response):
        return identity
    ended = await session_ended(request, identity)
    if ended is not None:
        return ended
    svc = services_of(request)
    limits = svc.gateway.limits
    address = request.client.host if request.client else "?"
    if not limits.allow(limits.bet_record, "bets", address):
        return error_response(429, "rate_limited", "too many Bet Record reads, slow down",
                              retry_after=limits.retry_after(limits.bet_record, "bets",
                                                             address))
    try:
        query = msgspec.convert(dict(request.query_params), BetsQuery, strict=False)
    except msgspec.ValidationError as exc:
        return error_response(400, "bad_request", str(exc))
    entries, cursor = await svc.store.bet_record(identity.id, query.limit, query.before)
    tips = await page_tips(svc.store, identity.id, entries, cursor, query.before)
    if svc.settings.seamless:
        # The ledger's balance_after is its own book, not the operator's wallet (it came out
        # as the round's returned amount): the operator's balance is not ours to show.
        entries = [msgspec.structs.replace(e, balance_after=None) for e in entries]
        tips = [msgspec.structs.replace(t, balance_after=None) for t in tips]
    totals = await record_totals(svc.store, identity.id, entries, query.tz)
    return json_response(p.ENCODER.encode({"bets": entries, "next": cursor, "days": totals.days,
                                   "rounds": totals.rounds,
                                   "totals_partial": totals.totals_partial, "tips": tips}))


async def guest(request: Request) -> Response:
    svc = services_of(request)
    settings, limits = svc.settings, svc.gateway.limits
    if not settings.guests:
        return error_response(403, "demo_off", "guest play is off on this server")
    address = request.client.host if request.client else "?"
    if not limits.allow(limits.guests, "guest", address):
        return error_response(429, "rate_limited", "too many new guests from this address")
    guest_id = new_guest_id()
    name = f"Guest {guest_id[-4:].upper()}"
    token = mint(svc.secret, "guest", guest_id, name, settings.token_ttl)
    player = await svc.store.ensure_player(guest_id, name, settings.guest_balance, now_ms())
    return json_response(p.ENCODER.encode({"token": token, "player": player}))


# --- pages ----------------------------------------------------------------------------


async def dealer_page(request: Request) -> Response:
    return RedirectResponse("/dealer.html")
