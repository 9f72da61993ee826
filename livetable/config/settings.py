"""The ``Settings`` of a process: one frozen msgspec Struct, each field with its type, its
range and its one default, and what the settings find on disk (the signing secret, the shoe
key ring).

Every default that the engine also knows (the timing) is the engine's own
:class:`~livetable.engine.Timing` default, never restated. A setting that cannot be used is
a :class:`SettingsError` whose message names it; the checks that involve more than one field
run when the Struct is built, so no half-checked ``Settings`` exists.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from livetable.engine import Timing
from livetable.engine.state import Mode

PREFIX = "LIVETABLE_"

#: The engine's timing defaults: Settings' timing defaults are these, in seconds.
_TIMING = Timing()

Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
#: At least 1 (a count, a size, a lifetime in seconds).
Positive = Annotated[int, msgspec.Meta(ge=1)]
#: 0 or more; 0 usually means "none" or "no limit" (documented per field).
Count = Annotated[int, msgspec.Meta(ge=0)]
Seconds = Annotated[float, msgspec.Meta(ge=0)]
PositiveSeconds = Annotated[float, msgspec.Meta(gt=0)]
Rate = Annotated[float, msgspec.Meta(gt=0)]


class SettingsError(ValueError):
    """A setting that cannot be used; the message names the variable or flag."""


class StreamError(SettingsError):
    """A ``--stream``/``LIVETABLE_STREAMS`` entry that cannot be used, and why."""


def parse_stream(entry: str) -> tuple[str, str]:
    """``TABLE=URL`` → ``(table, url)``. The URL is where browsers fetch the table's HLS
    playlist: an absolute http(s) URL, or a path on the pages' own origin (``/live/t1/…``,
    what the nginx in deploy/ serves)."""
    table, sep, url = entry.strip().partition("=")
    table, url = table.strip(), url.strip()
    if not sep or not table or not url:
        raise StreamError(f"a stream is TABLE=URL, got {entry!r}")
    # a backslash is a slash to a browser (``/\\evil.example/p.jpg`` is
    # ``//evil.example/p.jpg``, another origin), and it drops tabs and newlines anywhere
    if any(c.isspace() or c in "\"'<>\\" or ord(c) < 0x20 or ord(c) == 0x7f for c in url):
        raise StreamError(f"stream URL for {table!r} has a space, quote, backslash or "
                          f"control character: {url!r}")
    if not (url.startswith(("http://", "https://")) or
            (url.startswith("/") and not url.startswith("//"))):
        raise StreamError(f"stream URL for {table!r} must start with http://, https:// or /"
                          f" (a path on the pages' origin), got {url!r}")
    return table, url


def presenter_of(key: str) -> tuple[str, str]:
    """A ``--presenter`` entry's left side → ``(staff id, name)``: ``ID:NAME`` binds the
    name to the staff token whose id is ID (``livetable token --dealer --player ID``);
    ``NAME`` alone binds it to the staff id that is the name in lower case."""
    staff, sep, name = key.partition(":")
    if sep:
        return staff.strip(), name.strip()
    return key.strip().casefold(), key.strip()


def parse_presenters(entries: list[str]) -> dict[str, str]:
    """Every ``[ID:]NAME=URL`` of ``entries``: a dealer's photo, shown while they deal, and
    the staff token that may sign in under that name (:func:`presenter_of`). The URL is
    held to a stream's rules (an absolute http(s) URL or a path on the pages' origin)."""
    photos: dict[str, str] = {}
    for entry in entries:
        if entry.strip():
            try:
                name, url = parse_stream(entry)
            except StreamError:
                raise SettingsError(
                    f"--presenter {entry!r}: a photo is [STAFF_ID:]NAME=URL, the URL "
                    "http(s)://… or a path on the pages' origin (/…), without spaces, "
                    "quotes or backslashes") from None
            if not all(presenter_of(name)):
                raise SettingsError(f"--presenter {entry!r}: STAFF_ID:NAME needs both")
            photos[name] = url
    return photos


def parse_streams(entries: list[str]) -> dict[str, str]:
    """Every ``TABLE=URL`` of ``entries`` (blank entries are skipped)."""
    streams: dict[str, str] = {}
    for entry in entries:
        if entry.strip():
            table, url = parse_stream(entry)
            if table in streams and streams[table] != url:
                raise StreamError(f"two streams for table {table!r}: "
                                  f"{streams[table]!r} and {url!r}")
            streams[table] = url
    return streams


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting, with its one default: ``Settings()`` is ``livetable serve`` with no
    flags and no environment, a working embedded table. Build it from a process's flags
    and environment with :func:`load_settings`."""

    host: str = "127.0.0.1"
    port: Port = 8000
    data_dir: Path = Path("data")
    db: Path | None = None
    redis_url: str | None = None
    #: The system of record for scale-out (store/postgres): a libpq URL, required with
    #: redis_url (Redis is the bus, the dealer commands' queues and the leases only).
    postgres_url: str | None = None
    #: What PostgreSQL promises a bet: ``sync``, a synchronous standby has every commit
    #: before it returns (checked at start and in every batch of slips; bets are refused
    #: without one); ``none``, one PostgreSQL, opted into (a failover can lose
    #: acknowledged bets). store/postgres/replication.py.
    postgres_replication: Literal["sync", "none"] = "sync"
    #: Optional: a Redis Cluster node for pub/sub only (sharded SPUBLISH/SSUBSCRIBE); the
    #: leases and commands stay on the primary at redis_url (see host/scaleout.py).
    redis_pubsub_cluster: str | None = None
    tables: Positive = 1
    #: The table ids, instead of t1..t{tables}.
    table_ids: list[str] | None = None
    betting_seconds: Annotated[float, msgspec.Meta(ge=1)] = _TIMING.betting_ms / 1000
    reveal_interval: Seconds = _TIMING.reveal_interval_ms / 1000
    deal_interval: Seconds = _TIMING.deal_interval_ms / 1000
    between_rounds: Seconds = _TIMING.between_rounds_ms / 1000
    #: Manual mode: seconds after a round ends before the next opens by itself; 0 = never
    #: (the dealer opens every round).
    next_round_after: Seconds = _TIMING.manual_open_ms / 1000
    #: Seconds after closes_at before betting closes for bets that arrived in time.
    close_grace: Seconds = _TIMING.close_grace_ms / 1000
    mode: Mode = "auto"
    #: ``serve``/``gateway``/``engine``: seconds between full garbage collections, run when
    #: no table is busy (server/gcpolicy.py); 0 leaves CPython's own schedule.
    gc_interval: Seconds = 60
    #: Demo guests (POST /api/guest); always off with the seamless wallet (see guests).
    demo: bool = True
    guest_balance: Count = 10000
    player_balance: Count = 0
    #: New demo guests per client address per minute (POST /api/guest); 0 = no limit.
    guests_per_minute: Annotated[float, msgspec.Meta(ge=0)] = 30
    secret: bytes | None = None
    allowed_origins: list[str] = []
    event_log_size: Positive = 5000
    send_queue: Positive = 256
    #: Compress HTTP responses (brotli or gzip; never websocket frames).
    compress: bool = True
    #: Seconds of quiet on a table after which its connections get a heartbeat frame (0: none).
    heartbeat: Seconds = 1.5
    hello_timeout: PositiveSeconds = 5
    max_frame: Positive = 4096
    frames_per_second: Rate = 20
    player_frames_per_second: Rate = 40
    limit_min: Positive = 10
    limit_max: Positive = 5000
    pair_min: Positive = 10
    pair_max: Positive = 1000
    round_max: Positive = 20000
    token_ttl: Positive = 30 * 24 * 3600
    #: Addresses (or networks) of the reverse proxies whose X-Forwarded-For is believed;
    #: none by default, so no client can claim another address.
    trusted_proxies: list[str] = []
    #: Seconds a connection has to complete a request's head (request line and headers).
    request_head_timeout: Seconds = 10
    #: Seconds a request's whole body may take to arrive once its head is complete (408).
    request_body_timeout: Seconds = 10
    #: Open connections allowed from one client address (trusted proxies exempt); 0 = no cap.
    connections_per_address: Count = 256
    #: HTTP API requests per client address (``limits`` notation), and Bet Record reads.
    api_rate: str = "50/second"
    bet_record_rate: str = "10/second"
    #: Frames refused for rate in a row before a connection is closed (4029).
    rate_strikes: Positive = 50
    #: Seconds between two ledger audits by an engine (0 = never); a failed audit holds the
    #: tables and turns /readyz red.
    audit_interval: Seconds = 60
    #: The identity the store must carry (``livetable`` prints it at start); empty = take
    #: the store's own. Pinning it keeps a process off a wiped or different store.
    store_id: str = ""
    #: Seconds a closing websocket has to finish its close before its socket is aborted.
    close_timeout: PositiveSeconds = 3
    #: What serves the websockets (``/ws``, ``/ws/dealer``) once uvicorn has read the
    #: upgrade: ``picows``, picows' frame parser under uvicorn's ASGI websocket interface
    #: (server/picows_ws.py), or ``uvicorn``, its websockets-sansio protocol
    #: (server/framed_ws.py): picows takes less memory and CPU a connection
    #: (docs/benchmarks.md, the transport).
    ws_transport: Literal["picows", "uvicorn"] = "picows"
    #: The key that seals engine states at rest (store/sealing.py): LIVETABLE_SHOE_KEY, or
    #: the file LIVETABLE_SHOE_KEY_FILE; else a key generated beside the data directory
    #: (shoe_key_path). Never the signing secret, never in the data directory. One key per
    #: line: the first seals, the others still open (a rotation).
    shoe_key: bytes | None = None
    shoe_key_file: Path | None = None
    #: Table id → the URL of its live video's HLS playlist (``t1=URL,t2=URL``); a table
    #: without one has ``stream: null`` in its snapshot and shows the drawn table only.
    streams: dict[str, str] = {}
    #: A dealer's name → the URL of their photo (``Anna=URL,Bee=URL``): shown at the table
    #: while they deal, once they sign in at the console (docs/dealer.md).
    presenters: dict[str, str] = {}
    #: Who holds the players' money (docs/design.md §5): ``internal`` (this ledger: demo guests,
    #: deposits) or ``seamless`` (the operator's wallet at ``wallet_url``, called per bet
    #: slip and per settled round; livetable holds no balance of its own for a player).
    wallet: Literal["internal", "seamless"] = "internal"
    wallet_url: str | None = None
    #: Signs every wallet call (X-Livetable-Signature); required in seamless mode.
    wallet_secret: bytes | None = None
    #: Seconds one wallet call may take, whole: connecting, sending, the headers and the
    #: body together (a debit gets less if the betting window closes sooner); past it the
    #: outcome is unknown and the debit is rolled back.
    wallet_timeout: PositiveSeconds = 3
    #: Keep-alive HTTP connections to each operator's wallet, at most (per process; made
    #: as calls need them): three quarters for debits and balances, a quarter for the
    #: outbox. Debits in flight are at most their three quarters, so this bounds the
    #: bets a second a wallet can take: 768 debits at 100 ms a call are 7,680 a second;
    #: 64 (the old default) held 500 players × 10 bets at 100 ms to 2,942 of 5,000
    #: (docs/benchmarks.md, "Seamless bets at table speed").
    wallet_connections: Positive = 1024
    #: The longest wait between two deliveries of a credit or rollback (back-off cap, s).
    wallet_retry_max: PositiveSeconds = 30
    #: Checks the operator's signature on POST /api/operator/sessions and the wallet
    #: report; unset = those endpoints answer 404 (no operator integration).
    operator_secret: bytes | None = None
    #: The operator registry (TOML, livetable/operator/registry.py): every operator's
    #: secrets by reference, wallet, currencies and limits; read again on SIGHUP. Unset =
    #: one operator, ``default``, from LIVETABLE_OPERATOR_SECRET (if set).
    operators: Path | None = None
    #: Seconds a launch session's token lives.
    session_ttl: Positive = 8 * 3600
    #: The address players reach this service at (launch URLs start with it); empty = the
    #: address the operator's request came to.
    public_url: str = ""
    #: SQLite ``PRAGMA synchronous`` of the ledger and the wallet log
    #: (store/sqlite/ledger/schema.py).
    sqlite_sync: Literal["NORMAL", "FULL", "EXTRA"] = "NORMAL"
    #: Where the SQLite ledger's writer runs: a child process with its own interpreter
    #: lock (store/sqlite/writer.py), or a thread of the server.
    sqlite_writer: Literal["process", "thread"] = "process"
    #: The directory of the pages (``pip install .`` does not ship ``static/``).
    static: Path = Path(__file__).resolve().parents[2] / "static"

    def __post_init__(self) -> None:
        # The checks that involve more than one field (one field's range is its type's).
        if self.wallet == "seamless" and not (self.wallet_url and self.wallet_secret) \
                and self.operators is None:  # a registry names each operator's wallet
            raise SettingsError("--wallet seamless needs --operators FILE (each operator's "
                                "wallet), or --wallet-url URL and LIVETABLE_WALLET_SECRET")
        for proxy in self.trusted_proxies:  # "*": trusting everyone is never meant
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError as exc:
                raise SettingsError(
                    f"LIVETABLE_TRUSTED_PROXIES must list proxy addresses or networks (e.g. "
                    f"10.0.0.5,10.1.0.0/16), not {self.trusted_proxies}: {exc}") from None
        unknown = sorted(set(self.streams) - set(self.table_names))
        if unknown:
            raise StreamError(f"--stream for {', '.join(unknown)}: no such table (tables: "
                              f"{','.join(self.table_names)})")

    @property
    def db_path(self) -> Path:
        return self.db if self.db is not None else self.data_dir / "livetable.sqlite3"

    @property
    def wallet_db_path(self) -> Path:
        """The seamless wallet's log, a file beside the ledger's (``livetable-wallet.sqlite3``
        by default): with a file of its own it never waits for the ledger's write lock
        (livetable/operator/log_sqlite.py says why)."""
        path = self.db_path
        return path.with_name(f"{path.stem}-wallet{path.suffix}")

    @property
    def table_names(self) -> list[str]:
        return self.table_ids or [f"t{i}" for i in range(1, self.tables + 1)]

    @property
    def seamless(self) -> bool:
        return self.wallet == "seamless"

    @property
    def guests(self) -> bool:
        """Demo guests are on: ``demo``, and never with the seamless wallet (a guest has no
        wallet at the operator)."""
        return self.demo and not self.seamless

    @property
    def secret_path(self) -> Path | None:
        """The file the signing secret is kept in, when it is not LIVETABLE_SECRET."""
        return None if self.secret else self.data_dir / "secret"

    def load_secret(self, create: bool = True) -> bytes:
        """The signing secret: from the settings, else kept in the data directory so that
        tokens survive a restart (and every process sharing the directory agrees)."""
        if self.secret:
            return self.secret
        path = self.data_dir / "secret"
        if path.exists():
            return path.read_bytes().strip()
        if not create:
            raise FileNotFoundError(
                f"no signing secret: set LIVETABLE_SECRET or run where {path} exists")
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # its files are secrets
        value = secrets.token_urlsafe(32).encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(value)
        return value
    @property
    def shoe_key_path(self) -> Path:
        """The shoe key file: LIVETABLE_SHOE_KEY_FILE, else ``shoe.key`` in a directory
        beside the data directory, never inside it (``/var/lib/livetable`` →
        ``/var/lib/livetable-keys/shoe.key``): a copy or backup of the data directory does
        not hold it."""
        if self.shoe_key_file is not None:
            return self.shoe_key_file
        data = self.data_dir.resolve()
        return data.with_name(data.name + "-keys") / "shoe.key"
