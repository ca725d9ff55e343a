#!/bin/bash
set -e
cd /app
tree -a --noreport project > LAYOUT.txt
