#!/bin/bash
# The standby's entrypoint (deploy/docker-compose.yml): on first start, copy the
# primary with pg_basebackup -R (it writes standby.signal and primary_conninfo), then run
# the postgres image's own entrypoint, which starts the server as a streaming standby.
set -euo pipefail
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA"
  chown postgres:postgres "$PGDATA"
  chmod 700 "$PGDATA"
  until gosu postgres pg_basebackup -h "$PRIMARY_HOST" -U "$POSTGRES_USER" -D "$PGDATA" \
      -R -X stream -c fast; do
    echo "standby: waiting for the primary at $PRIMARY_HOST" >&2
    rm -rf "${PGDATA:?}"/*
    sleep 2
  done
fi
exec docker-entrypoint.sh "$@"
