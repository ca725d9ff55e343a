#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
[ "$(cat summary.txt)" = "logs read: 8" ]
