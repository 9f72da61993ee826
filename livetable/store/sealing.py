"""The engine state sealed at rest: no store holds the future cards in plain form.

Why. A table's engine state holds the shuffled order of the shoe in play and the face-down
cards of the round being dealt. Stored in plain form (``tables.state`` in SQLite,
``lt:table:{<t>}:state`` in Redis), anyone holding a copy of the database, a backup, the
data directory or read access to Redis would predict every hand. So both stores keep the
state *sealed*: encrypted and authenticated with AES-256-GCM (the ``cryptography``
package) under a key that is not stored beside it. The key comes from
``LIVETABLE_SHOE_KEY``, else the file ``LIVETABLE_SHOE_KEY_FILE``, else the signing secret
(``LIVETABLE_SECRET`` or ``DATA_DIR/secret``) — see :meth:`livetable.config.Settings.state_key`;
docs/security.md says where that key must live in production.

The seal works on whole state blobs at the store boundary (the stores call
:func:`seal_state` in ``commit_step`` and :func:`open_state` in ``load_table``), so the
engine stays sans-IO and knows nothing of keys, and everything that reads a state back (the
runner, a gateway catching up after a Redis blip) gets the plain bytes the engine wrote.

Format of a sealed state::

    b"LTS1" | key id (8 bytes) | nonce (12 bytes) | AES-256-GCM ciphertext and tag

* One key per table: ``HKDF-SHA256(master, info="livetable engine state v1 " + table)``.
  Nonces are random: one key seals far fewer than the 2**32 messages below which random
  96-bit nonces are safe (a table seals at most about ten states a second: 13 years).
* The table id is the associated data as well: a state cannot be moved to another table.
* The key id (HKDF of the master, 8 bytes, not secret) lets a wrong key be reported as
  such rather than as a damaged state.

Migration: a state that begins with ``{`` is one stored in plain JSON before sealing
existed. It is opened as it is (and sealed by the next commit, which the runner makes at
once on start); its shoe was exposed, so the runner retires it after the round in play
(see :meth:`livetable.server.runner.TableRunner._restore`).
"""

from __future__ import annotations

import logging
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MAGIC = b"LTS1"
KEY_ID_BYTES = 8
NONCE_BYTES = 12
#: A dedicated shoe key must carry at least this many bytes (e.g. ``openssl rand -hex 32``).
MIN_KEY_BYTES = 32

log = logging.getLogger("livetable.store.sealing")


class SealError(Exception):
    """A stored engine state that cannot be opened: sealed under another key (the key or
    the secret changed), damaged or tampered with, or sealed while no key is configured."""


def _hkdf(master: bytes, info: bytes, length: int = 32) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=info).derive(master)


class StateSeal:
    """Seals and opens engine states with keys derived from one master key."""

    def __init__(self, master: bytes) -> None:
        if not master:
            raise ValueError("the state key is empty")
        self._master = master
        self.key_id = _hkdf(master, b"livetable engine state key id", KEY_ID_BYTES)
        self._ciphers: dict[str, AESGCM] = {}

    @property
    def master(self) -> bytes:
        """The master key (what the SQLite writer process seals with, store/writer.py)."""
        return self._master

    def _cipher(self, table: str) -> AESGCM:
        cipher = self._ciphers.get(table)
        if cipher is None:
            key = _hkdf(self._master, b"livetable engine state v1 " + table.encode())
            cipher = self._ciphers[table] = AESGCM(key)
        return cipher

    def seal(self, table: str, plain: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._cipher(table).encrypt(nonce, plain, table.encode())
        return MAGIC + self.key_id + nonce + sealed

    def open(self, table: str, stored: bytes) -> bytes:
        if not stored.startswith(MAGIC):
            raise SealError(f"table {table!r}: the stored state is not a sealed state")
        head = len(MAGIC)
        key_id = stored[head:head + KEY_ID_BYTES]
        nonce = stored[head + KEY_ID_BYTES:head + KEY_ID_BYTES + NONCE_BYTES]
        if key_id != self.key_id:
            raise SealError(
                f"table {table!r}: the stored state was sealed with another key (key id "
                f"{key_id.hex()}, this process has {self.key_id.hex()}): start with the "
                "LIVETABLE_SHOE_KEY / LIVETABLE_SHOE_KEY_FILE / LIVETABLE_SECRET it was "
                "written with")
        try:
            return self._cipher(table).decrypt(
                nonce, stored[head + KEY_ID_BYTES + NONCE_BYTES:], table.encode())
        except InvalidTag:
            raise SealError(f"table {table!r}: the stored state does not authenticate "
                            "(damaged, or changed outside livetable)") from None


def is_plain(stored: bytes) -> bool:
    """A state stored before sealing existed: the engine's JSON."""
    return stored[:1] == b"{"


def seal_state(seal: StateSeal | None, table: str, plain: bytes) -> bytes:
    """What a store writes for ``plain`` (unchanged when the store has no seal: tests)."""
    return plain if seal is None else seal.seal(table, plain)


def open_state(seal: StateSeal | None, table: str, stored: bytes) -> bytes:
    """The plain state from what a store read; a plain (pre-sealing) state passes."""
    if stored.startswith(MAGIC):
        if seal is None:
            raise SealError(f"table {table!r}: the stored state is sealed, but this store "
                            "has no state key")
        return seal.open(table, stored)
    if seal is not None:
        if not is_plain(stored):
            raise SealError(f"table {table!r}: the stored state is neither sealed nor an "
                            "engine state")
        log.warning("table %s: its state was stored in plain form (before sealing); it is "
                    "sealed from the next step on", table)
    return stored
