#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
[ -f lib/tinyfmt/__init__.py ]
[ "$(cat dist/result.txt)" = "DONE!" ]
