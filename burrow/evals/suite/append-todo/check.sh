#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
tail -2 TODO.md | diff - <(printf -- '- [ ] write docs\n- [ ] release\n')
head -1 TODO.md | grep -q "# TODO"
