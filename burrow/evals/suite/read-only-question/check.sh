#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
[ "$(sha256sum data.txt | cut -c1-16)" = "c45d3a272228cc54" ]
[ ! -e answer.txt ]
