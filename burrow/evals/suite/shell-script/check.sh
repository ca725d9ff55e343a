#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
[ -x count.sh ]
printf 'a\nb\nc\n' > /tmp/three.txt
[ "$(./count.sh /tmp/three.txt)" = "3" ]
