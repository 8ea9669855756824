#!/usr/bin/env bash
# The system packages labbot uses, installed when missing (Debian/Ubuntu, as root; otherwise the command to run is
# printed). Each line: the command that must be on PATH, then the Debian package that brings it.
#   rg    ripgrep     the codebase MCP server's fast search (without it, a slower RE2 walk in Python)
#   bwrap bubblewrap  the sealed eval sandboxes (Linux namespaces: no network, no git history, a private /tmp)
# With --warn-unless-ci a package that cannot be installed only warns (the tests that need it say so), unless
# CI=true, where it fails.
set -euo pipefail
warn_only=0
[ "${1:-}" = "--warn-unless-ci" ] && [ "${CI:-}" != "true" ] && warn_only=1

missing=()
while read -r cmd pkg; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done <<'LIST'
rg ripgrep
bwrap bubblewrap
LIST

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "system packages: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
        exit 0
    fi
    echo "system packages: apt-get could not install ${missing[*]}" >&2
else
    echo "system packages: missing ${missing[*]}; install them with: sudo apt-get install ${missing[*]}" >&2
fi
[ "$warn_only" = 1 ] && { echo "system packages: going on without them (what needs them says so; the tests that do are skipped)" >&2; exit 0; }
exit 1
