#!/usr/bin/env bash
# The dashboard's real-browser test (registered as CTest `web_browser`).
#   run.sh SWEPT_BINARY WORK_DIR SOURCE_DIR
# Installs what it needs itself: Debian's chromium (when missing and root) and
# playwright-core from npm (`npm ci` with the committed lock file, into
# WORK_DIR, never into the source tree). Exits 77 (CTest: skipped) with a
# message ONLY when the browser or its driver cannot be installed; any failure
# of the dashboard itself is exit 1.
set -euo pipefail
swept=$1
work=$2
src=$3
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIPPED: $*" >&2; exit 77; }

if [[ ! -x /usr/bin/chromium ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "browser test: installing Debian's chromium" >&2
    { apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; } ||
      skip "chromium is not installed and 'apt-get install chromium' failed; run scripts/install-deps.sh"
  else
    skip "chromium is not installed (/usr/bin/chromium) and this user cannot install it; run scripts/install-deps.sh"
  fi
fi
command -v node >/dev/null && command -v npm >/dev/null ||
  skip "node/npm are missing, so playwright-core cannot be installed; run scripts/install-deps.sh"

mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$here/browser_test.mjs" "$work/"
if [[ ! -f "$work/node_modules/playwright-core/package.json" ]] ||
   ! cmp -s "$here/package-lock.json" "$work/node_modules/.package-lock.json.installed" 2>/dev/null; then
  (cd "$work" && npm ci --no-audit --no-fund --ignore-scripts >npm-ci.log 2>&1) ||
    skip "npm ci could not install playwright-core (see $work/npm-ci.log): no access to the npm registry?"
  cp "$here/package-lock.json" "$work/node_modules/.package-lock.json.installed"
fi
command -v sqlite3 >/dev/null || { echo "browser test: the sqlite3 command is missing; run scripts/install-deps.sh" >&2; exit 1; }
cd "$work"
exec node browser_test.mjs "$swept" "$work" "$src/store/schema.sql"
