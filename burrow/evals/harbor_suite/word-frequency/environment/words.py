"""Print the N most frequent words of a file: `python3 words.py FILE N`."""

import sys
from collections import Counter


def top_words(text, n):
    counts = Counter(text.split())
    return counts.most_common(n)


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    with open(path, encoding="utf-8") as f:
        for word, count in top_words(f.read(), n):
            print(word, count)


if __name__ == "__main__":
    main()
