"""The studio's staff, attacked: a dealer token signing in as another presenter (their
name and photo on every player's screen), and a photo URL the pages' same-origin rule let
through (``/\\evil.example/p.jpg``, which browsers read as ``//evil.example/p.jpg``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from test_gateway_sessions import _Socket, _until

from livetable import protocol as p
from livetable.auth import mint
from livetable.bus import TableBatch
from livetable.config import Settings, SettingsError, parse_presenters, parse_streams
from livetable.metrics import Metrics
from livetable.server.gateway import Gateway
from livetable.store.sqlite import SQLiteStore

#: a signed-in console's answer is awaited a few ms at a time (asyncio.sleep)
pytestmark = pytest.mark.sleeps

SECRET = b"s" * 32


async def _no_dealer(table: str, command: Any) -> p.Ack | p.Error:
    raise AssertionError("the presenter never reaches a table's engine")


async def _signed_in_as(tmp_path: Path, staff_id: str, name: str,
                        presenters: list[str]) -> dict[str, Any]:
    """What the console of the staff token ``staff_id`` is answered to
    ``dealer_sign_in {name}``, with ``--presenter`` given ``presenters``."""
    settings = Settings(data_dir=tmp_path, secret=SECRET, heartbeat=0,
                        presenters=parse_presenters(presenters))
    store = SQLiteStore(tmp_path / "db.sqlite3")
    gateway = Gateway(settings, store, _no_dealer, Metrics(), SECRET)
    snapshot = p.encode(p.TableSnapshot(id="t1", name="T1", phase="idle", mode="auto"))
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[], snapshot=snapshot))
    console = _Socket(mint(SECRET, "dealer", staff_id, "Console", 3600, ["t1"]))
    console.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(
        {"type": "dealer_sign_in", "name": name})})
    task = asyncio.create_task(gateway.serve(console, "dealer"))  # type: ignore[arg-type]
    try:
        await _until(lambda: len(console.types()) >= 2)
        return console.sent[1]
    finally:
        await console.close()
        async with asyncio.timeout(5):
            await task
        await store.close()


@pytest.mark.parametrize("name", ["Mai", " mai ", "MAI", "Маі"])  # the last: Cyrillic
async def test_a_dealer_cannot_sign_in_as_a_presenter_bound_to_another(
        tmp_path: Path, name: str) -> None:
    answer = await _signed_in_as(tmp_path, "bee", name, ["mai:Mai=/photos/mai.jpg"])
    assert answer["type"] == "error" and answer["code"] == "bad_command", answer
    assert "presenter" in answer["message"]


async def test_the_staff_token_a_presenter_is_bound_to_signs_in_with_the_photo(
        tmp_path: Path) -> None:
    answer = await _signed_in_as(tmp_path, "mai", "mai", ["mai:Mai=/photos/mai.jpg"])
    assert answer["type"] == "ack"
    assert answer["detail"] == {"name": "mai", "photo": "/photos/mai.jpg"}


async def test_a_presenter_named_alone_is_bound_to_the_staff_id_of_that_name(
        tmp_path: Path) -> None:
    """``--presenter Mai=URL`` (the form before bindings) binds Mai to the staff id
    ``mai``: another token may not take the name."""
    refused = await _signed_in_as(tmp_path, "dealer", "Mai", ["Mai=/photos/mai.jpg"])
    assert refused["type"] == "error" and refused["code"] == "bad_command"
    taken = await _signed_in_as(tmp_path / "again", "mai", "Mai", ["Mai=/photos/mai.jpg"])
    assert taken["type"] == "ack" and taken["detail"]["photo"] == "/photos/mai.jpg"


@pytest.mark.parametrize("url", [
    "/\\evil.example/p.jpg", "/photos\\..\\p.jpg", "https://cdn.example/a\\b.jpg",
    "/\tevil.example/p.jpg", "/\x01/evil.example/p.jpg"])
def test_a_url_the_page_loads_has_no_backslash_nor_control_character(url: str) -> None:
    with pytest.raises(SettingsError):
        parse_presenters([f"mai:Mai={url}"])
    with pytest.raises(SettingsError):
        parse_streams([f"t1={url}"])
