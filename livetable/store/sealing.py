"""The engine state sealed at rest: no store holds the future cards in plain form.

Why. A table's engine state holds the shuffled order of the shoe in play and the face-down
cards of the round being dealt. Stored in plain form (``tables.state`` in SQLite,
``tables.state`` in PostgreSQL), anyone holding a copy of the database, a backup or the
data directory would predict every hand. So both stores keep the
state *sealed*: encrypted and authenticated with AES-256-GCM (the ``cryptography``
package) under a key of its own, the *shoe key*: never the signing secret (which every
gateway and everyone who runs ``livetable token`` holds), never in the database. It comes
from ``LIVETABLE_SHOE_KEY``, else the file ``LIVETABLE_SHOE_KEY_FILE``, else a key file
generated on the first start outside the data directory — see
:func:`load_key_ring`; docs/security.md says where it must live in
production, docs/operations.md how to back it up and rotate it.

A seal holds a *key ring*: one key per line, the first seals, every one opens. That is how a
key is rotated (a new first line seals from then on; the old lines still open what they
sealed until every table has committed once under the new key) and how a state sealed with
the signing secret by an older livetable is migrated (the secret is the ring's last key:
opened once, resealed by the next commit with the shoe key).

The seal works on whole state blobs at the store boundary (the stores call
:func:`seal_state` in ``commit_step`` and :func:`open_state` in ``load_table``), so the
engine stays sans-IO and knows nothing of keys, and everything that reads a state back (the
runner, a gateway catching up after a bus blip) gets the plain bytes the engine wrote.

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
(see :meth:`livetable.host.runner.TableRunner._restore`).
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from livetable.config import Settings, SettingsError

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
    """Seals engine states with the first key of a key ring, opens them with any of its keys.

    ``keys``: one key per line (what a shoe key file holds); blank lines are skipped. Each
    key has its own id, so a state names the key that sealed it.
    """

    def __init__(self, keys: bytes) -> None:
        ring = [k.strip() for k in keys.split(b"\n") if k.strip()]
        if not ring:
            raise ValueError("the state key is empty")
        self._ring = ring
        self._ids = [_hkdf(key, b"livetable engine state key id", KEY_ID_BYTES) for key in ring]
        #: The id of the key that seals (the ring's first).
        self.key_id = self._ids[0]
        self._ciphers: dict[tuple[int, str], AESGCM] = {}

    @property
    def master(self) -> bytes:
        """The key ring, one key per line (what the SQLite writer process seals with,
        store/sqlite/writer.py)."""
        return b"\n".join(self._ring)

    def _cipher(self, index: int, table: str) -> AESGCM:
        cipher = self._ciphers.get((index, table))
        if cipher is None:
            key = _hkdf(self._ring[index], b"livetable engine state v1 " + table.encode())
            cipher = self._ciphers[index, table] = AESGCM(key)
        return cipher

    def seal(self, table: str, plain: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._cipher(0, table).encrypt(nonce, plain, table.encode())
        return MAGIC + self.key_id + nonce + sealed

    def sealed_with(self, stored: bytes) -> bytes:
        """The id of the key a sealed state names."""
        return stored[len(MAGIC):len(MAGIC) + KEY_ID_BYTES]

    def open(self, table: str, stored: bytes) -> bytes:
        if not stored.startswith(MAGIC):
            raise SealError(f"table {table!r}: the stored state is not a sealed state")
        head = len(MAGIC)
        key_id = self.sealed_with(stored)
        nonce = stored[head + KEY_ID_BYTES:head + KEY_ID_BYTES + NONCE_BYTES]
        if key_id not in self._ids:
            raise SealError(
                f"table {table!r}: the stored state was sealed with another key (key id "
                f"{key_id.hex()}, this process has {', '.join(i.hex() for i in self._ids)}): "
                "start with the shoe key (LIVETABLE_SHOE_KEY / LIVETABLE_SHOE_KEY_FILE) it "
                "was written with, or add that key to the ring (docs/operations.md)")
        index = self._ids.index(key_id)
        try:
            plain = self._cipher(index, table).decrypt(
                nonce, stored[head + KEY_ID_BYTES + NONCE_BYTES:], table.encode())
        except InvalidTag:
            raise SealError(f"table {table!r}: the stored state does not authenticate "
                            "(damaged, or changed outside livetable)") from None
        if index:
            log.warning("table %s: its state was sealed with an older key (key id %s); it "
                        "is sealed with the shoe key (key id %s) from the next step on",
                        table, key_id.hex(), self.key_id.hex())
        return plain


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


def load_key_ring(settings: Settings, create: bool = True) -> tuple[bytes, str, list[str]]:
    """The key ring that seals engine states at rest (one key per line, the first
    seals: store/sealing.py), where it came from, and what is wrong with where it lives
    (warnings for the log).

    The shoe key is LIVETABLE_SHOE_KEY, else the file LIVETABLE_SHOE_KEY_FILE, else
    :attr:`livetable.config.Settings.shoe_key_path`, generated on the first start
    (``create``: mode 0600 in a 0700 directory). It is never the signing secret: the
    secret only joins the ring's end, so that a state an older livetable sealed with it
    opens once and is resealed with the shoe key (docs/security.md).
    """
    warnings: list[str] = []
    path = settings.shoe_key_path
    if settings.shoe_key is not None:
        ring, source = settings.shoe_key, "LIVETABLE_SHOE_KEY"
    else:
        source = f"the key file {path}"
        if settings.shoe_key_file is None and create and not path.exists():
            try:
                _create_key_file(path)
            except OSError as exc:
                raise SettingsError(
                    f"cannot create the shoe key {path}: {exc.strerror}; make its "
                    "directory writable, or set LIVETABLE_SHOE_KEY or "
                    "LIVETABLE_SHOE_KEY_FILE") from None
            warnings.append(f"generated the shoe key {path}: back it up apart from the "
                            "data (docs/operations.md, section 4)")
        try:
            ring = path.read_bytes()
        except OSError as exc:
            what = "LIVETABLE_SHOE_KEY_FILE" if settings.shoe_key_file else "the shoe key"
            raise SettingsError(f"{what} {path}: {exc.strerror}") from None
        if path.stat().st_mode & 0o077:
            warnings.append(f"the shoe key file {path} is readable by others than its "
                            "owner: chmod 600 it")
    if _inside(path, settings.data_dir) and settings.shoe_key is None:
        warnings.append(f"the shoe key file {path} is inside the data directory "
                        f"{settings.data_dir}: a copy of the directory can read every "
                        "future card; keep it elsewhere")
    keys = [k.strip() for k in ring.split(b"\n") if k.strip()]
    if not keys:
        raise SettingsError(f"{source} is empty")
    for key in keys:
        if len(key) < MIN_KEY_BYTES:
            raise SettingsError(f"{source} holds a key of {len(key)} bytes; a shoe key "
                             f"needs at least {MIN_KEY_BYTES} (e.g. openssl rand -hex 32)")
    secret = settings.secret
    if secret is None and (settings.data_dir / "secret").exists():
        secret = (settings.data_dir / "secret").read_bytes().strip()
    if secret and secret in keys:
        raise SettingsError(f"{source} holds the signing secret: the shoe key must be a key "
                         "of its own (every gateway and `livetable token` holds the "
                         "secret)")
    if secret:
        keys.append(secret)  # opens what an older livetable sealed with it, never seals
    return b"\n".join(keys), source, warnings


def _create_key_file(path: Path) -> None:
    """A new random shoe key at ``path``: its directory 0700, the file 0600, never
    overwritten (two processes starting at once: the second reads the first's)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_hex(32).encode() + b"\n")


def _inside(path: Path, directory: Path) -> bool:
    try:
        return path.resolve().is_relative_to(directory.resolve())
    except OSError:
        return False
