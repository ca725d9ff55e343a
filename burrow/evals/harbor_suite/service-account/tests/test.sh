#!/bin/bash
fail() { echo "FAIL: $*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
file=/srv/reports/summary.csv
[ -f "$file" ] || fail "no $file"
want=$'region,total\nwest,310\neast,205\nsouth,175\nnorth,165'
[ "$(tr -d '\r' < "$file")" = "$want" ] || fail "summary.csv is not the totals: $(cat "$file")"
[ "$(stat -c '%U:%G %a' "$file")" = "reporter:reporter 600" ] || fail "owner/mode: $(stat -c '%U:%G %a' "$file")"
# The data was not rewritten to fit: the totals still come from the table.
[ "$(sqlite3 /srv/reports/sales.db 'select sum(amount) from sales')" = 855 ] || fail "sales changed"
echo 1 > /logs/verifier/reward.txt
