#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
python3 -c "assert open('greetings.txt', encoding='utf-8').read().split() == ['Grüße', 'こんにちは', 'Привет']"
