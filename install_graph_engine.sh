#!/usr/bin/env bash
# Placeholder: the installer (layout detection, backup, manifest, verification, uninstall) is not built yet.
# It refuses to run rather than half-install anything.
echo "$(basename "$0"): not available in this version; nothing was changed." >&2
exit 2
