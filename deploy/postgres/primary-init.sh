#!/bin/bash
# Run once by the postgres image's entrypoint when the primary's data directory is new
# (deploy/docker-compose.yml). The standby copies the primary with pg_basebackup
# as the livetable user: let it replicate. Synchronous replication is written to
# postgresql.auto.conf here, so that it holds from the server's first real start (not for
# the image's own initialisation, which would wait for a standby that cannot exist yet).
set -euo pipefail
echo "host replication livetable all scram-sha-256" >> "$PGDATA/pg_hba.conf"
psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d "$POSTGRES_DB" <<'SQL'
ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (*)';
ALTER SYSTEM SET synchronous_commit = 'on';
SQL
