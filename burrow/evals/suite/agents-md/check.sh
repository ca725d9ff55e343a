#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
python3 -c "import app; assert app.greet('Ada') == 'Hello, Ada'"
grep -q '"""' app.py
