#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
grep -qx "port = 9000" config.ini
grep -qx "host = 0.0.0.0" config.ini
! grep -q 8000 config.ini || exit 1
