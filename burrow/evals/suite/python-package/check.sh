#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
python3 -c "from geometry.shapes import area_of_circle; import math; assert abs(area_of_circle(2) - 4 * math.pi) < 1e-9"
[ -f tests/test_shapes.py ]
