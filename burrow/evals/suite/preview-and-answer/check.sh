#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
python3 -c "import urllib.request as u; b = u.urlopen('http://127.0.0.1:8000/', timeout=5).read().decode(); assert 'pong' in b, b"
