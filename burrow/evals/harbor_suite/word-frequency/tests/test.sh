#!/bin/bash
# Harbor's verifier: the reward is 1 only if every case prints what it should.
out=$(mktemp -d)
fail() { echo "FAIL: $*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
python3 /app/words.py /app/corpus.txt 4 > "$out/got" || fail "words.py exited $?"
# Ties alphabetically: a (3) before fox (3).
printf 'the 6\ndog 4\na 3\nfox 3\n' > "$out/want"
diff "$out/want" "$out/got" || fail "top 4 of corpus.txt"
printf "Don't stop. don't, DON'T! zebra apple apple zebra\n" > "$out/more.txt"
python3 /app/words.py "$out/more.txt" 3 > "$out/got2" || fail "words.py exited $?"
printf "don't 3\napple 2\nzebra 2\n" > "$out/want2"
diff "$out/want2" "$out/got2" || fail "apostrophes and ties"
echo 1 > /logs/verifier/reward.txt
