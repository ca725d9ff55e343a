#!/bin/bash
# Exit 0 when the task is done (run in /workspace after the run).
set -euo pipefail
cd /workspace
! grep -rn "old_name" --include=*.py . || exit 1
python3 -c "from shop.orders import order_total; from shop.cart import cart_total; assert order_total() == 6 and cart_total() == 10"
