"""The PostgreSQL store's schema: numbered migrations, each in one transaction.

As the SQLite store's: :data:`MIGRATIONS` is a list applied in order, each number once, and
``schema_version`` records the last one applied — in the same transaction as the migration,
so that a crash leaves a migration either whole or absent. Processes starting together
(two gateways and an engine) take a transaction-scoped advisory lock first: one of them
migrates, the others find the work done.

Amounts are ``bigint``: a balance is at most 2^63 - 1, and every amount a bet or a payout
moves (at most 12 × 10^12) is far inside it.

Why these columns.

* ``fences``: the newest fencing token issued for a table, by the database itself when an
  engine takes the table's lease (a counter that only goes up, where a lease service that
  failed over might count again). A step carrying an older token is refused (steps.py),
  checked in the step's own transaction — the database, not the lease service, judges.
* ``tables.epoch/seq``: the head of the table's event log; a step's first event must be
  the head + 1.
* ``rounds.players/bets/cursor``: settlement goes player by player in the order they first
  bet (``round_players``); ``cursor`` players are done; ``bets`` sizes a chunk's players.
* ``rounds.published``: every result of the round reached the bus (the runner says so once
  it published them all); a takeover publishes again the results of the rounds that did not
  (``PostgresStore.unpublished_rounds``), and the gateways drop what they delivered before.
* ``bets`` has a low fill factor and no index on ``state``: settling a bet then rewrites
  its row in place (a HOT update: no index entry moves), which is most of what settling
  a 100,000-bet round costs.
"""

from __future__ import annotations

from typing import Any

#: A transaction-scoped advisory lock's key: the migrating process holds it.
MIGRATION_LOCK = 0x6C697665  # "live"

MIGRATIONS: list[str] = [
    # 1: the first schema
    """
    CREATE TABLE accounts (
        id text PRIMARY KEY,
        kind text NOT NULL,            -- player, house, hold, external
        name text NOT NULL DEFAULT '',
        balance bigint NOT NULL DEFAULT 0,
        created_at bigint NOT NULL DEFAULT 0
    );
    CREATE TABLE transfers (
        id text PRIMARY KEY,
        debit text NOT NULL,
        credit text NOT NULL,
        amount bigint NOT NULL CHECK (amount > 0),
        kind text NOT NULL,            -- deposit, withdraw, bet, settle, payout, refund
        ref text NOT NULL,
        at bigint NOT NULL
    );
    CREATE TABLE rounds (
        round_id text PRIMARY KEY,
        table_id text NOT NULL,
        shoe_id text NOT NULL,
        round_no integer NOT NULL,
        state text NOT NULL,           -- betting paused closed settling refunding settled cancelled
        closes_at bigint,
        limits text NOT NULL,
        cards text,
        spots text,
        reason text,
        opened_at bigint NOT NULL,
        ended_at bigint,
        players integer NOT NULL DEFAULT 0,
        bets integer NOT NULL DEFAULT 0,
        cursor integer NOT NULL DEFAULT 0
    );
    CREATE INDEX rounds_by_table_state ON rounds (table_id, state);
    CREATE TABLE round_players (
        round_id text NOT NULL,
        n integer NOT NULL,
        player_id text NOT NULL,
        PRIMARY KEY (round_id, n)
    );
    CREATE SEQUENCE slip_seqs;
    CREATE TABLE slips (
        seq bigint PRIMARY KEY,
        player_id text NOT NULL,
        slip_id text,                  -- NULL: a place_bet
        round_id text NOT NULL,
        deducted bigint NOT NULL,
        balance bigint NOT NULL,
        placed_at bigint NOT NULL,
        UNIQUE (player_id, slip_id)
    );
    CREATE SEQUENCE bet_seqs;
    CREATE TABLE bets (
        seq bigint PRIMARY KEY,
        player_id text NOT NULL,
        bet_id text NOT NULL,
        table_id text NOT NULL,
        round_id text NOT NULL,
        spot text NOT NULL,
        amount bigint NOT NULL,
        deducted bigint NOT NULL,
        placed_at bigint NOT NULL,
        balance_at_accept bigint NOT NULL,
        state text NOT NULL,           -- accepted settled refunded
        outcome text,
        odds integer,
        returned bigint,
        settled_at bigint,
        balance_after bigint,
        slip_seq bigint NOT NULL,
        UNIQUE (player_id, bet_id)
    ) WITH (fillfactor = 50);
    CREATE INDEX bets_by_round ON bets (round_id, player_id, seq);
    CREATE INDEX bets_by_player ON bets (player_id, seq);
    CREATE INDEX bets_by_slip ON bets (slip_seq);
    CREATE TABLE tables (
        table_id text PRIMARY KEY,
        state bytea NOT NULL,
        epoch bigint NOT NULL,
        seq bigint NOT NULL
    );
    -- the newest fencing token issued for a table (PostgresStore.claim)
    CREATE TABLE fences (
        table_id text PRIMARY KEY,
        token bigint NOT NULL
    );
    CREATE TABLE events (
        table_id text NOT NULL,
        epoch bigint NOT NULL,
        seq bigint NOT NULL,
        frame bytea NOT NULL,
        PRIMARY KEY (table_id, epoch, seq)
    );
    CREATE TABLE shoes (
        shoe_id text PRIMARY KEY,
        table_id text NOT NULL,
        commitment text NOT NULL,
        salt text NOT NULL,
        cut_at integer NOT NULL,
        burn_card text NOT NULL,
        burned integer NOT NULL,
        card_order text NOT NULL,      -- JSON list of the 416 cards
        rounds text NOT NULL,          -- JSON [[round_id, cards taken], ...]
        ended_at bigint NOT NULL
    );
    CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);
    INSERT INTO accounts (id, kind, name) VALUES ('house', 'house', 'House');
    INSERT INTO accounts (id, kind, name) VALUES ('external', 'external', 'Deposits');
    """,
    # 2: the wallet log (operator/log_postgres.py; the columns of operator/log_sqlite.py's
    # SQLite table, and ``n`` for the order calls were written in)
    """
    CREATE TABLE wallet_calls (
        n bigserial NOT NULL,
        tx_id text PRIMARY KEY,
        method text NOT NULL,
        player_id text NOT NULL,
        currency text NOT NULL,
        table_id text NOT NULL,
        round_id text NOT NULL,
        amount bigint NOT NULL,
        body bytea NOT NULL,
        state text NOT NULL,
        answer text,
        attempts integer NOT NULL DEFAULT 0,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        slip_key text,
        deadline bigint NOT NULL DEFAULT 0,
        closed_by text,
        next_at bigint NOT NULL DEFAULT 0,
        debits text NOT NULL DEFAULT ''
    );
    CREATE UNIQUE INDEX wallet_slips ON wallet_calls (player_id, slip_key)
        WHERE method = 'debit';
    CREATE INDEX wallet_open ON wallet_calls (created_at)
        WHERE method = 'debit' AND closed_by IS NULL;
    CREATE INDEX wallet_due ON wallet_calls (next_at) WHERE state = 'queued';
    CREATE INDEX wallet_rounds ON wallet_calls (round_id, player_id);
    CREATE INDEX wallet_players ON wallet_calls (player_id, created_at);
    """,
    # 3: the table's public snapshot beside its sealed state: what a gateway catches up
    # from (it holds no shoe key: PostgresStore.load_snapshot)
    """
    ALTER TABLE tables ADD COLUMN snapshot bytea;
    """,
    # 4: operators' sessions (betting/sessions.py), the SQLite ledger's columns: every
    # gateway reads the same row, counts into it and ends it once (sessions.py)
    """
    CREATE TABLE sessions (
        session_id text PRIMARY KEY,
        operator text NOT NULL,
        player_id text NOT NULL,
        started_at bigint NOT NULL,
        expires_at bigint NOT NULL,
        limits text NOT NULL,          -- JSON: SessionLimits
        staked bigint NOT NULL DEFAULT 0,
        returned bigint NOT NULL DEFAULT 0,
        round_id text,                 -- the round last staked in, and what it took
        round_staked bigint NOT NULL DEFAULT 0,
        checked_at bigint NOT NULL DEFAULT 0,
        ended_at bigint,
        reason text
    );
    CREATE INDEX sessions_by_expiry ON sessions (expires_at);
    """,
    # 5: the launches' request ids, each used once (operator/launches.py): in the store,
    # so that a captured launch replayed after a restart is refused as before it
    """
    CREATE TABLE launch_requests (
        operator text NOT NULL,
        request_id text NOT NULL,
        kept_until bigint NOT NULL,    -- epoch ms: past any replay its timestamp allows
        PRIMARY KEY (operator, request_id)
    );
    CREATE INDEX launch_requests_by_expiry ON launch_requests (kept_until);
    """,
    # 6: a batch of slips commits by its answer deadline or not at all (slips.py,
    # ``livetable.answer_by``, set by the batch's first statement on the server's clock):
    # checked at COMMIT, after a commit held by a stalled network arrives late
    """
    CREATE FUNCTION livetable_answer_by() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        answer_by text := current_setting('livetable.answer_by', true);
    BEGIN
        IF answer_by IS NOT NULL AND answer_by <> ''
                AND extract(epoch FROM clock_timestamp()) * 1000 > answer_by::bigint THEN
            RAISE EXCEPTION 'slips reached their commit after their answer deadline'
                USING ERRCODE = '57014';
        END IF;
        RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER slips_answered_in_time AFTER UPDATE ON rounds
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION livetable_answer_by();
    """,
    # 7: whether every result of an ended round is known to have reached the bus (the
    # outbox's mark, host/runner.py): the rounds before it were, and a new round is not
    # until its engine says so; a takeover publishes again those that are not
    """
    ALTER TABLE rounds ADD COLUMN published boolean NOT NULL DEFAULT true;
    ALTER TABLE rounds ALTER COLUMN published SET DEFAULT false;
    CREATE INDEX rounds_unpublished ON rounds (table_id, opened_at) WHERE NOT published;
    """,
    # 8: tips to the dealer (betting/tips.py), the SQLite ledger's columns: each once by
    # (player, tip_id), its money moved player -> the house's tip account in one transfer
    """
    CREATE TABLE tips (
        seq bigserial PRIMARY KEY,
        player_id text NOT NULL,
        tip_id text NOT NULL,
        table_id text NOT NULL,
        round_id text,                 -- the round in play at the table, if any
        amount bigint NOT NULL CHECK (amount > 0),
        balance_after bigint NOT NULL,
        placed_at bigint NOT NULL,
        UNIQUE (player_id, tip_id)
    );
    CREATE INDEX tips_by_player ON tips (player_id, placed_at);
    INSERT INTO accounts (id, kind, name) VALUES ('tips:house', 'tips', 'Tips to dealers');
    """,
    # 9: the wallet log's sweeper (operator/seamless.py) reads four times a second: the
    # pending debits by deadline (it scanned every debit ever made) and the open debits by
    # round (it read every open debit of the round in play, thousands at the close of
    # betting, to find that the round had not ended)
    """
    DROP INDEX wallet_open;
    CREATE INDEX wallet_open_rounds ON wallet_calls (round_id, state, created_at)
        WHERE method = 'debit' AND closed_by IS NULL;
    CREATE INDEX wallet_pending ON wallet_calls (deadline)
        WHERE method = 'debit' AND state = 'pending';
    """,
]


async def migrate(con: Any, schema: str | None = None) -> int:
    """Bring the database (``schema``, if given) to the last migration; the version."""
    async with con.transaction():
        await con.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        if schema is not None:
            await con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        await con.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
        version = await con.fetchval("SELECT max(version) FROM schema_version") or 0
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        async with con.transaction():
            await con.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            done = await con.fetchval("SELECT max(version) FROM schema_version") or 0
            if done >= number:
                continue  # another process applied it meanwhile
            await con.execute(script)
            await con.execute("INSERT INTO schema_version (version) VALUES ($1)", number)
    return len(MIGRATIONS)
