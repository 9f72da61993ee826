#!/bin/sh
# Render livetable's Redis ACL file from its template, with password hashes from the
# environment (never from the repository):
#
#     LIVETABLE_REDIS_PASSWORD=... sh deploy/redis-acl.sh TEMPLATE OUTPUT
#
#   LIVETABLE_REDIS_PASSWORD           required, at least 32 characters: the `livetable` user
#   LIVETABLE_REDIS_PASSWORD_PREVIOUS  optional: also accepted, while a rotation is under way
#   LIVETABLE_REDIS_ADMIN_PASSWORD     optional: turns the operators' `admin` user on
#
# The file holds SHA-256 hashes only ("#<hex>" in ACL terms), is written with mode 0600, and
# Redis loads it at start (`aclfile` in redis.conf). POSIX sh, sed and sha256sum: the
# redis:alpine image (busybox) and a Debian host both have them. Used by
# deploy/docker-compose.yml, the Kubernetes StatefulSet redis (a copy in its ConfigMap) and
# tests/integration/test_deploy_redis_acl.py.
set -eu

if [ "$#" -ne 2 ]; then
  echo "usage: redis-acl.sh TEMPLATE OUTPUT" >&2
  exit 2
fi
template=$1
output=$2

check() {  # name value
  case $2 in
    *[!A-Za-z0-9._~-]*)
      echo "redis-acl.sh: $1 may hold only A-Z a-z 0-9 . _ ~ - (it goes into a redis:// URL" \
           "unescaped); make one with: python3 -c 'import secrets; print(secrets.token_hex(32))'" >&2
      exit 1 ;;
  esac
  if [ "${#2}" -lt 32 ]; then
    echo "redis-acl.sh: $1 is shorter than 32 characters" >&2
    exit 1
  fi
}

sha256() { printf '%s' "$1" | sha256sum | cut -d ' ' -f 1; }

if [ -z "${LIVETABLE_REDIS_PASSWORD:-}" ]; then
  echo "redis-acl.sh: LIVETABLE_REDIS_PASSWORD is not set" >&2
  exit 1
fi
check LIVETABLE_REDIS_PASSWORD "$LIVETABLE_REDIS_PASSWORD"
passwords="#$(sha256 "$LIVETABLE_REDIS_PASSWORD")"
if [ -n "${LIVETABLE_REDIS_PASSWORD_PREVIOUS:-}" ]; then
  check LIVETABLE_REDIS_PASSWORD_PREVIOUS "$LIVETABLE_REDIS_PASSWORD_PREVIOUS"
  passwords="$passwords #$(sha256 "$LIVETABLE_REDIS_PASSWORD_PREVIOUS")"
fi
admin=off
if [ -n "${LIVETABLE_REDIS_ADMIN_PASSWORD:-}" ]; then
  check LIVETABLE_REDIS_ADMIN_PASSWORD "$LIVETABLE_REDIS_ADMIN_PASSWORD"
  if [ "$LIVETABLE_REDIS_ADMIN_PASSWORD" = "$LIVETABLE_REDIS_PASSWORD" ]; then
    echo "redis-acl.sh: the admin password must differ from livetable's" >&2
    exit 1
  fi
  admin="on #$(sha256 "$LIVETABLE_REDIS_ADMIN_PASSWORD")"
fi

umask 077
sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' \
    -e "s/@LIVETABLE_PASSWORDS@/$passwords/" -e "s/@ADMIN_STATE@/$admin/" \
    "$template" > "$output.tmp"
if grep -q '@[A-Z_]*@' "$output.tmp"; then
  echo "redis-acl.sh: $template has a placeholder this script does not fill" >&2
  rm -f "$output.tmp"
  exit 1
fi
mv "$output.tmp" "$output"
