#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
make -s clean && make -s build
[ "$(cat out/app.txt)" = "built" ]
