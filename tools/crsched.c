/* crsched: the schedule viewer and cost model.
 *
 * What it is for: to see what one rank of a collective does, round by round
 * (peers, skips, the segments sent and received, the local reduce and copy
 * steps), and to compare schedules under the α-β-γ model before measuring
 * anything. It calls the same pure builders as the library, through
 * crnet__select and crnet__build, so what it prints is what the executor
 * runs. It does no networking and never touches payload.
 *
 *   crsched --coll reduce_scatter --schedule circulant -p 22 --rank 21
 *   crsched --cost --alpha 1e-6 --beta 1e-9 --gamma 2e-10 -m 4096 -p 22
 *   crsched --auto -p 8 -m 1048576 [--tuning FILE] [--non-commutative]
 *   crsched --crossover -p 8 [--tuning FILE] [--non-commutative]
 *   crsched --cost --sweep -m 8,1048576 [--tuning FILE] [--dat]
 *   crsched --dot --tree --coll reduce_scatter --schedule circulant -p 22
 *           --rank 21
 *
 * See docs/crsched.md for the output formats and the cost model.
 *
 * Cost model (per collective and schedule): rank r's time in round k is
 *   c(r,k) = α·[round k communicates] + β·max(bytes sent, bytes received)
 *            + γ·bytes reduced by the round's steps
 * (copies are free). "time" is the synchronous-round model, Σ_k max_r
 * c(r,k): a round ends when its slowest rank ends. "rank-sum" is
 * max_r Σ_k c(r,k), the busiest rank alone; it is never larger. Every rank's
 * schedule is built (and freed) in turn, except where rotation symmetry
 * makes all ranks alike (see crsched_rotation_symmetric) and a row whose
 * builder would run for minutes (skipped and marked; --all forces both).
 *
 * --auto and --crossover show what `auto` picks (crnet__auto_choose, the
 * library's own choice, with its closed-form model, model.h) under the
 * tuning constants a job started here would use (tuning.h: the file of
 * CRNET_TUNING_FILE or the default place), or --tuning FILE, or --alpha,
 * --beta, --gamma, which replace the file's constants: --auto every
 * candidate's price and the pick for one m; --crossover the byte sizes at
 * which the pick changes, for m from 0 to -m (default 1 GiB).
 *
 * This file holds main, the collectives crsched knows, the vector's blocks,
 * the circulant skips, the per-round totals and the view of one rank's
 * schedule (text and JSON), with the helpers every part uses to select and
 * build a schedule. The command line is in crsched_options.c, the cost
 * model and auto's choice in crsched_model.c, the Graphviz pictures in
 * crsched_dot.c and the sweep and its --verify in crsched_sweep.c; the
 * declarations they share are in crsched.h.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "circulant.h"
#include "crnet.h"
#include "model.h"
#include "schedule.h"
#include "select.h"

#include "crsched.h"
#include "twolevel.h"

/* The collectives crsched knows, in the order the cost table lists them:
 * the library's collectives, with scan split into scan and exscan. */
const coll_kind crsched_known_colls[] = {
    {"allreduce", CRNET_COLL_ALLREDUCE, false},
    {"reduce_scatter", CRNET_COLL_REDUCE_SCATTER, false},
    {"allgather", CRNET_COLL_ALLGATHER, false},
    {"bcast", CRNET_COLL_BCAST, false},
    {"reduce", CRNET_COLL_REDUCE, false},
    {"barrier", CRNET_COLL_BARRIER, false},
    {"scan", CRNET_COLL_SCAN, false},
    {"exscan", CRNET_COLL_SCAN, true},
    {"alltoall", CRNET_COLL_ALLTOALL, false},
    {"gather", CRNET_COLL_GATHER, false},
    {"scatter", CRNET_COLL_SCATTER, false},
    {"alltoallv", CRNET_COLL_ALLTOALLV, false}};
const size_t crsched_nknown_colls =
    sizeof crsched_known_colls / sizeof crsched_known_colls[0];

const char *crsched_coll_label(crnet_collective coll, bool exclusive) {
  for (size_t i = 0; i < NKNOWN_COLLS; i++)
    if (crsched_known_colls[i].coll == coll &&
        crsched_known_colls[i].exclusive == exclusive)
      return crsched_known_colls[i].name;
  return crnet_collective_name(coll);
}

static const char *const buf_names[CRNET__BUF_COUNT] = {"SEND", "RECV",
                                                        "TEMP"};

/* ---- the vector's blocks ------------------------------------------------ */

void crsched_blocks_free(blocks *b) {
  free(b->counts);
  free(b->prefix);
}

/* From --counts (p comma-separated lengths) or an even cut of `count`.
 * 0, or EXIT_USAGE after saying why (or 1 on out of memory). */
int crsched_blocks_make(blocks *b, int32_t p, uint64_t count,
                        const char *counts_arg) {
  b->p = p;
  b->counts = malloc(sizeof *b->counts * (size_t)p);
  b->prefix = malloc(sizeof *b->prefix * ((size_t)p + 1));
  if (b->counts == NULL || b->prefix == NULL) {
    crsched_blocks_free(b);
    fputs("crsched: out of memory\n", stderr);
    return 1;
  }
  for (int32_t i = 0; i < p; i++) {
    uint64_t off;
    crnet__block_range(count, p, i, &off, &b->counts[i]);
  }
  if (counts_arg != NULL) {
    const char *s = counts_arg;
    int32_t i = 0;
    for (; *s != '\0' && i < p; i++) {
      char num[32];
      size_t len = strcspn(s, ",");
      if (len == 0 || len >= sizeof num)
        break;
      memcpy(num, s, len);
      num[len] = '\0';
      if (!crsched_parse_u64(num, &b->counts[i]))
        break;
      s += len;
      if (*s == ',' && s[1] != '\0')
        s++;
    }
    if (i != p || *s != '\0') {
      crsched_blocks_free(b);
      return crsched_bad_usage("--counts needs %d comma-separated lengths", p);
    }
  }
  b->prefix[0] = 0;
  for (int32_t i = 0; i < p; i++)
    b->prefix[i + 1] = b->prefix[i] + b->counts[i];
  return 0;
}

layout crsched_layout_of(const crnet__call *call, const blocks *b) {
  layout l = {{0, 0, -1}};
  int64_t own = (int64_t)b->prefix[call->rank];
  if (call->coll == CRNET_COLL_REDUCE_SCATTER && !call->in_place)
    l.base[CRNET__BUF_RECV] = own;
  if (call->coll == CRNET_COLL_ALLGATHER || call->coll == CRNET_COLL_GATHER)
    l.base[CRNET__BUF_SEND] = own;
  if (call->coll == CRNET_COLL_SCATTER && !call->in_place)
    l.base[CRNET__BUF_RECV] = own;
  if (call->coll == CRNET_COLL_BARRIER || call->coll == CRNET_COLL_SCAN)
    l.base[CRNET__BUF_SEND] = l.base[CRNET__BUF_RECV] = -1; /* not blocks */
  return l;
}

/* Index of the last prefix entry <= x. */
static int32_t last_at_most(const blocks *b, uint64_t x) {
  int32_t lo = 0, hi = b->p; /* prefix[lo] <= x always (prefix[0] = 0) */
  while (lo < hi) {
    int32_t mid = lo + (hi - lo + 1) / 2;
    if (b->prefix[mid] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* The blocks a segment covers exactly, as [*first, *last]; false when it
 * is not a whole number of blocks of the vector. */
bool crsched_seg_blocks(const blocks *b, const layout *l, const crnet__seg *g,
                        int32_t *first, int32_t *last) {
  uint64_t lo, hi;
  int32_t end;
  if (g->buf >= CRNET__BUF_COUNT || l->base[g->buf] < 0 || g->count == 0)
    return false;
  lo = (uint64_t)l->base[g->buf] + g->off;
  hi = lo + g->count;
  if (hi > b->prefix[b->p])
    return false;
  *first = last_at_most(b, lo); /* skips zero-length blocks starting at lo */
  end = last_at_most(b, hi - 1) + 1;
  if (b->prefix[*first] != lo || b->prefix[end] != hi)
    return false;
  *last = end - 1;
  return *first <= *last;
}

/* ---- skips ------------------------------------------------------------ */

int crsched_skips_make(skips *k, const char *name, int32_t p) {
  k->n = 0;
  k->s = malloc(sizeof *k->s * (size_t)p);
  if (k->s == NULL)
    return CRNET_ENOMEM;
  k->n = crnet__circulant_skips(name, p, k->s);
  if (k->n < 0)
    k->n = 0; /* not a circulant schedule */
  return 0;
}

/* The circulant phases of round `r` of a schedule with `nrounds` rounds:
 * (s', s) and the direction (+1: to rank+s, from rank-s, the reduce-scatter
 * rounds; -1: the reverse, the allgather rounds). False when the schedule's
 * rounds are not exactly the phases (another family, p = 1, ...). */
bool crsched_round_skip(const skips *k, crnet_collective coll, uint32_t nrounds,
                        uint32_t r, int32_t *sp, int32_t *s, int *dir) {
  uint32_t rs = k->n > 0 ? (uint32_t)k->n - 1 : 0, ag_first = rs;
  uint32_t expect = 2 * rs;
  if (coll == CRNET_COLL_REDUCE_SCATTER || coll == CRNET_COLL_BARRIER)
    expect = ag_first = rs;
  if (coll == CRNET_COLL_ALLGATHER) {
    expect = rs;
    ag_first = 0;
  }
  if (rs == 0 || nrounds != expect || r >= nrounds)
    return false;
  if (r < ag_first) {
    *sp = k->s[r];
    *s = k->s[r + 1];
    *dir = 1;
  } else {
    uint32_t j = r - ag_first;
    *sp = k->s[k->n - 2 - (int)j];
    *s = k->s[k->n - 1 - (int)j];
    *dir = -1;
  }
  return true;
}

/* ---- per-round totals --------------------------------------------------- */

round_totals crsched_round_sum(const crnet__schedule *s, uint32_t k) {
  const crnet__round *ro = &s->rounds[k];
  round_totals t = {ro->send.peer >= 0 || ro->recv.peer >= 0, false, 0, 0, 0,
                    0};
  if (ro->send.peer >= 0)
    t.sent = crnet__xfer_count(s, &ro->send);
  if (ro->recv.peer >= 0)
    t.recv = crnet__xfer_count(s, &ro->recv);
  for (uint32_t i = 0; i < ro->nsteps; i++) {
    const crnet__step *st = &s->steps[ro->first_step + i];
    if (st->kind == CRNET__STEP_REDUCE)
      t.reduced += st->src.count;
    else
      t.copied += st->src.count;
  }
  return t;
}

/* ---- viewing ------------------------------------------------------------ */

/* Everything the printers need about the one schedule shown. */
typedef struct view {
  const options *o;
  const char *name;
  const crnet__call *call;
  const crnet__schedule *s;
  const blocks *b;
  layout l;
  skips k;
} view;

static void text_segs(const view *v, const crnet__xfer *x) {
  for (uint32_t i = 0; i < x->nsegs; i++) {
    const crnet__seg *g = &v->s->segs[x->first_seg + i];
    int32_t b0, b1;
    printf(" %s[%" PRIu64 "+%" PRIu64 "]", buf_names[g->buf], g->off,
           g->count);
    if (crsched_seg_blocks(v->b, &v->l, g, &b0, &b1)) {
      if (b0 == b1)
        printf(" (block %d)", b0);
      else
        printf(" (blocks %d-%d)", b0, b1);
    }
  }
}

/* The blocks the paper's algorithm moves in round r, as R indices
 * [*i0, *i0 + *len) (block (rank + i) mod p for R index i): in the
 * reduce-scatter phase R[s..s'-1] is sent and T[0..s'-s-1] received, in the
 * allgather phase R[0..s'-s-1] is sent and R[s..s'-1] received. False when
 * the round is not a circulant phase round, or when the schedule moves a
 * different number of elements (the pruned rounds of bcast and reduce). */
static bool paper_blocks(const view *v, uint32_t r, bool send, uint64_t elems,
                         int32_t *i0, int32_t *len) {
  int32_t sp, s, p = v->s->p;
  int dir;
  uint64_t sum = 0;
  if (!crsched_round_skip(&v->k, v->call->coll, v->s->nrounds, r, &sp, &s,
                          &dir) ||
      v->call->coll == CRNET_COLL_BARRIER)
    return false;
  *len = sp - s;
  *i0 = (send == (dir > 0)) ? s : 0;
  for (int32_t i = *i0; i < *i0 + *len; i++)
    sum += v->b->counts[mod_p((int64_t)v->s->rank + i, p)];
  return sum == elems;
}

/* "blocks 21,0-9": the blocks of R[i0 .. i0+len), in order. */
static void text_block_ids(const view *v, int32_t i0, int32_t len) {
  int32_t p = v->s->p, a = mod_p((int64_t)v->s->rank + i0, p);
  int32_t b = mod_p((int64_t)a + len - 1, p);
  printf("R[%d..%d] = block%s ", i0, i0 + len - 1, len > 1 ? "s" : "");
  if (len == 1)
    printf("%d", a);
  else if (a <= b)
    printf("%d-%d", a, b);
  else {
    if (a == p - 1)
      printf("%d,", a);
    else
      printf("%d-%d,", a, p - 1);
    if (b == 0)
      printf("0");
    else
      printf("0-%d", b);
  }
}

static void text_xfer(const view *v, uint32_t r, bool send, uint64_t elems) {
  const crnet__round *ro = &v->s->rounds[r];
  const crnet__xfer *x = send ? &ro->send : &ro->recv;
  int32_t i0, len;
  if (x->peer < 0)
    return;
  printf("  %-9s %-5d", send ? "send to" : "recv from", x->peer);
  text_segs(v, x);
  if (x->nsegs == 0)
    printf(" (empty message)");
  printf("  %" PRIu64 " bytes\n", elems * v->o->dtype_size);
  if (paper_blocks(v, r, send, elems, &i0, &len)) {
    printf("            ");
    text_block_ids(v, i0, len);
    putchar('\n');
  }
}

static void text_steps(const view *v, const crnet__round *ro) {
  for (uint32_t i = 0; i < ro->nsteps; i++) {
    const crnet__step *st = &v->s->steps[ro->first_step + i];
    bool red = st->kind == CRNET__STEP_REDUCE;
    printf("  %-6s %s[%" PRIu64 "+%" PRIu64 "] -> %s[%" PRIu64 "]%s\n",
           red ? "reduce" : "copy", buf_names[st->src.buf], st->src.off,
           st->src.count, buf_names[st->dst.buf], st->dst.off,
           !red                         ? ""
           : st->order == CRNET__SRC_LEFT ? " (src on the left)"
                                          : " (dst on the left)");
  }
}

/* "s'=22 s=11", plus a warning if a peer contradicts the skip. */
static void text_skip(const view *v, uint32_t r) {
  const crnet__round *ro = &v->s->rounds[r];
  int32_t sp, s, p = v->s->p, me = v->s->rank;
  int dir;
  if (!crsched_round_skip(&v->k, v->call->coll, v->s->nrounds, r, &sp, &s,
                          &dir))
    return;
  printf("  s'=%d s=%d %s", sp, s,
         dir > 0 ? "(reduce-scatter phase)" : "(allgather phase)");
  if ((ro->send.peer >= 0 && ro->send.peer != mod_p(me + (int64_t)dir * s, p)) ||
      (ro->recv.peer >= 0 && ro->recv.peer != mod_p(me - (int64_t)dir * s, p)))
    printf("  WARNING: peers do not match the skip");
}

static void text_header(const view *v) {
  const crnet__call *c = v->call;
  printf("%s, schedule %s, p = %d, rank %d",
         crsched_coll_label(c->coll, c->exclusive), v->name, c->p, c->rank);
  if (c->coll == CRNET_COLL_BCAST || c->coll == CRNET_COLL_REDUCE)
    printf(", root %d", c->root);
  printf("%s: %u rounds\n", c->in_place ? ", in place" : "", v->s->nrounds);
  if (c->coll != CRNET_COLL_BARRIER)
    printf("vector: %" PRIu64 " elements of %" PRIu64
           " bytes in %d blocks; TEMP: %" PRIu64 " elements\n",
           v->b->prefix[c->p], v->o->dtype_size, c->p, v->s->temp_count);
  if (c->coll == CRNET_COLL_BCAST && strcmp(v->name, "ring") == 0)
    printf("the chain sends it in %d pieces (the cost model's choice)\n",
           (int)crnet__chain_pieces(c));
  if (v->k.n > 1) {
    printf("skips s:");
    for (int i = 0; i < v->k.n; i++)
      printf(" %d", v->k.s[i]);
    putchar('\n');
  }
}

static void print_text(const view *v) {
  text_header(v);
  if (strcmp(v->name, "two-level") == 0) {
    char levels[600];
    if (crnet__twolevel_describe(v->call, levels, sizeof levels) == 0)
      printf("levels: %s\n", levels);
  }
  for (uint32_t r = 0; r < v->s->nrounds; r++) {
    const crnet__round *ro = &v->s->rounds[r];
    round_totals t = crsched_round_sum(v->s, r);
    printf("round %u", r);
    text_skip(v, r);
    if (!t.comm)
      printf("  (local steps only)");
    putchar('\n');
    text_xfer(v, r, true, t.sent);
    text_xfer(v, r, false, t.recv);
    text_steps(v, ro);
  }
}

static void json_seg(const crnet__seg *g) {
  printf("[\"%s\",%" PRIu64 ",%" PRIu64 "]", buf_names[g->buf], g->off,
         g->count);
}

/* "send_blocks":[[buf,off,count],...],"send_block_ranges":[[b0,b1]|null..] */
static void json_xfer(const view *v, const crnet__xfer *x, const char *key) {
  printf(",\"%s_blocks\":[", key);
  for (uint32_t i = 0; i < x->nsegs; i++) {
    if (i > 0)
      putchar(',');
    json_seg(&v->s->segs[x->first_seg + i]);
  }
  printf("],\"%s_block_ranges\":[", key);
  for (uint32_t i = 0; i < x->nsegs; i++) {
    int32_t b0, b1;
    if (i > 0)
      putchar(',');
    if (crsched_seg_blocks(v->b, &v->l, &v->s->segs[x->first_seg + i], &b0,
                           &b1))
      printf("[%d,%d]", b0, b1);
    else
      printf("null");
  }
  putchar(']');
}

/* ,"send_block_ids":[...] or null: see paper_blocks. */
static void json_block_ids(const view *v, uint32_t r, bool send,
                           uint64_t elems) {
  int32_t i0, len;
  printf(",\"%s_block_ids\":", send ? "send" : "recv");
  if (!paper_blocks(v, r, send, elems, &i0, &len)) {
    printf("null");
    return;
  }
  putchar('[');
  for (int32_t i = 0; i < len; i++)
    printf("%s%d", i > 0 ? "," : "",
           mod_p((int64_t)v->s->rank + i0 + i, v->s->p));
  putchar(']');
}

static void json_steps(const view *v, const crnet__round *ro) {
  printf(",\"steps\":[");
  for (uint32_t i = 0; i < ro->nsteps; i++) {
    const crnet__step *st = &v->s->steps[ro->first_step + i];
    bool red = st->kind == CRNET__STEP_REDUCE;
    printf("%s{\"op\":\"%s\",\"src\":", i > 0 ? "," : "",
           red ? "reduce" : "copy");
    json_seg(&st->src);
    printf(",\"dst\":");
    json_seg(&st->dst);
    if (red)
      printf(",\"order\":\"%s\"",
             st->order == CRNET__SRC_LEFT ? "src-left" : "dst-left");
    putchar('}');
  }
  putchar(']');
}

static void print_json_round(const view *v, uint32_t r) {
  const crnet__round *ro = &v->s->rounds[r];
  round_totals t = crsched_round_sum(v->s, r);
  uint64_t b = v->o->dtype_size;
  int32_t sp, s;
  int dir;
  printf("{\"round\":%u,\"send_to\":%d,\"recv_from\":%d", r, ro->send.peer,
         ro->recv.peer);
  if (crsched_round_skip(&v->k, v->call->coll, v->s->nrounds, r, &sp, &s, &dir))
    printf(",\"s_prev\":%d,\"skip\":%d,\"phase\":\"%s\"", sp, s,
           dir > 0 ? "reduce-scatter" : "allgather");
  else
    printf(",\"s_prev\":null,\"skip\":null,\"phase\":null");
  json_xfer(v, &ro->send, "send");
  json_xfer(v, &ro->recv, "recv");
  json_block_ids(v, r, true, t.sent);
  json_block_ids(v, r, false, t.recv);
  printf(",\"bytes\":{\"sent\":%" PRIu64 ",\"recv\":%" PRIu64
         ",\"reduced\":%" PRIu64 ",\"copied\":%" PRIu64 "}",
         t.sent * b, t.recv * b, t.reduced * b, t.copied * b);
  json_steps(v, ro);
  puts("}");
}

/* Resolves the schedule for the call; on failure prints crnet__select's
 * reason and returns EXIT_USAGE. */
int crsched_resolve(const char *requested, const crnet__call *call,
                    const char **name) {
  char why[256] = "";
  uint32_t id;
  int rc = crnet__select(requested, call, name, &id, why, sizeof why);
  if (rc == 0)
    return 0;
  fprintf(stderr, "crsched: %s\n", why[0] != '\0' ? why : crnet_strerror(rc));
  return rc == CRNET_ENOMEM ? 1 : EXIT_USAGE;
}

crnet__call crsched_call_for(const options *o, crnet_collective coll,
                             bool exclusive, int32_t rank, const blocks *b) {
  crnet__call c;
  memset(&c, 0, sizeof c);
  c.coll = coll;
  c.exclusive = exclusive;
  c.esize = (uint32_t)o->dtype_size;
  c.p = o->p;
  c.rank = rank;
  /* alltoall: the blocks are the p blocks of count per peer; alltoallv:
   * the same, as per-peer counts and packed displacements */
  c.count = is_a2a(coll)
                ? b->counts[0]
                : b->prefix[o->p];
  c.counts = b->counts;
  if (coll == CRNET_COLL_ALLTOALLV) {
    c.sdispls = c.rdispls = b->prefix;
    c.rcounts = b->counts;
  }
  c.root = o->root;
  c.in_place = o->in_place;
  c.commutative = true;
  c.tuning = o->job_tuning;
  c.host = o->host;
  c.nhosts = o->nhosts;
  /* one host: the job's links are shared memory */
  c.shm_links = o->host != NULL && o->nhosts == 1;
  return c;
}

int crsched_build_or_complain(const char *name, const crnet__call *call,
                              crnet__schedule *s) {
  int rc = crnet__build(name, call, s);
  if (rc != 0)
    fprintf(stderr, "crsched: building %s for %s at p = %d, rank %d: %s\n",
            name, crsched_coll_label(call->coll, call->exclusive), call->p,
            call->rank, crnet_strerror(rc));
  return rc;
}

static int view_main(const options *o) {
  blocks b;
  crnet__call call;
  crnet__schedule s;
  view v;
  uint64_t count = o->have_count ? o->count : (uint64_t)o->p;
  int rc;
  if (is_a2a(o->coll)) {
    if (!o->have_count)
      count = 1;
    if (count > UINT64_MAX / (uint64_t)o->p)
      return crsched_bad_usage("--count %" PRIu64 " is too large", count);
    count *= (uint64_t)o->p;
  }
  rc = crsched_blocks_make(&b, o->p, count, o->counts_arg);
  if (rc != 0)
    return rc;
  call = crsched_call_for(o, o->coll, o->exclusive, o->rank, &b);
  memset(&v, 0, sizeof v);
  rc = crsched_resolve(o->schedule != NULL ? o->schedule : "auto", &call,
                       &v.name);
  if (rc != 0)
    goto out_blocks;
  rc = crsched_build_or_complain(v.name, &call, &s) != 0 ? 1 : 0;
  if (rc != 0)
    goto out_blocks;
  if (crsched_skips_make(&v.k, v.name, o->p) != 0) {
    fputs("crsched: out of memory\n", stderr);
    rc = 1;
    goto out_sched;
  }
  if (call.coll == CRNET_COLL_SCAN)
    v.k.n = 0; /* dissemination: no circulant skip phases to annotate */
  v.o = o;
  v.call = &call;
  v.s = &s;
  v.b = &b;
  v.l = crsched_layout_of(&call, &b);
  if (o->json)
    for (uint32_t r = 0; r < s.nrounds; r++)
      print_json_round(&v, r);
  else
    print_text(&v);
  free(v.k.s);
out_sched:
  crnet__sched_free(&s);
out_blocks:
  crsched_blocks_free(&b);
  return rc;
}

/* --list: the registry's rows, in auto's order of preference on equal
 * prices. */
static int list_main(const options *o) {
  if (!o->json)
    printf("%-19s %3s %-5s %s\n", "schedule", "id", "auto", "collectives");
  for (size_t i = 0; i < crnet__nalgorithms; i++) {
    const crnet__algorithm *a = crnet__algorithms[i];
    char colls[256] = "";
    size_t at = 0;
    for (int c = 0; c < CRNET_COLL_COUNT; c++)
      if ((a->colls & CRNET__COLL_BIT(c)) != 0 && at < sizeof colls)
        at += (size_t)snprintf(colls + at, sizeof colls - at,
                               o->json ? "%s\"%s\"" : "%s%s",
                               at > 0 ? (o->json ? "," : " ") : "",
                               crnet_collective_name((crnet_collective)c));
    if (o->json)
      printf("{\"schedule\":\"%s\",\"id\":%u,\"auto\":%s,"
             "\"collectives\":[%s],\"summary\":\"%s\"}\n",
             a->name, (unsigned)a->id, a->in_auto ? "true" : "false", colls,
             a->summary);
    else
      printf("%-19s %3u %-5s %s\n%24s%s\n", a->name, (unsigned)a->id,
             a->in_auto ? "yes" : "no", colls, "", a->summary);
  }
  return 0;
}

static int run(const options *o) {
  if (o->autosel)
    return crsched_auto_main(o);
  if (o->crossover)
    return crsched_crossover_main(o);
  if (o->sweep)
    return o->verify ? crsched_verify_main(o) : crsched_sweep_main(o);
  if (o->dot)
    return crsched_dot_main(o);
  if (o->list)
    return list_main(o);
  return o->cost ? crsched_cost_main(o) : view_main(o);
}

int main(int argc, char **argv) {
  options o;
  crnet__tuning t;
  int rc = crsched_parse_options(argc, argv, &o);
  if (rc != 0)
    return rc == 1 ? 0 : rc;
  if (crsched_load_tuning(&o, &t) != 0) {
    free(o.host);
    return 1;
  }
  o.job_tuning = &t;
  rc = run(&o);
  free(o.host);
  return rc;
}
