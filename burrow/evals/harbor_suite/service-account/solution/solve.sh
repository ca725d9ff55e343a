#!/bin/bash
set -e
cd /srv/reports
sqlite3 -csv -header sales.db \
  "SELECT region, SUM(amount) AS total FROM sales GROUP BY region ORDER BY total DESC" \
  > summary.csv
chown reporter:reporter summary.csv
chmod 600 summary.csv
