#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
[ -z "$(find tmp -name '*.log')" ]
[ -f tmp/keep.txt ] && [ -f tmp/a/notes.md ]
