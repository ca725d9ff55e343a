#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
python3 -m unittest -q test_calc
[ "$(sha256sum test_calc.py | cut -c1-16)" = "feb3a7e974167ac4" ]  # the tests are as they were
