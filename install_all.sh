#!/usr/bin/env bash
# Layer runner: checks every layer of the Agent-Zero stack this pack works with and installs the ones it
# ships.  The "HTN Plan Templates" layer of earlier stacks is replaced by "Graph Workflow Engine".
#   ./install_all.sh [--a0-root DIR] [--layer NAME] [--check-only] [--yes] [--dry-run]
# Safe to re-run: an installed, intact layer is reported and left alone.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="/a0"; only=""; check_only=0; pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --a0-root) root="${2:?--a0-root needs a folder}"; shift 2 ;;
    --layer) only="${2:?--layer needs a name}"; shift 2 ;;
    --check-only) check_only=1; shift ;;
    --yes|--dry-run|--plugin) pass+=("$1"); shift ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install_all.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
  green=$'\e[32m'; yellow=$'\e[33m'; red=$'\e[31m'; bold=$'\e[1m'; off=$'\e[0m'
else
  green=""; yellow=""; red=""; bold=""; off=""
fi
ok()   { printf '%s[ ok ]%s %s\n' "$green" "$off" "$*"; }
warn() { printf '%s[warn]%s %s\n' "$yellow" "$off" "$*"; }
fail() { printf '%s[fail]%s %s\n' "$red" "$off" "$*"; }
head_() { printf '%s== %s ==%s\n' "$bold" "$*" "$off"; }

# Layers, in load order.  name|slug|hook file that shows it is present|how it is installed
layers=(
  "Belief State Tracker|belief-state-tracker|before_main_llm_call/_11_*.py|external"
  "Org Kernel|org-kernel|before_main_llm_call/_12_*.py|external"
  "Graph Workflow Engine|graph-workflow-engine|before_main_llm_call/_15_htn_plan_selector.py|install_graph_engine.sh"
)

slug() { printf '%s' "$1" | tr '[:upper:] ' '[:lower:]-'; }
if [ -n "$only" ]; then
  case "$(slug "$only")" in
    htn-plan-templates|htn) echo "The HTN Plan Templates layer is replaced by Graph Workflow Engine; running that."
                            only="graph-workflow-engine" ;;
  esac
fi

present() {  # is a file matching the pattern in any extension folder of the tree?
  local pattern="$1" base
  for base in "$root/python/extensions" "$root/extensions/python" "$root/usr/extensions/python" \
              "$root"/usr/plugins/*/extensions/python; do
    compgen -G "$base/$pattern" >/dev/null 2>&1 && return 0
  done
  return 1
}

status=0; matched=0
for entry in "${layers[@]}"; do
  IFS='|' read -r name id marker how <<<"$entry"
  if [ -n "$only" ] && [ "$(slug "$only")" != "$id" ]; then continue; fi
  matched=1
  head_ "$name"
  if [ "$how" = "external" ]; then
    if present "$marker"; then ok "$name is present"
    else warn "$name is not installed ($marker not found); it comes from its own pack, the engine works without it"; fi
    continue
  fi
  if bash "$here/$how" --a0-root "$root" --check ${pass[@]+"${pass[@]}"} | sed 's/^/       /'; then
    ok "$name is installed and intact"
    continue
  fi
  if [ "$check_only" -eq 1 ]; then warn "$name needs installing (run without --check-only)"; status=1; continue; fi
  if bash "$here/$how" --a0-root "$root" ${pass[@]+"${pass[@]}"} | sed 's/^/       /'; then
    ok "$name done"
  else
    fail "$name failed (see above); the other layers were not affected"; status=1
  fi
done
if [ "$matched" -eq 0 ]; then fail "no layer called '$only' (layers: belief-state-tracker, org-kernel, graph-workflow-engine)"; exit 2; fi
exit "$status"
