#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
python3 -c "import json; d = json.load(open('people.json')); assert d == [{'name': 'Ada', 'age': 36}, {'name': 'Linus', 'age': 54}], d"
