#!/bin/bash
fail() { echo "FAIL: $*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
command -v tree > /dev/null || fail "tree is not installed"
[ -f /app/LAYOUT.txt ] || fail "no /app/LAYOUT.txt"
cd /app
diff <(tree -a --noreport project) LAYOUT.txt || diff <(tree -a --noreport /app/project) LAYOUT.txt \
  || fail "LAYOUT.txt is not tree's layout of project"
grep -q helpers.py LAYOUT.txt || fail "the layout misses src/util/helpers.py"
echo 1 > /logs/verifier/reward.txt
