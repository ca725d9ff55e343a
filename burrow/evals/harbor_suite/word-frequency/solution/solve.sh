#!/bin/bash
set -e
cat > /app/words.py <<'PY'
"""Print the N most frequent words of a file: `python3 words.py FILE N`."""

import string
import sys
from collections import Counter

PUNCTUATION = string.punctuation + "“”‘’"


def top_words(text, n):
    words = (w.strip(PUNCTUATION).lower() for w in text.split())
    counts = Counter(w for w in words if w)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    with open(path, encoding="utf-8") as f:
        for word, count in top_words(f.read(), n):
            print(word, count)


if __name__ == "__main__":
    main()
PY
