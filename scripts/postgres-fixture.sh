#!/usr/bin/env bash
# Writes the PostgreSQL schema a given commit of vcode leaves, as one SQL file the upgrade test
# applies to a new database: that commit's migrations in order, its functions (functions.sql,
# where it has one) and its version records. No build of the old commit: the SQL is what its
# store ran.
#   scripts/postgres-fixture.sh b160ff0 > tests/api/fixtures/postgres_b160ff0.sql
set -euo pipefail
commit=${1:?usage: scripts/postgres-fixture.sh <commit>}
cd "$(dirname "$0")/.."
dir=src/store/postgres
echo "-- The PostgreSQL schema vcode $(git rev-parse --short "$commit") leaves (scripts/postgres-fixture.sh $commit)."
echo "CREATE TABLE vcode_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());"
for file in $(git ls-tree --name-only "$commit" "$dir/migrations/" | sort); do
  version=$((10#$(basename "$file" | cut -c1-4)))
  echo "-- $file"
  git show "$commit:$file"
  echo
  echo "INSERT INTO vcode_migrations (version) VALUES ($version);"
done
if git cat-file -e "$commit:$dir/functions.sql" 2>/dev/null; then
  echo "-- $dir/functions.sql"
  git show "$commit:$dir/functions.sql"
fi
