#!/bin/sh
# crsched --dot, the Graphviz pictures, checked as graphs: python3 parses
# the DOT text (nodes, edges, clusters, labels) and compares it with what
# the schedules must do. The reduction tree of the circulant reduce-scatter
# at p = 22 must be Träff's Figure 1 (the same shape for every rank, the
# figure's node order when walked depth first); at other p it must be the
# tree the paper's recurrence predicts (T_{i+s} hooked into T_i for
# 0 <= i < s'-s, round by round), which crsched does not use: it finds the
# tree by running the built schedules on tags. When Graphviz's dot is
# installed it must also accept every picture; the structural checks run
# either way.
#
#   tests/test_crsched_dot.sh path/to/crsched
set -u

CRSCHED=${1:?usage: test_crsched_dot.sh path/to/crsched}
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT

. "$(dirname "$0")/checks.sh"

# The DOT reader and the checks, in one python3 program (started once: it
# is slow to start), run over the spec file the shell part writes.
cat > "$TMP/check.py" <<'PY'
import math, re, sys

def parse(text):
    """nodes {id: label}, edges [(a, b, label, cluster)], clusters
    [(name, label)], from crsched's DOT (one statement per line)."""
    lines = text.splitlines()
    if not lines or not re.match(r'^digraph \w+ \{$', lines[0]) \
            or lines[-1] != '}':
        raise SystemExit('not a digraph { ... }')
    nodes, edges, clusters, cur, depth = {}, [], [], None, 1
    for ln in lines[1:-1]:
        s = ln.strip()
        m = re.match(r'^subgraph (cluster_\w+) \{$', s)
        if m:
            cur = m.group(1)
            clusters.append([cur, None])
            depth += 1
            continue
        if s == '}':
            depth -= 1
            cur = None
            continue
        m = re.match(r'^label="([^"]*)";$', s)
        if m and cur is not None:
            clusters[-1][1] = m.group(1)
            continue
        m = re.match(r'^(\w+) -> (\w+) \[label="([^"]*)"\];$', s)
        if m:
            edges.append((m.group(1), m.group(2), m.group(3), cur))
            continue
        m = re.match(r'^(\w+) \[label="([^"]*)"(, tooltip="[^"]*")?\];$', s)
        if m:
            if m.group(1) in nodes:
                raise SystemExit('node %s twice' % m.group(1))
            nodes[m.group(1)] = m.group(2)
            continue
        if re.match(r'^(label|labelloc|rankdir|node|edge|newrank)', s):
            continue
        raise SystemExit('unexpected line: ' + s)
    if depth != 1:
        raise SystemExit('unbalanced braces')
    for a, b, _, _ in edges:
        if a not in nodes or b not in nodes:
            raise SystemExit('edge to an undeclared node')
    return nodes, edges, clusters

def skips(p):
    s = [p]
    while s[-1] > 1:
        s.append(s[-1] - s[-1] // 2)
    return s

def tree(text):
    """parent[label] = (parent label, round, skip) of a --tree picture,
    checked to be one tree over labels 0..p-1."""
    nodes, edges, _ = parse(text)
    parent = {}
    for a, b, lab, _ in edges:
        m = re.match(r'^r(\d+) s=(\d+)$', lab)
        if not m:
            raise SystemExit('edge label ' + lab)
        la, lb = int(nodes[a]), int(nodes[b])
        if la in parent:
            raise SystemExit('label %d has two parents' % la)
        parent[la] = (lb, int(m.group(1)), int(m.group(2)))
    return nodes, parent

def dfs_order(parent, p):
    kids = {i: [] for i in range(p)}
    for c, (par, rnd, _) in parent.items():
        kids[par].append((rnd, c))
    roots = [i for i in range(p) if i not in parent]
    if len(roots) != 1:
        raise SystemExit('roots: %s' % roots)
    out = []
    def walk(i):
        out.append(i)
        for _, c in sorted(kids[i]):
            walk(c)
    walk(roots[0])
    return out

def run(mode, args, text):
    if mode == 'figure1':
        # labels, the depth-first order, every edge's skip = label gap
        p = int(args[0])
        nodes, parent = tree(text)
        ok_gaps = all((c - par) % p == s for c, (par, _, s) in parent.items())
        return '%d %d %s %s' % (len(nodes), len(parent), ok_gaps,
                                ' '.join(map(str, dfs_order(parent, p))))
    if mode == 'recurrence':
        # the tree the paper's loop builds, in labels: round k with (s', s)
        # hooks T_{i+s} into T_i for i < s' - s
        p = int(args[0])
        nodes, parent = tree(text)
        want, sk = {}, skips(p)
        for k in range(len(sk) - 1):
            sp, s = sk[k], sk[k + 1]
            for i in range(sp - s):
                want[i + s] = (i, k, s)
        return 'same' if parent == want and len(nodes) == p else \
            'differs: got %s want %s' % (sorted(parent.items()),
                                         sorted(want.items()))
    if mode == 'nodes':
        # one tree whose nodes' ranks cover every rank (a rank may hold
        # more than one partial sum): edges = nodes - 1, one root, all
        # reached from it
        p = int(args[0])
        nodes, edges, _ = parse(text)
        tips = re.findall(r'tooltip="rank (\d+)"', text)
        kids = {}
        for a, b, _, _ in edges:
            kids.setdefault(b, []).append(a)
        roots = [n for n in nodes if all(a != n for a, _, _, _ in edges)]
        seen, stack = set(), list(roots)
        while stack:
            n = stack.pop()
            seen.add(n)
            stack.extend(kids.get(n, []))
        return '%s %d %s %s' % (len(edges) == len(nodes) - 1, len(roots),
                                len(seen) == len(nodes),
                                sorted(set(map(int, tips))) == list(range(p)))
    if mode == 'rounds':
        # clusters, in order; nodes per cluster; per round the peers as
        # (to - from) mod p; the fewest messages of a round; bytes in all
        p = int(args[0])
        nodes, edges, clusters = parse(text)
        per, total = {}, 0
        for a, b, lab, cl in edges:
            ra, rb = a.split('_'), b.split('_')
            if ra[0] != rb[0] or cl != 'cluster_round' + ra[0][1:]:
                raise ValueError('edge across clusters: %s -> %s' % (a, b))
            per.setdefault(int(ra[0][1:]), []).append(
                (int(rb[1]) - int(ra[1])) % p)
            total += int(re.match(r'^(\d+) B', lab).group(1))
        names = sorted(int(c[0][len('cluster_round'):]) for c in clusters)
        counts = set(sum(1 for n in nodes if n.startswith('r%d_' % k))
                     for k in names)
        return '%d %s %s %s %d %d' % (
            len(clusters), names == list(range(len(clusters))), counts,
            ' '.join('%d:%s' % (k, ','.join(map(str, sorted(set(v)))))
                     for k, v in sorted(per.items())),
            min(len(v) for v in per.values()), total)
    raise ValueError('mode ' + mode)

# One check per line of the spec file: NAME|MODE|FILE|ARGS|WANT; prints
# "ok" or "FAIL" for each, and the number failed last.
failed = 0
for n, line in enumerate(open(sys.argv[1]).read().splitlines(), 1):
    name, mode, path, args, want = line.split('|')
    try:
        got = run(mode, args.split(), open(path).read())
    except (SystemExit, ValueError, KeyError) as e:
        got = 'error: %s' % e
    if got == want:
        print('ok - %s' % name)
    else:
        failed += 1
        print("FAIL - %s: got '%s', want '%s'" % (name, got, want))
print('FAILED %d' % failed)
PY

# spec NAME MODE FILE ARGS WANT: a check for check.py to run
spec() { printf '%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" "$5" >> "$TMP/specs"; }
: > "$TMP/specs"
# draw NAME crsched-args...: the picture into $TMP/NAME.dot, exit status 0
draw() {
  name=$1
  shift
  "$CRSCHED" "$@" > "$TMP/$name.dot"
  expect "crsched $*: exit status" "$?" 0
}
FIG1="0 11 6 17 3 14 9 20 2 13 8 19 5 16 1 12 7 18 4 15 10 21"

# --- Figure 1: the tree of p = 22, the same for every rank ---------------
for r in 21 0 7; do
  draw tree22_$r --dot --tree --coll reduce_scatter --schedule circulant \
    -p 22 --rank "$r"
  spec "p=22 rank $r: Figure 1 (22 nodes, 21 edges, skips, DFS order)" \
    figure1 "$TMP/tree22_$r.dot" 22 "22 21 True $FIG1"
done
# rank 21's sum, as in the paper: x21 + x10 + (x15 + x4) + ...: the node
# of label 11 is rank 10, the root's first child
expect "p=22 rank 21: label 11 is rank 10, hooked in round 0" \
  "$(grep -c 'n10 \[label="11", tooltip="rank 10"\]' "$TMP/tree22_21.dot") $(grep -c 'n10 -> n21 \[label="r0 s=11"\]' "$TMP/tree22_21.dot")" \
  "1 1"

# --- the recurrence, at other p -------------------------------------------
for p in 2 3 4 5 7 8 13 16 31 33 64; do
  draw rs$p --dot --tree --coll reduce_scatter --schedule circulant -p "$p" \
    --rank $((p / 2))
  spec "circulant reduce-scatter p=$p: the recurrence's tree" recurrence \
    "$TMP/rs$p.dot" "$p" same
  draw ar$p --dot --tree --coll allreduce --schedule circulant -p "$p" \
    --rank $((p - 1))
  if [ "$p" = 3 ]; then
    # rank 2 at p = 3 keeps rank order by reducing after the last round:
    # one more node (its own input joined locally), so not the recurrence
    spec "circulant allreduce p=3 rank 2: a tree of 4 nodes" nodes \
      "$TMP/ar$p.dot" 3 "True 1 True True"
    expect "circulant allreduce p=3 rank 2: 3 edges, one local" \
      "$(grep -c ' -> ' "$TMP/ar3.dot") $(grep -c 'local' "$TMP/ar3.dot")" \
      "3 1"
    continue
  fi
  spec "circulant allreduce p=$p: the same tree" recurrence "$TMP/ar$p.dot" \
    "$p" same
done

# --- other schedules: a tree over every rank's contribution -----------------
for s in "reduce_scatter ring 7" "allreduce rabenseifner 6" \
  "allreduce rabenseifner 13" "reduce rabenseifner 5" \
  "allreduce circulant-linear 5" "reduce circulant 9"; do
  set -- $s
  draw "$1-$2-$3" --dot --tree --coll "$1" --schedule "$2" -p "$3" --rank 2
  spec "$1 $2 p=$3: one tree over all ranks" nodes "$TMP/$1-$2-$3.dot" "$3" \
    "True 1 True True"
done
# recursive doubling reduces every block at every rank: not one tree
"$CRSCHED" --dot --tree --coll allreduce --schedule hypercube -p 8 \
  --rank 3 > "$TMP/hc.out" 2> "$TMP/hc.err"
expect "hypercube allreduce --tree: exit 1" "$?" 1
expect "hypercube allreduce --tree: says why, prints no graph" \
  "$(grep -c 'more than once' "$TMP/hc.err") $(wc -c < "$TMP/hc.out")" "1 0"

# --- the communication graph ---------------------------------------------
# circulant allreduce p = 7: skips 4, 2, 1 both ways: 6 rounds, every rank
# in every round, one message per rank per round (to rank + s, then rank -
# s), 2(p-1) blocks of 4 bytes sent per rank
draw rounds_ar7 --dot --coll allreduce --schedule circulant -p 7
spec "circulant allreduce p=7: clusters, peers, bytes" rounds \
  "$TMP/rounds_ar7.dot" 7 "6 True {7} 0:4 1:2 2:1 3:6 4:5 5:3 7 336"
expect "circulant allreduce p=7: round 0 names its skips" \
  "$(grep -c "label=\"round 0: s'=7 s=4, reduce-scatter phase\"" "$TMP/rounds_ar7.dot")" 1
# ring reduce-scatter p = 5: p-1 rounds to rank + 1, one block each
draw rounds_ring5 --dot --coll reduce_scatter --schedule ring -p 5
spec "ring reduce_scatter p=5" rounds "$TMP/rounds_ring5.dot" 5 \
  "4 True {5} 0:1 1:1 2:1 3:1 5 80"
# hypercube allreduce p = 8: partners r XOR 1, 2, 4 (as +-1, +-2, +-4)
draw rounds_hc8 --dot --coll allreduce --schedule hypercube -p 8
spec "hypercube allreduce p=8" rounds "$TMP/rounds_hc8.dot" 8 \
  "3 True {8} 0:1,7 1:2,6 2:4 8 768"
# bcast from root 2 over the binomial tree: 1, 2, 4 messages
draw rounds_bc8 --dot --coll bcast --schedule hypercube -p 8 --root 2
expect "hypercube bcast p=8: 7 messages" \
  "$(grep -c -- ' -> ' "$TMP/rounds_bc8.dot")" 7

# every spec, in one python3 run
python3 "$TMP/check.py" "$TMP/specs" > "$TMP/results" 2>&1
while IFS= read -r line; do
  case $line in
    "ok - "*) ok "${line#ok - }" ;;
    "FAIL - "*) fail "${line#FAIL - }" ;;
    "FAILED "*) ;;
    *) fail "check.py: $line" ;;
  esac
done < "$TMP/results"
expect "check.py ran every spec" "$(grep -c '^ok - \|^FAIL - ' "$TMP/results")" \
  "$(wc -l < "$TMP/specs" | tr -d ' ')"

# --- usage --------------------------------------------------------------
"$CRSCHED" --dot --coll allreduce -p 65 2> /dev/null
expect "--dot -p 65: usage error" "$?" 2
"$CRSCHED" --dot --tree --coll bcast -p 8 2> /dev/null
expect "--dot --tree --coll bcast: usage error" "$?" 2
"$CRSCHED" --tree --coll allreduce -p 8 2> /dev/null
expect "--tree without --dot: usage error" "$?" 2

# --- Graphviz accepts them, where it is installed ---------------------------
if command -v dot > /dev/null 2>&1; then
  for f in "$TMP/tree22_21.dot" "$TMP/allreduce-rabenseifner-6.dot" \
    "$TMP/rounds_ar7.dot" "$TMP/rounds_bc8.dot"; do
    dot -Tsvg "$f" -o "$f.svg" 2> "$TMP/dot.err"
    expect "dot -Tsvg $(basename "$f")" "$?:$(wc -c < "$TMP/dot.err")" "0:0"
  done
else
  echo "# Graphviz's dot is not installed: rendering not tried"
fi

echo "$checks checks, $fails failed"
[ "$fails" -eq 0 ]
