/* crsched's Graphviz pictures: --dot, the communication graph of a
 * collective round by round, and --dot --tree, the reduction tree of one
 * block, found by running every rank's built schedule on tags (see the
 * section's comment below).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crnet.h"
#include "schedule.h"
#include "select.h"

#include "crsched.h"

/* ---- Graphviz pictures (--dot) -----------------------------------------
 *
 * --dot draws the communication graph of a collective: every rank's
 * schedule is built, and each round becomes one cluster holding the p ranks,
 * with an edge from sender to receiver labelled with the bytes of the
 * message (and the blocks, where the segments are whole blocks of the
 * vector). Circulant rounds are labelled with s' and s.
 *
 * --dot --tree draws the reduction tree of one rank's block, Träff's
 * Figure 1: the partial sums that end in block `--rank` and who combined
 * them. It is found by running every rank's schedule on tags instead of
 * numbers (tag_sim): an element carries the block it belongs to and the
 * rank whose partial sum it is (its root); a message copies tags; a reduce
 * step at rank j joins two partial sums of the same block into one rooted
 * at j, and each operand whose root is another rank a becomes a child of
 * j: a hooked into j by an edge labelled with the round and the distance
 * (j - a) mod p (the skip s in the circulant schedules). Nodes carry the
 * paper's label i = (r - j) mod p, so for the circulant reduce-scatter at
 * p = 22, rank 21, the tree is the figure's. Nothing of the tree is taken
 * from the formulas: it is what the built schedules do. */

typedef struct tag {
  int32_t block; /* -1: nothing written yet */
  int32_t root;
} tag;

typedef struct tag_rank {
  crnet__schedule s;
  bool built;
  tag *buf[CRNET__BUF_COUNT];
  uint64_t len[CRNET__BUF_COUNT];
  tag *msg; /* this round's outgoing message */
  uint64_t msg_len;
} tag_rank;

/* A node of the tree: a partial sum of the block, held by `rank`, hooked
 * into node `parent` in round `round`. Nodes 0..p-1 are the ranks' inputs;
 * a reduce at rank j whose operands are both other ranks' partial sums
 * makes a new node of rank j (the circulant schedules never do: there the
 * nodes are the ranks, as in the paper's figure). */
typedef struct tree_node {
  int32_t rank;
  int32_t parent; /* -1: not hooked (the root) */
  uint32_t round;
  bool sent; /* has left its rank: a later reduce there makes a new node */
} tree_node;

typedef struct tree {
  tree_node *n;
  int32_t count, cap;
} tree;

/* A new node of `rank`, or -1 when out of memory. */
static int32_t tree_add(tree *t, int32_t rank) {
  if (t->count == t->cap) {
    int32_t cap = t->cap ? 2 * t->cap : 64;
    tree_node *n = realloc(t->n, sizeof *n * (size_t)cap);
    if (n == NULL)
      return -1;
    t->n = n;
    t->cap = cap;
  }
  t->n[t->count] = (tree_node){rank, -1, 0, false};
  return t->count++;
}

static void grow(uint64_t *len, const crnet__seg *g) {
  if (g->off + g->count > len[g->buf])
    len[g->buf] = g->off + g->count;
}

/* Buffers as long as the schedule touches, SEND filled with input tags. */
static bool tag_alloc(tag_rank *t, const blocks *b, int32_t rank) {
  const crnet__schedule *s = &t->s;
  t->len[CRNET__BUF_SEND] = b->prefix[b->p];
  t->len[CRNET__BUF_RECV] = b->prefix[b->p];
  t->len[CRNET__BUF_TEMP] = s->temp_count;
  for (uint32_t i = 0; i < s->nsegs; i++)
    grow(t->len, &s->segs[i]);
  for (uint32_t i = 0; i < s->nsteps; i++) {
    grow(t->len, &s->steps[i].src);
    grow(t->len, &s->steps[i].dst);
  }
  for (int k = 0; k < CRNET__BUF_COUNT; k++) {
    t->buf[k] = malloc(sizeof(tag) * (t->len[k] ? t->len[k] : 1));
    if (t->buf[k] == NULL)
      return false;
    for (uint64_t e = 0; e < t->len[k]; e++)
      t->buf[k][e] = (tag){-1, -1};
  }
  for (int32_t blk = 0; blk < b->p; blk++)
    for (uint64_t e = b->prefix[blk]; e < b->prefix[blk + 1]; e++)
      t->buf[CRNET__BUF_SEND][e] = (tag){blk, rank};
  return true;
}

static void tag_free(tag_rank *t, int32_t p) {
  for (int32_t r = 0; r < p; r++) {
    for (int k = 0; k < CRNET__BUF_COUNT; k++)
      free(t[r].buf[k]);
    free(t[r].msg);
    if (t[r].built)
      crnet__sched_free(&t[r].s);
  }
  free(t);
}

/* Runs round k of every rank on tags; records the hooks of `block` in
 * edges. False (after saying why) when the schedules do not match. */
static bool tag_round(tag_rank *t, int32_t p, uint32_t k, int32_t block,
                      tree *tr) {
  for (int32_t r = 0; r < p; r++) { /* every send of the round first */
    const crnet__schedule *s = &t[r].s;
    t[r].msg_len = 0;
    if (k >= s->nrounds || s->rounds[k].send.peer < 0)
      continue;
    const crnet__xfer *x = &s->rounds[k].send;
    uint64_t n = crnet__xfer_count(s, x);
    free(t[r].msg);
    t[r].msg = malloc(sizeof(tag) * (n ? n : 1));
    if (t[r].msg == NULL)
      return false;
    for (uint32_t i = 0; i < x->nsegs; i++) {
      const crnet__seg *g = &s->segs[x->first_seg + i];
      memcpy(t[r].msg + t[r].msg_len, t[r].buf[g->buf] + g->off,
             sizeof(tag) * g->count);
      for (uint64_t e = 0; e < g->count; e++)
        if (t[r].msg[t[r].msg_len + e].block == block)
          tr->n[t[r].msg[t[r].msg_len + e].root].sent = true;
      t[r].msg_len += g->count;
    }
  }
  for (int32_t r = 0; r < p; r++) { /* then the receives */
    const crnet__schedule *s = &t[r].s;
    if (k >= s->nrounds || s->rounds[k].recv.peer < 0)
      continue;
    const crnet__xfer *x = &s->rounds[k].recv;
    const tag_rank *from = &t[x->peer];
    uint64_t at = 0;
    if (crnet__xfer_count(s, x) != from->msg_len || k >= from->s.nrounds ||
        from->s.rounds[k].send.peer != r) {
      fprintf(stderr, "crsched: round %u: rank %d expects %" PRIu64
              " elements from rank %d, which does not send them\n",
              k, r, crnet__xfer_count(s, x), x->peer);
      return false;
    }
    for (uint32_t i = 0; i < x->nsegs; i++) {
      const crnet__seg *g = &s->segs[x->first_seg + i];
      memcpy(t[r].buf[g->buf] + g->off, from->msg + at,
             sizeof(tag) * g->count);
      at += g->count;
    }
  }
  for (int32_t r = 0; r < p; r++) { /* then the local steps */
    const crnet__schedule *s = &t[r].s;
    if (k >= s->nrounds)
      continue;
    for (uint32_t i = 0; i < s->rounds[k].nsteps; i++) {
      const crnet__step *st = &s->steps[s->rounds[k].first_step + i];
      tag *src = t[r].buf[st->src.buf] + st->src.off;
      tag *dst = t[r].buf[st->dst.buf] + st->dst.off;
      for (uint64_t e = 0; e < st->src.count; e++) {
        if (st->kind == CRNET__STEP_COPY) {
          dst[e] = src[e];
          continue;
        }
        if (src[e].block != dst[e].block || src[e].block < 0) {
          fprintf(stderr, "crsched: round %u: rank %d reduces block %d "
                  "into block %d\n", k, r, src[e].block, dst[e].block);
          return false;
        }
        if (src[e].block == block) {
          int32_t ops[2] = {src[e].root, dst[e].root}, into = -1;
          for (int j = 0; j < 2; j++)
            if (tr->n[ops[j]].rank == r && !tr->n[ops[j]].sent)
              into = ops[j];
          if (into < 0 && (into = tree_add(tr, r)) < 0)
            return false;
          for (int j = 0; j < 2; j++) {
            if (ops[j] == into)
              continue;
            if (tr->n[ops[j]].parent >= 0) {
              fprintf(stderr, "crsched: one partial sum of block %d (rank "
                      "%d's) is reduced at ranks %d and %d: the schedule "
                      "computes the block more than once, not along one "
                      "tree\n",
                      block, tr->n[ops[j]].rank,
                      tr->n[tr->n[ops[j]].parent].rank, r);
              return false;
            }
            tr->n[ops[j]].parent = into;
            tr->n[ops[j]].round = k;
          }
          dst[e].root = into;
          continue;
        }
        dst[e].root = r;
      }
    }
  }
  return true;
}

/* Every rank's schedule for the call of o (rank varies). NULL after saying
 * why. */
static tag_rank *build_all(const options *o, const char *name,
                           const blocks *b, bool tags) {
  tag_rank *t = calloc((size_t)o->p, sizeof *t);
  if (t == NULL)
    return NULL;
  for (int32_t r = 0; r < o->p; r++) {
    crnet__call c = crsched_call_for(o, o->coll, o->exclusive, r, b);
    if (crsched_build_or_complain(name, &c, &t[r].s) != 0) {
      tag_free(t, o->p);
      return NULL;
    }
    t[r].built = true;
    if (tags && !tag_alloc(&t[r], b, r)) {
      fputs("crsched: out of memory\n", stderr);
      tag_free(t, o->p);
      return NULL;
    }
  }
  return t;
}

static uint32_t max_rounds(const tag_rank *t, int32_t p) {
  uint32_t n = 0;
  for (int32_t r = 0; r < p; r++)
    if (t[r].s.nrounds > n)
      n = t[r].s.nrounds;
  return n;
}

/* The communication graph: a cluster per round, an edge per message. */
static void dot_rounds(const options *o, const char *name, const blocks *b,
                       const tag_rank *t) {
  uint32_t n = max_rounds(t, o->p);
  skips k;
  if (crsched_skips_make(&k, name, o->p) != 0)
    k.n = 0;
  if (o->coll == CRNET_COLL_SCAN)
    k.n = 0;
  printf("digraph crsched {\n"
         "  label=\"%s, schedule %s, p = %d: one cluster per round, an "
         "edge per message (bytes)\";\n"
         "  labelloc=t; rankdir=LR; newrank=true;\n"
         "  node [shape=circle, fontsize=10, width=0.3, fixedsize=true];\n"
         "  edge [fontsize=8];\n",
         crsched_coll_label(o->coll, o->exclusive), name, o->p);
  /* last round first: dot stacks the clusters upwards, so round 0 ends on
   * top */
  for (uint32_t r = n; r-- > 0;) {
    int32_t sp, s;
    int dir;
    printf("  subgraph cluster_round%u {\n    label=\"round %u", r, r);
    if (crsched_round_skip(&k, o->coll, t[0].s.nrounds, r, &sp, &s, &dir))
      printf(": s'=%d s=%d, %s", sp, s,
             dir > 0 ? "reduce-scatter phase" : "allgather phase");
    printf("\";\n");
    for (int32_t q = 0; q < o->p; q++)
      printf("    r%u_%d [label=\"%d\"];\n", r, q, q);
    for (int32_t q = 0; q < o->p; q++) {
      const crnet__schedule *sq = &t[q].s;
      if (r >= sq->nrounds || sq->rounds[r].send.peer < 0)
        continue;
      const crnet__xfer *x = &sq->rounds[r].send;
      uint64_t elems = crnet__xfer_count(sq, x);
      int32_t nblocks = 0;
      bool whole = x->nsegs > 0;
      crnet__call cq = crsched_call_for(o, o->coll, o->exclusive, q, b);
      layout l = crsched_layout_of(&cq, b);
      for (uint32_t i = 0; i < x->nsegs && whole; i++) {
        int32_t b0, b1;
        whole =
            crsched_seg_blocks(b, &l, &sq->segs[x->first_seg + i], &b0, &b1);
        if (whole)
          nblocks += b1 - b0 + 1;
      }
      printf("    r%u_%d -> r%u_%d [label=\"%" PRIu64 " B", r, q, r,
             x->peer, elems * o->dtype_size);
      if (whole)
        printf(", %d block%s", nblocks, nblocks == 1 ? "" : "s");
      printf("\"];\n");
    }
    printf("  }\n");
  }
  printf("}\n");
  free(k.s);
}

/* The reduction tree of block o->rank (Figure 1). 0, or 1 after saying
 * why. */
static int dot_tree(const options *o, tag_rank *t) {
  int32_t p = o->p, me = o->rank, root = -1;
  uint32_t n = max_rounds(t, p);
  tree tr = {NULL, 0, 0};
  int rc = 0;
  for (int32_t j = 0; j < p && rc == 0; j++)
    if (tree_add(&tr, j) < 0)
      rc = 1;
  for (uint32_t k = 0; k < n && rc == 0; k++)
    if (!tag_round(t, p, k, me, &tr))
      rc = 1;
  for (int32_t j = 0; j < tr.count && rc == 0; j++)
    if (tr.n[j].parent < 0) {
      if (root >= 0) {
        fprintf(stderr, "crsched: partial sums of block %d at ranks %d and "
                "%d are never joined: not a tree\n", me, tr.n[root].rank,
                tr.n[j].rank);
        rc = 1;
      }
      root = j;
    }
  for (int32_t j = 0; j < tr.count && rc == 0; j++) {
    int32_t at = j, steps = 0; /* every node must lead to the root */
    while (at != root && at >= 0 && steps++ <= tr.count)
      at = tr.n[at].parent;
    if (at != root) {
      fprintf(stderr, "crsched: the partial sums of block %d form a cycle "
              "(rank %d's): the schedule computes the block more than once, "
              "not along one tree\n", me, tr.n[j].rank);
      rc = 1;
    }
  }
  if (rc == 0) {
    printf("digraph crsched_tree {\n"
           "  label=\"%s, schedule %s, p = %d: the reduction tree of block "
           "%d; node i: a partial sum at rank (%d - i) mod p; edge: round, "
           "skip\";\n"
           "  labelloc=t; rankdir=BT; ordering=in;\n"
           "  node [shape=circle, fontsize=11];\n  edge [fontsize=9];\n",
           crsched_coll_label(o->coll, o->exclusive), o->schedule, p, me, me);
    for (int32_t j = 0; j < tr.count; j++)
      printf("  n%d [label=\"%d\", tooltip=\"rank %d\"];\n", j,
             mod_p((int64_t)me - tr.n[j].rank, p), tr.n[j].rank);
    /* children in the order they were hooked, so that a depth-first walk
     * of the picture is the order of the paper's sum */
    for (uint32_t k = 0; k < n; k++)
      for (int32_t j = 0; j < tr.count; j++)
        if (tr.n[j].parent >= 0 && tr.n[j].round == k)
        {
          int32_t gap = mod_p(
              (int64_t)tr.n[tr.n[j].parent].rank - tr.n[j].rank, p);
          /* gap 0: a rank joins its own input to a new partial sum */
          if (gap == 0)
            printf("  n%d -> n%d [label=\"r%u local\"];\n", j,
                   tr.n[j].parent, k);
          else
            printf("  n%d -> n%d [label=\"r%u s=%d\"];\n", j,
                   tr.n[j].parent, k, gap);
        }
    printf("}\n");
  }
  free(tr.n);
  return rc;
}

int crsched_dot_main(const options *o) {
  blocks b;
  const char *name;
  tag_rank *t;
  uint64_t count = o->tree ? (uint64_t)o->p
                           : (o->have_count ? o->count : (uint64_t)o->p);
  crnet__call call;
  int rc;
  if (is_a2a(o->coll))
    count = (o->have_count ? o->count : 1) * (uint64_t)o->p;
  rc = crsched_blocks_make(&b, o->p, count, o->counts_arg);
  if (rc != 0)
    return rc;
  call = crsched_call_for(o, o->coll, o->exclusive, 0, &b);
  rc =
      crsched_resolve(o->schedule != NULL ? o->schedule : "auto", &call, &name);
  if (rc == 0) {
    options named = *o;
    named.schedule = name;
    t = build_all(&named, name, &b, o->tree);
    if (t == NULL) {
      rc = 1;
    } else {
      if (o->tree)
        rc = dot_tree(&named, t);
      else
        dot_rounds(&named, name, &b, t);
      tag_free(t, o->p);
    }
  }
  crsched_blocks_free(&b);
  return rc;
}
