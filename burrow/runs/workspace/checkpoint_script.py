"""The shell script that drives a workspace's checkpoint store with git, inside the sandbox.

Its operations (take, list, tree, diff, restore, prune, export, import, revert) are called
by checkpoints.py, one at a time per store; exit 3 means "no such checkpoint", 4 "no such
path".
"""

# One script, run with `sh -c SCRIPT sh <workspace> <max KiB> <op> <args...>`.
SCRIPT = r"""
set -eu
ws=$1 maxk=$2 op=$3; shift 3
export GIT_DIR="$ws/.burrow/checkpoints" GIT_WORK_TREE="$ws"
export GIT_INDEX_FILE="$GIT_DIR/index"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0 LC_ALL=C
export GIT_AUTHOR_NAME=Burrow GIT_AUTHOR_EMAIL=burrow@localhost
export GIT_COMMITTER_NAME=Burrow GIT_COMMITTER_EMAIL=burrow@localhost
export GIT_LITERAL_PATHSPECS=1
# Code in the sandbox can write the store: its hooks and config never run or count.
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/dev/null
cd "$ws"
# Operations on one store run one at a time (Checkpoints' lock): a lock file is what a git
# killed mid-way (a server killed, a timeout) left, and would refuse every later one.
rm -f "$GIT_DIR/index.lock"
if [ -f "$GIT_DIR/HEAD" ]; then
  printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n' > "$GIT_DIR/config"
fi
store() {
  if [ ! -f "$GIT_DIR/HEAD" ]; then
    mkdir -p "$GIT_DIR" && git init -q && printf '*\n' > "$GIT_DIR/.gitignore"
  fi
}
# The store's size is kept in a file: added to by each checkpoint, measured after a prune
# (counting objects stats every one of them, too slow for each run's start).
stored() {  # the bytes the store takes, as last known
  n=$(cat "$GIT_DIR/size" 2>/dev/null || true)
  case $n in ''|*[!0-9]*) echo 0 ;; *) echo "$n" ;; esac
}
measure() {  # what the store's objects take on disk, recorded
  git count-objects -v | awk '/^size(-pack)?:/ {s += $2} END {print s * 1024}' > "$GIT_DIR/size"
  stored
}
added() {  # $1 a tree: the bytes on disk of what changed since the newest checkpoint
  prev=$(git for-each-ref --sort=-refname --count=1 --format='%(objectname)' refs/checkpoints/)
  git diff-tree -r --no-renames "${prev:-4b825dc642cb6eb9a060e54bf8d69288fbee4904}" "$1" \
    | awk '$5 != "D" {print $4}' | git cat-file --batch-check='%(objectsize:disk)' \
    | awk '$2 != "missing" {s += $1} END {print s + 0}'
}
snapshot() {
  store
  : > "$GIT_DIR/skipped"
  find . -mindepth 1 \( -path ./.burrow/outputs -o -path ./.burrow/services \
      -o -path ./.burrow/services.json -o -path ./.burrow/checkpoints -o -name .git \) -prune \
    -o -type f -size +"$maxk"k -fprintf "$GIT_DIR/skipped" '%P\0' \
    -o \( -type f -o -type l \) -printf '%P\0' \
    | git update-index --add --remove --replace -z --stdin
  git ls-files -z --deleted | git update-index --remove -z --stdin
  git update-index --force-remove -z --stdin < "$GIT_DIR/skipped"
  git write-tree
}
commit() {  # $1 id, $2 subject (time and run); the subject gains the bytes it added
  tree=$(snapshot)
  bytes=$(added "$tree")
  c=$(printf '%s %s\n' "$2" "$bytes" | git commit-tree "$tree")
  git update-ref "refs/checkpoints/$1" "$c"
  echo $(( $(stored) + bytes )) > "$GIT_DIR/size"
}
case $op in
  take)  # then what pruning needs: the store's bytes, and the checkpoints
    commit "$1" "$2"
    stored
    git for-each-ref --format='%(refname:lstrip=2) %(subject)' refs/checkpoints/ ;;
  list)
    [ -f "$GIT_DIR/HEAD" ] || exit 0
    git for-each-ref --format='%(refname:lstrip=2) %(subject)' refs/checkpoints/ ;;
  tree)  # $1 a checkpoint id, or "now" for the workspace as it is
    if [ "$1" = now ]; then snapshot
    else git rev-parse -q --verify "refs/checkpoints/$1^{tree}" || exit 3; fi ;;
  diff)  # $1 from tree, $2 to tree, $3 raw|numstat|patch|skipped
    a=$1 b=$2
    case $3 in
      raw) git diff-tree -r -z --no-renames "$a" "$b" ;;
      numstat) git diff-tree -r -z --no-renames --numstat "$a" "$b" ;;
      patch) git diff-tree -r -p --no-renames --no-color "$a" "$b" ;;
      skipped) cat "$GIT_DIR/skipped" ;;
    esac ;;
  restore)  # $1 target id, $2 undo id, $3 undo subject
    git rev-parse -q --verify "refs/checkpoints/$1^{tree}" >/dev/null || exit 3
    commit "$2" "$3" >/dev/null
    git read-tree --reset -u "refs/checkpoints/$1^{tree}" ;;
  prune)  # the ids to drop; their objects no other checkpoint holds go too
    for id; do git update-ref -d "refs/checkpoints/$id"; done
    git prune --expire=now
    measure ;;
  export)  # $1 a checkpoint id or "now", $2 a bundle file to write with its commit
    if [ "$1" = now ]; then c=$(printf 'fork\n' | git commit-tree "$(snapshot)")
    else c=$(git rev-parse -q --verify "refs/checkpoints/$1^{commit}") || exit 3; fi
    git update-ref refs/export "$c"
    # No delta search and light compression: the bundle is read once, at once; searching
    # deltas among thousands of loose objects costs seconds and saves little.
    git -c pack.window=0 -c pack.compression=1 bundle create -q "$2" refs/export
    git update-ref -d refs/export ;;
  import)  # $1 a bundle from export, $2 id, $3 subject: a checkpoint, and the workspace
    store
    c=$(git bundle unbundle "$1" | cut -d' ' -f1)
    rm -f "$1"
    tree=$(git rev-parse "$c^{tree}")
    n=$(printf '%s %s\n' "$3" "$(measure)" | git commit-tree "$tree")
    git update-ref "refs/checkpoints/$2" "$n"
    git read-tree --reset -u "$tree" ;;
  revert)  # $1 target id, $2 undo id, $3 undo subject, $4 path
    git rev-parse -q --verify "refs/checkpoints/$1^{tree}" >/dev/null || exit 3
    commit "$2" "$3" >/dev/null
    if [ -n "$(git ls-tree -r --name-only "refs/checkpoints/$1" -- "$4")" ]; then
      git checkout -q "refs/checkpoints/$1" -- "$4" && echo restored
    elif [ -n "$(git ls-files -- "$4")" ]; then
      git rm -r -q -f -- "$4" && echo deleted
    else
      exit 4
    fi ;;
esac
"""
