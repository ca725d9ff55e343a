#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
[ "$(git log --format=%s)" = "initial commit" ]
git ls-files --error-unmatch README.md
