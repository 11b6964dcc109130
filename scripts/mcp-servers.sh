#!/usr/bin/env bash
# Installs the real MCP servers the tests and the MCP example use, pinned, into
# ~/.cache/toolplan/mcp-servers (npm: server-everything, server-filesystem, server-memory; PyPI:
# mcp-server-time in a virtualenv; the MCP inspector CLI and the Python `mcp` client for driving
# toolplan's own server). Idempotent: does nothing when the pinned versions are there.
# Needs node/npm and python3 (installed with apt-get when missing and running as root).
#
#   bash scripts/mcp-servers.sh        # prints the directory
set -euo pipefail

dir="${TOOLPLAN_MCP_DIR:-$HOME/.cache/toolplan/mcp-servers}"
npm_pkgs=(
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@modelcontextprotocol/inspector@0.15.0"
)
pip_pkgs=("mcp-server-time==2026.10.19" "mcp==2.3.0")
stamp="$dir/.installed-$(printf '%s ' "${npm_pkgs[@]}" "${pip_pkgs[@]}" | sha256sum | cut -c1-16)"
if [ -f "$stamp" ]; then
  echo "$dir"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
command -v npm >/dev/null 2>&1 || { echo "mcp-servers: npm is needed (apt-get install -y nodejs npm)" >&2; exit 1; }

mkdir -p "$dir"
echo "mcp-servers: installing ${npm_pkgs[*]} into $dir" >&2
(cd "$dir" && [ -f package.json ] || echo '{"name": "toolplan-mcp-servers", "private": true}' > "$dir/package.json")
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${npm_pkgs[@]}" >&2
echo "mcp-servers: installing ${pip_pkgs[*]} into $dir/venv" >&2
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install -q "${pip_pkgs[@]}" >&2
rm -f "$dir"/.installed-*
touch "$stamp"
echo "$dir"
