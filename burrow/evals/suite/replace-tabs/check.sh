#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
! grep -qP "\t" main.py || exit 1
python3 main.py | grep -qx 7
