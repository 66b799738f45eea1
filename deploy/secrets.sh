#!/usr/bin/env sh
# Writes the secrets deploy/compose.yaml reads, once (an existing file is kept): the key that
# digests and seals codes, the operator token, PostgreSQL's password and the URL that carries it.
set -eu
cd "$(dirname "$0")"
# The directory is the owner's alone; the files are readable by the containers' non-root
# users, to which they are mounted one by one.
mkdir -p secrets
chmod 700 secrets
umask 022
keep() { [ -s "secrets/$1" ] || printf '%s' "$2" >"secrets/$1"; }
keep vcode_secret_key "$(openssl rand -hex 32)"
keep vcode_admin_token "$(openssl rand -hex 24)"
keep postgres_password "$(openssl rand -hex 24)"
keep vcode_database_url "postgres://vcode:$(cat secrets/postgres_password)@postgres:5432/vcode"
echo "secrets in $(pwd)/secrets"
