"""The shell script that drives a workspace's checkpoint store with git, inside the sandbox.

Its operations (take, take-changed, seal, list, tree, diff, restore, prune, export, import,
revert) are called by checkpoints.py, one at a time per store; exit 3 means "no such
checkpoint", 4 "no such path". A take is two: `take` captures the workspace into the index
and leaves the checkpoint pending, `seal` commits it (every operation first seals one left
pending). `take-changed` is a take handed what changed by the sandbox's watch (no walk).
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
[ ! -e "$GIT_DIR/index.lock" ] || rm -f "$GIT_DIR/index.lock"
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
  n=; read -r n 2>/dev/null < "$GIT_DIR/size" || true
  case $n in ''|*[!0-9]*) echo 0 ;; *) echo "$n" ;; esac
}
measure() {  # what the store's objects take on disk, recorded
  git count-objects -v | awk '/^size(-pack)?:/ {s += $2} END {print s * 1024}' > "$GIT_DIR/size"
  stored
}
added() {  # $1 a tree, $2 the newest checkpoint's: the bytes on disk of the objects it added
  [ "$1" != "$2" ] || { echo 0; return; }
  if [ -n "$2" ]; then set -- "$1" --not "$2"; else set -- "$1"; fi
  # One process from git 2.38; an older git sums them itself.
  git rev-list --objects --disk-usage "$@" 2>/dev/null && return
  git rev-list --objects "$@" | git cat-file --batch-check='%(objectsize:disk) %(rest)' \
    | awk '{s += $1} END {print s + 0}'
}
# A snapshot reads what changed since the last one, not all there is. Each walk leaves a
# mark (the second before it began, by the sandbox's own clock: the ctime find reads of a
# file written just before it, and the size bound it walked with); the next walk hands git
# only the files whose ctime is newer. ctime is set by the kernel on every write, chmod,
# rename and utime (an mtime put back still moves it), and the second covers a change in
# the same clock tick as the mark, as git's racy rule does. Every other file is as the
# index has it. Creating, removing or renaming an entry changes its folder: only then are
# the walk's paths and the index's compared, for what was deleted and for files that came
# in with an old ctime (a folder moved in). No mark (a new store, an import, a lost index):
# a whole walk, where git's index is the stat cache. After `capture`, nothing done to the
# workspace changes what the index holds (each file's blob is written), and `snapshot`
# sets `tree`, the workspace's tree. A take captures only: its tree is made as it is
# sealed, from the index as the take left it (`frozen_tree`).
walk() {  # $@ find's test of a changed entry, or nothing (every entry)
  : > "$GIT_DIR/clock"
  find ./.burrow/checkpoints/clock . \
      \( -path ./.burrow/checkpoints/clock -fprintf "$GIT_DIR/now" '%C@\n' \) \
    -o \( -path ./.burrow/outputs -o -path ./.burrow/services \
      -o -path ./.burrow/services.json -o -path ./.burrow/checkpoints -o -name .git \) -prune \
    -o -type d "$@" -fprintf "$GIT_DIR/folders" '%P\0' \
    -o -type f -size +"$maxk"k \( -fprintf "$GIT_DIR/skipped" '%P\0' \
      "$@" -fprintf "$GIT_DIR/grown" '%P\0' -o -true \) \
    -o \( -type f -o -type l \) -fprintf "$GIT_DIR/listed" '%P\0' \
      -fprintf "$GIT_DIR/paths" '%P\0' "$@" -fprintf "$GIT_DIR/changed" '%P\0'
  now=; read -r now 2>/dev/null < "$GIT_DIR/now" || true
  frac=${now#*.} now=${now%%.*}
  case $now in ''|*[!0-9]*) now=0 ;; esac
  case $frac in ''|*[!0-9]*) frac=0 ;; esac
}
compare() {  # path by path, what one update-index could not take (a file become a socket),
  # or a git older than 2.17
  sort -z -o "$GIT_DIR/listed" "$GIT_DIR/listed"
  git ls-files -z > "$GIT_DIR/indexed"
  comm -z -23 "$GIT_DIR/indexed" "$GIT_DIR/listed" > "$GIT_DIR/gone"
  comm -z -13 "$GIT_DIR/indexed" "$GIT_DIR/listed" > "$GIT_DIR/came"
  [ ! -s "$GIT_DIR/gone" ] || git update-index --force-remove -z --stdin < "$GIT_DIR/gone"
  [ ! -s "$GIT_DIR/came" ] || git update-index --add --replace -z --stdin < "$GIT_DIR/came"
  [ ! -s "$GIT_DIR/changed" ] \
    || git update-index --add --remove --replace -z --stdin < "$GIT_DIR/changed"
}
capture() {
  store
  mark= at=; read -r mark at 2>/dev/null < "$GIT_DIR/mark" || true
  case $mark in ''|*[!0-9.]*|*.*.*) mark= ;; esac
  # Another size bound: a file the walk before kept may be over this one.
  [ "$at" = "$maxk" ] && [ -f "$GIT_DIR/index" ] || mark=
  if [ -n "$mark" ]; then
    walk -newerct "@$mark"
    # A mark not before this walk's second (the clock set back, or planted) says nothing.
    [ "${mark%%.*}" -lt "$now" ] || { mark=; walk; }
  else
    walk
  fi
  updated=
  if [ -s "$GIT_DIR/grown" ]; then  # over the bound since the walk before: out of the index
    git update-index --force-remove -z --stdin < "$GIT_DIR/grown"
    updated=1
  fi
  if [ -z "$mark" ] || [ -s "$GIT_DIR/folders" ]; then
    # An entry made, removed or renamed: every path the walk found and every path the index
    # has. --remove drops what is gone, --add takes what came in with an old ctime (a
    # folder moved in), and the rest is as the index has it.
    git ls-files -z >> "$GIT_DIR/paths"
    set -- "$GIT_DIR/paths"
  else
    set -- "$GIT_DIR/changed"
  fi
  if [ -s "$1" ]; then
    # Written even when nothing differs: git re-reads every file whose mtime is not older
    # than the index's second (its racy rule), at each index write until one is written a
    # later second; an index left from the second its files were written would have the
    # next change read them all again. (--force-write-index is git 2.17's.)
    git update-index --add --remove --replace --force-write-index -z --stdin < "$1" \
        2>/dev/null || compare
    updated=1
  elif [ ! -f "$GIT_INDEX_FILE" ]; then
    # An empty workspace still gets an index: without one, a watched take walks (and
    # then again at every take, as nothing was added to write one).
    git read-tree --empty
  fi
  # The tree the last snapshot wrote holds for an index left as it was.
  [ -z "$updated" ] || : > "$GIT_DIR/tree"
  if [ "$now" -gt 0 ]; then echo "$(( now - 1 )).$frac $maxk"; fi > "$GIT_DIR/mark"
}
cached_tree() {
  # The index's tree, if known: the last snapshot's or seal's for an index left as it was
  # (restore, revert and import forget it); with no index yet, git's empty tree.
  tree=; read -r tree 2>/dev/null < "$GIT_DIR/tree" || true
  case $tree in *[!0-9a-f]*) tree= ;; esac
  [ -n "$tree" ] || [ -f "$GIT_INDEX_FILE" ] || tree=4b825dc642cb6eb9a060e54bf8d69288fbee4904
}
index_tree() {
  cached_tree
  # Writing an index, as write-tree does, re-reads the files changed in the index's second
  # (git's racy rule): so this is done before, never beside, a tool.
  [ -n "$tree" ] || tree=$(git write-tree)
  echo "$tree" > "$GIT_DIR/tree"
}
frozen_tree() {  # the index's tree, made with no file read: from a copy dated 1970, where
  # no entry counts as racy. The workspace may be changing meanwhile, and git reading a
  # file cut short under it dies of SIGBUS; the tree is the index's as the take left it.
  # (An index removed since the take, by the sandbox, loses that take.)
  cp "$GIT_INDEX_FILE" "$GIT_DIR/index.frozen" 2>/dev/null || return 1
  touch -d @0 "$GIT_DIR/index.frozen" || return 1
  tree=$(GIT_INDEX_FILE="$GIT_DIR/index.frozen" git write-tree) || return 1
  echo "$tree" > "$GIT_DIR/tree"
}
snapshot() {
  capture
  index_tree
}
# A take from what the sandbox's watch saw (checkpoints.py: `take-changed`): no walk. The
# index holds the workspace as the take before found it; the watch names every path made,
# written, re-moded, moved or removed since, so these alone are handed to git.
changes() {  # $@ the paths to drop, then the folders; stdin (if $listed) the paths to update
  updated=
  if [ $# -gt "$drops" ]; then reread "$drops" "$@" || return 1; updated=1; fi
  if [ "$listed" = 1 ]; then
    git update-index --add --remove --replace --force-write-index -z --stdin 2>/dev/null \
      || return 1
    updated=1
  fi
  if [ "$drops" -gt 0 ]; then drop "$drops" "$@" || return 1; updated=1; fi
}
reread() {  # $1 how many of the rest to pass over; the rest are folders made, moved or
  # removed: each entry the index has under them is read again (gone, it leaves)
  n=$1; shift
  for p do shift; [ $(( n -= 1 )) -ge 0 ] || set -- "$@" "$p"; done
  git ls-files -z -- "$@" > "$GIT_DIR/under" \
    && git update-index --add --remove --replace -z --stdin < "$GIT_DIR/under" 2>/dev/null
}
drop() {  # $1 how many of the rest: those leave the index (over the size bound, or now
  # neither a file nor a link)
  n=$1; shift
  for p do shift; [ $(( n -= 1 )) -lt 0 ] || set -- "$@" "$p"; done
  git update-index --force-remove -- "$@"
}
newest() {  # the newest checkpoint's tree, if any: kept by each commit, asked of git if not
  t=; read -r t 2>/dev/null < "$GIT_DIR/newest" || true
  case $t in *[!0-9a-f]*) t= ;; esac
  [ -n "$t" ] && echo "$t" && return
  git for-each-ref --sort=-refname --count=1 --format='%(tree)' refs/checkpoints/
}
checkpoints() {  # how many there are (loose refs: only update-ref and commit write them)
  [ ! -f "$GIT_DIR/packed-refs" ] || { echo 999999; return; }
  set -- "$GIT_DIR"/refs/checkpoints/*
  if [ -e "$1" ]; then echo $#; else echo 0; fi
}
commit() {  # $1 id, $2 subject (time and run), $3 the newest checkpoint's tree: `tree`
  # committed; the subject gains the bytes it added, which are printed
  bytes=$(added "$tree" "$3")
  c=$(git commit-tree -m "$2 $bytes" "$tree")
  # A new ref, so a loose ref file is all update-ref would write (one process fewer).
  [ -d "$GIT_DIR/refs/checkpoints" ] || mkdir "$GIT_DIR/refs/checkpoints"
  echo "$c" > "$GIT_DIR/refs/checkpoints/$1"
  echo "$tree" > "$GIT_DIR/newest"
  echo $(( $(stored) + bytes )) > "$GIT_DIR/size"
  echo "$bytes"
}
settle() {  # commits the checkpoint a take left pending, if any: the bytes it added
  id= tree= subject=; read -r id tree subject 2>/dev/null < "$GIT_DIR/pending" || return 0
  : > "$GIT_DIR/pending"  # first: one that cannot be committed is lost, not retried forever
  case ${id#ck_} in "$id"|''|*[!0-9a-f]*) return 0 ;; esac  # not one Burrow wrote
  case $tree in
    index) frozen_tree || return 0 ;;  # as the take left it: every operation settles first
    ''|*[!0-9a-f]*) return 0 ;;
  esac
  commit "$id" "$subject" "$(newest)"
}
[ "$op" = seal ] || settle > /dev/null
case $op in
  take)  # $1 id, $2 subject: the workspace captured, its tree and commit pending
    capture
    cached_tree
    echo "$1 ${tree:-index} $2" > "$GIT_DIR/pending" ;;
  take-changed)  # $1 id, $2 subject, $3 1 if stdin names paths to update, $4 how many
    # paths to drop follow, then those, then folders (see changes): a take, from a watch
    id=$1 subject=$2 listed=$3 drops=$4; shift 4
    store
    mark= at=; read -r mark at 2>/dev/null < "$GIT_DIR/mark" || true
    # With no index (a store made anew) or another size bound, or whatever git refused
    # (a path beyond a link): a walk, which finds all since the last walk's mark.
    if [ "$at" = "$maxk" ] && [ -f "$GIT_DIR/index" ] && changes "$@"; then
      [ -z "$updated" ] || : > "$GIT_DIR/tree"
    else
      capture
    fi
    cached_tree
    echo "$id ${tree:-index} $subject" > "$GIT_DIR/pending" ;;
  seal)  # $1 the most checkpoints, $2 the most bytes (0: no bound): the bytes the pending
    # take added, the store's bytes, and past a bound what pruning needs, the checkpoints
    [ -s "$GIT_DIR/pending" ] || exit 3
    bytes=$(settle)
    n=$(stored)
    echo "$bytes"
    echo "$n"
    if [ $(( $1 && $(checkpoints) > $1 )) = 1 ] || [ $(( $2 && n > $2 )) = 1 ]; then
      git for-each-ref --format='%(refname:lstrip=2) %(subject)' refs/checkpoints/
    fi ;;
  list)
    [ -f "$GIT_DIR/HEAD" ] || exit 0
    git for-each-ref --format='%(refname:lstrip=2) %(subject)' refs/checkpoints/ ;;
  tree)  # $1 a checkpoint id, or "now" for the workspace as it is
    if [ "$1" = now ]; then snapshot; echo "$tree"
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
    snapshot
    commit "$2" "$3" "$(newest)" >/dev/null
    rm -f "$GIT_DIR/tree"
    git read-tree --reset -u "refs/checkpoints/$1^{tree}" ;;
  prune)  # the ids to drop; their objects no other checkpoint holds go too
    for id; do git update-ref -d "refs/checkpoints/$id"; done
    git prune --expire=now
    measure ;;
  export)  # $1 a checkpoint id or "now", $2 a bundle file to write with its commit;
    # $3...: checkpoints carried along as they are (a fork's earlier runs'), missing ones
    # left out
    if [ "$1" = now ]; then snapshot; c=$(git commit-tree -m fork "$tree")
    else c=$(git rev-parse -q --verify "refs/checkpoints/$1^{commit}") || exit 3; fi
    bundle=$2; shift 2
    git update-ref refs/export/workspace "$c"
    for id; do
      k=$(git rev-parse -q --verify "refs/checkpoints/$id^{commit}") || continue
      git update-ref "refs/export/carried/$id" "$k"
    done
    # No delta search and light compression: the bundle is read once, at once; searching
    # deltas among thousands of loose objects costs seconds and saves little.
    git -c pack.window=0 -c pack.compression=1 bundle create -q "$bundle" --glob=refs/export
    git for-each-ref --format='delete %(refname)' refs/export/ | git update-ref --stdin ;;
  import)  # $1 a bundle from export, $2 id, $3 subject: a checkpoint, and the workspace;
    # the checkpoints it carries are kept under their ids, times and runs
    store
    c=
    git bundle unbundle "$1" > "$GIT_DIR/unbundled"
    rm -f "$1"
    while read -r sha ref; do
      case $ref in
        refs/export/workspace) c=$sha ;;
        refs/export/carried/ck_*)
          git update-ref "refs/checkpoints/${ref#refs/export/carried/}" "$sha" ;;
      esac
    done < "$GIT_DIR/unbundled"
    rm -f "$GIT_DIR/unbundled"
    tree=$(git rev-parse "$c^{tree}")
    n=$(git commit-tree -m "$3 $(measure)" "$tree")
    git update-ref "refs/checkpoints/$2" "$n"
    echo "$tree" > "$GIT_DIR/newest"
    git read-tree --reset -u "$tree"
    rm -f "$GIT_DIR/mark" "$GIT_DIR/tree" ;;  # the index is the bundle's: walk it all next
  revert)  # $1 target id, $2 undo id, $3 undo subject, $4 path
    git rev-parse -q --verify "refs/checkpoints/$1^{tree}" >/dev/null || exit 3
    snapshot
    commit "$2" "$3" "$(newest)" >/dev/null
    rm -f "$GIT_DIR/tree"
    if [ -n "$(git ls-tree -r --name-only "refs/checkpoints/$1" -- "$4")" ]; then
      git checkout -q "refs/checkpoints/$1" -- "$4" && echo restored
    elif [ -n "$(git ls-files -- "$4")" ]; then
      git rm -r -q -f -- "$4" && echo deleted
    else
      exit 4
    fi ;;
esac
"""
