#!/usr/bin/env bash
# Write random PostgreSQL and Redis passwords into .env beside docker-compose.yml (readable by its owner only), unless
# it already sets them. docker-compose reads .env by itself and refuses to start without both.
set -euo pipefail
cd "$(dirname "$0")/.."
umask 077
touch .env
for name in POSTGRES_PASSWORD REDIS_PASSWORD; do
  if ! grep -q "^${name}=" .env; then
    echo "${name}=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')" >> .env
    echo "wrote ${name} to .env"
  fi
done
chmod 600 .env
