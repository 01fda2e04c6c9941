#!/usr/bin/env bash
# Install the graph workflow engine into an Agent-Zero tree (both layouts), with backup, manifest,
# verification, --dry-run and --uninstall.  Run inside the container (or point --a0-root at a copy).
#   ./install_graph_engine.sh [--a0-root DIR] [--dry-run] [--uninstall] [--yes] [--plugin]
#                             [--without-optional] [--python PATH] [--check] [--self-test]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${GRAPH_ENGINE_INSTALL_PYTHON:-}"
if [ -z "$py" ]; then
  for candidate in /opt/venv-a0/bin/python python3 python; do
    if command -v "$candidate" >/dev/null 2>&1; then py="$candidate"; break; fi
  done
fi
if [ -z "$py" ]; then
  echo "install_graph_engine.sh: no Python found (looked for /opt/venv-a0/bin/python, python3, python); nothing was changed" >&2
  exit 2
fi
exec "$py" -B "$here/extensions/graph_engine/tools/installer.py" "$@"
