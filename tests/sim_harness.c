/* The simulator tests' harness (sim_harness.h): buffers, aliasing, the
 * serial references and the run of one case. */
#include "sim_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "check_main.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

bool sim_is_rooted(crnet_collective c) {
  return c == CRNET_COLL_BCAST || c == CRNET_COLL_REDUCE ||
         c == CRNET_COLL_GATHER || c == CRNET_COLL_SCATTER;
}

bool sim_takes_blocks(crnet_collective c) {
  return c == CRNET_COLL_REDUCE_SCATTER || c == CRNET_COLL_ALLGATHER ||
         c == CRNET_COLL_GATHER || c == CRNET_COLL_SCATTER;
}

bool sim_is_reducing(crnet_collective c) {
  return (CRNET__REDUCING_COLLS & CRNET__COLL_BIT(c)) != 0;
}

bool sim_quick(void) {
  const char *q = getenv("CRNET_SIM_QUICK");
  return q != NULL && strcmp(q, "1") == 0;
}

const int32_t sim_quick_ps[] = {1,  2,  3,  4,  5,  6,  7,  8,  9, 12,
                                13, 15, 16, 17, 24, 25, 31, 32, 33};
const size_t sim_quick_nps = sizeof sim_quick_ps / sizeof sim_quick_ps[0];

bool sim_quick_p(int32_t p) {
  for (size_t i = 0; i < sim_quick_nps; i++)
    if (sim_quick_ps[i] == p)
      return true;
  return false;
}

/* A case allocates every rank's schedule, buffers and messages, up to
 * hundreds of MiB at p = 1000, and frees them all. glibc hands blocks over
 * 128 KiB to mmap and gives freed memory at the top of the heap back to the
 * kernel, so every case paid a page fault per 4 KiB it touched again, and a
 * growing schedule's realloc copied into fresh pages: about a third of a
 * driver's time. Keeping the memory (as the program's peak stays mapped
 * anyway) leaves every allocation checked as before; AddressSanitizer's
 * allocator ignores these settings. */
static void keep_freed_memory(void) {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest */
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

Suite *sim_suite(const char *name, const char *tcase, TCase **tc) {
  Suite *s = suite_create(name);
  keep_freed_memory();
  *tc = tcase_create(tcase);
  tcase_set_timeout(*tc, 300);
  suite_add_tcase(s, *tc);
  return s;
}

int sim_check_run(Suite *s) {
  SRunner *sr = srunner_create(s);
  int failed;
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  failed = check_failures(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

void sim_split(uint64_t m, int32_t p, uint64_t *c) {
  uint64_t off;
  for (int32_t b = 0; b < p; b++)
    crnet__block_range(m, p, b, &off, &c[b]);
}

/* ------------------------------------------------------------------------
 * Alltoallv's pair shapes
 */

const char *const sim_pair_shape_name[SIM_NPAIR_SHAPES] = {
    "pairs random 0..4", "pairs of 2", "pairs empty",
    "pairs only to and from p/2"};

/* Elements rank src sends rank dst in an alltoallv. */
static uint64_t pair_count(int shape, int32_t p, int32_t src, int32_t dst) {
  switch (shape) {
  case 0:
    return mix((uint64_t)src << 32 | (uint64_t)dst) % 5;
  case 1:
    return 2;
  case 2:
    return 0;
  default:
    return src == p / 2 || dst == p / 2 ? 9 : 0;
  }
}

sim_vargs *sim_vargs_make(int shape, int32_t p) {
  sim_vargs *v = calloc((size_t)p, sizeof *v);
  EXPECT(v, "out of memory");
  for (int32_t r = 0; r < p; r++) {
    sim_vargs *a = &v[r];
    uint64_t at = 0;
    a->scounts = malloc((size_t)p * sizeof *a->scounts);
    a->sdispls = malloc((size_t)p * sizeof *a->sdispls);
    a->rcounts = malloc((size_t)p * sizeof *a->rcounts);
    a->rdispls = malloc((size_t)p * sizeof *a->rdispls);
    EXPECT(a->scounts && a->sdispls && a->rcounts && a->rdispls,
           "out of memory");
    for (int32_t j = 0; j < p; j++) {
      a->scounts[j] = pair_count(shape, p, r, j);
      a->sdispls[j] = at + (uint64_t)j + 1;
      at += a->scounts[j];
    }
    a->slen = at + (uint64_t)p + 1;
    at = 0;
    for (int32_t j = p - 1; j >= 0; j--) {
      a->rcounts[j] = pair_count(shape, p, j, r);
      a->rdispls[j] = at + 2 * (uint64_t)(p - j);
      at += a->rcounts[j];
    }
    a->rlen = at + 2 * (uint64_t)p + 2;
  }
  return v;
}

void sim_vargs_free(sim_vargs *v, int32_t p) {
  for (int32_t r = 0; v != NULL && r < p; r++) {
    free(v[r].scounts);
    free(v[r].sdispls);
    free(v[r].rcounts);
    free(v[r].rdispls);
  }
  free(v);
}

/* ------------------------------------------------------------------------
 * In place, and what a case is called
 */

bool sim_rank_in_place(const sim_case *k, int32_t r) {
  switch (k->coll) {
  case CRNET_COLL_BCAST:
    return true;
  case CRNET_COLL_BARRIER:
  case CRNET_COLL_ALLTOALLV:
    return false;
  case CRNET_COLL_REDUCE:
  case CRNET_COLL_GATHER:
  case CRNET_COLL_SCATTER:
    return k->in_place != SIM_NOT_IN_PLACE && r == k->root;
  default:
    return k->in_place == SIM_IN_PLACE ||
           (k->in_place == SIM_ODD_IN_PLACE && r % 2 == 1);
  }
}

/* SEND is RECV on this rank (exec.c: in place, but for a scatter, whose
 * in place keeps the root's data in SEND). */
static bool aliased(const sim_case *k, int32_t r) {
  return sim_rank_in_place(k, r) && k->coll != CRNET_COLL_SCATTER;
}

static const char *in_place_name(const sim_case *k) {
  if (k->coll == CRNET_COLL_BCAST)
    return "in place (bcast)";
  if (k->in_place == SIM_NOT_IN_PLACE)
    return "not in place";
  if (sim_is_rooted(k->coll))
    return "root in place";
  return k->in_place == SIM_ODD_IN_PLACE ? "odd ranks in place" : "in place";
}

void sim_describe(sim_case *k, const char *extra) {
  snprintf(k->what, sizeof k->what,
           "'%s' %s%s p=%d count %llu%s root %d, %s, %s operator%s%s",
           k->row != NULL ? k->row : "builder", k->exclusive ? "ex" : "",
           crnet_collective_name(k->coll), (int)k->p,
           (unsigned long long)k->count, k->counts != NULL ? " (blocks)" : "",
           (int)k->root, in_place_name(k),
           k->op != NULL ? "its own"
           : k->affine   ? "affine"
                         : "sum",
           extra != NULL ? ", " : "", extra != NULL ? extra : "");
}

/* ------------------------------------------------------------------------
 * Building
 */

crnet__call sim_call_of(const sim_case *k, int32_t r) {
  crnet__call c = {.coll = k->coll,
                   .p = k->p,
                   .rank = r,
                   .count = k->count,
                   .counts = k->counts,
                   .uniform = k->uniform,
                   .displs = k->displs,
                   .root = k->root,
                   .in_place = sim_rank_in_place(k, r),
                   .commutative = !k->affine && k->op == NULL,
                   .exclusive = k->exclusive,
                   .esize = 8,
                   .host = k->host,
                   .nhosts = k->nhosts,
                   .tuning = k->tuning};
  if (k->coll == CRNET_COLL_ALLTOALLV) {
    c.counts = k->v[r].scounts;
    c.sdispls = k->v[r].sdispls;
    c.rcounts = k->v[r].rcounts;
    c.rdispls = k->v[r].rdispls;
  }
  return c;
}

static int build(const sim_case *k, const crnet__call *call,
                 crnet__schedule *out) {
  return k->build != NULL ? k->build(call, out, k->build_arg)
                          : crnet__build(k->row, call, out);
}

static bool seg_same(const crnet__seg *a, const crnet__seg *b) {
  return a->buf == b->buf && a->off == b->off && a->count == b->count;
}

static bool xfer_same(const crnet__xfer *a, const crnet__xfer *b) {
  return a->peer == b->peer && a->first_seg == b->first_seg &&
         a->nsegs == b->nsegs;
}

/* Field by field: the structs have padding, which memcmp would compare. */
static bool sched_same(const crnet__schedule *a, const crnet__schedule *b) {
  if (a->p != b->p || a->rank != b->rank || a->temp_count != b->temp_count ||
      a->nrounds != b->nrounds || a->nsegs != b->nsegs ||
      a->nsteps != b->nsteps)
    return false;
  for (uint32_t i = 0; i < a->nrounds; i++) {
    const crnet__round *x = &a->rounds[i], *y = &b->rounds[i];
    if (!xfer_same(&x->send, &y->send) || !xfer_same(&x->recv, &y->recv) ||
        x->first_step != y->first_step || x->nsteps != y->nsteps ||
        x->independent != y->independent)
      return false;
  }
  for (uint32_t i = 0; i < a->nsegs; i++)
    if (!seg_same(&a->segs[i], &b->segs[i]))
      return false;
  for (uint32_t i = 0; i < a->nsteps; i++) {
    const crnet__step *x = &a->steps[i], *y = &b->steps[i];
    if (x->kind != y->kind || x->order != y->order ||
        !seg_same(&x->src, &y->src) || !seg_same(&x->dst, &y->dst))
      return false;
  }
  return true;
}

/* Aliases SEND to RECV in rank r's schedule, as the executor does for a
 * rank in place. Writing SEND is an error the simulator reports only for
 * what it still calls SEND, so it is looked for first. */
static void alias_send(crnet__schedule *s, const char *what, int32_t r) {
  for (uint32_t k = 0; k < s->nrounds; k++) {
    const crnet__round *ro = &s->rounds[k];
    for (uint32_t i = 0; i < ro->recv.nsegs; i++)
      EXPECT(s->segs[ro->recv.first_seg + i].buf != CRNET__BUF_SEND,
             "%s: rank %d receives into SEND in round %u", what, (int)r, k);
    for (uint32_t i = 0; i < ro->nsteps; i++)
      EXPECT(s->steps[ro->first_step + i].dst.buf != CRNET__BUF_SEND,
             "%s: rank %d writes SEND in round %u", what, (int)r, k);
  }
  for (uint32_t i = 0; i < s->nsegs; i++)
    if (s->segs[i].buf == CRNET__BUF_SEND)
      s->segs[i].buf = CRNET__BUF_RECV;
  for (uint32_t i = 0; i < s->nsteps; i++) {
    if (s->steps[i].src.buf == CRNET__BUF_SEND)
      s->steps[i].src.buf = CRNET__BUF_RECV;
    if (s->steps[i].dst.buf == CRNET__BUF_SEND)
      s->steps[i].dst.buf = CRNET__BUF_RECV;
  }
}

/* ------------------------------------------------------------------------
 * Buffers
 */

static uint64_t value_of(const sim_case *k, int32_t r, uint64_t e) {
  return k->value != NULL ? k->value(r, e) : sim_value(r, e, k->affine);
}

static crnet__sim_combine op_of(const sim_case *k) {
  return k->op != NULL ? k->op : k->affine ? op_affine : op_sum;
}

/* Rank r's input: a new array of *len elements, which belongs at element
 * *off of RECV when the rank is aliased. */
static uint64_t *input_of(const sim_case *k, int32_t r, const uint64_t *P,
                          uint64_t m, uint64_t *len, uint64_t *off) {
  uint64_t n = 0, *in;
  *off = 0;
  switch (k->coll) {
  case CRNET_COLL_ALLREDUCE:
  case CRNET_COLL_REDUCE_SCATTER:
  case CRNET_COLL_REDUCE:
  case CRNET_COLL_SCAN:
  case CRNET_COLL_ALLTOALL:
    n = m;
    break;
  case CRNET_COLL_ALLGATHER:
  case CRNET_COLL_GATHER:
    n = k->counts[r];
    *off = P[r];
    break;
  case CRNET_COLL_BCAST:
  case CRNET_COLL_SCATTER:
    n = r == k->root ? m : 0;
    break;
  case CRNET_COLL_ALLTOALLV:
    n = k->v[r].slen;
    break;
  default:
    break;
  }
  in = malloc((n ? n : 1) * sizeof *in);
  EXPECT(in, "out of memory");
  for (uint64_t e = 0; e < n; e++)
    switch (k->coll) {
    case CRNET_COLL_ALLGATHER:
    case CRNET_COLL_BCAST:
      in[e] = sim_encode(r, 0, e);
      break;
    case CRNET_COLL_GATHER:
      in[e] = sim_encode(r, k->root, e);
      break;
    case CRNET_COLL_ALLTOALL:
      in[e] = sim_encode(r, (int32_t)(e / k->count), e % k->count);
      break;
    case CRNET_COLL_ALLTOALLV:
      in[e] = GAP;
      break;
    default:
      in[e] = value_of(k, r, e);
      break;
    }
  if (k->coll == CRNET_COLL_SCATTER)
    for (int32_t b = 0; b < k->p && n > 0; b++)
      for (uint64_t e = 0; e < k->counts[b]; e++)
        in[P[b] + e] = sim_encode(r, b, e);
  if (k->coll == CRNET_COLL_ALLTOALLV)
    for (int32_t j = 0; j < k->p; j++)
      for (uint64_t e = 0; e < k->v[r].scounts[j]; e++)
        in[k->v[r].sdispls[j] + e] = sim_encode(r, j, e);
  *len = n;
  return in;
}

/* Elements of rank r's RECV: what the program would pass, and no more, so
 * that a write beyond it is an error of the simulator. */
static uint64_t recv_len(const sim_case *k, int32_t r, uint64_t m) {
  switch (k->coll) {
  case CRNET_COLL_REDUCE_SCATTER:
    return sim_rank_in_place(k, r) ? m : k->counts[r];
  case CRNET_COLL_REDUCE:
  case CRNET_COLL_GATHER:
    return r == k->root ? m : 0;
  case CRNET_COLL_SCATTER:
    return sim_rank_in_place(k, r) ? 0 : k->counts[r];
  case CRNET_COLL_ALLTOALLV:
    return k->v[r].rlen;
  case CRNET_COLL_BARRIER:
    return 0;
  default:
    return m;
  }
}

/* ------------------------------------------------------------------------
 * The serial references: one per collective
 */

static void fail_element(const sim_case *k, int32_t r, uint64_t i, uint64_t got,
                         uint64_t want) {
  char note[160] = "";
  if (got == SENTINEL)
    snprintf(note, sizeof note, " (never written)");
  else if (!sim_is_reducing(k->coll) && got >> 63)
    snprintf(note, sizeof note,
             " (element %llu of the block from rank %d to rank %d)",
             (unsigned long long)(got & 0xfffff), (int)(got >> 40 & 0x7fffff),
             (int)(got >> 20 & 0xfffff));
  ck_abort_msg("%s: rank %d RECV[%llu] is %#llx%s, the reference %#llx",
               k->what, (int)r, (unsigned long long)i, (unsigned long long)got,
               note, (unsigned long long)want);
}

#define SAME(k, r, i, got, want)                                               \
  do {                                                                         \
    if ((got) != (want))                                                       \
      fail_element(k, r, i, got, want);                                        \
  } while (0)

/* acc[0..m): allreduce, reduce and reduce-scatter's reference (sim_run
 * folds it as it makes the inputs); scratch for the others. */
static void check_results(const sim_case *k, const crnet__sim_rank *rk,
                          const uint64_t *P, uint64_t m, uint64_t *acc) {
  crnet__sim_combine op = op_of(k);
  int32_t p = k->p;
  for (int32_t r = 0; r < p; r++) {
    const uint64_t *o = rk[r].recv;
    switch (k->coll) {
    case CRNET_COLL_ALLREDUCE:
      for (uint64_t e = 0; e < m; e++)
        SAME(k, r, e, o[e], acc[e]);
      break;
    case CRNET_COLL_REDUCE:
      for (uint64_t e = 0; r == k->root && e < m; e++)
        SAME(k, r, e, o[e], acc[e]);
      break;
    case CRNET_COLL_REDUCE_SCATTER:
      /* in place, the rest of RECV is the schedule's (as in MPI) */
      for (uint64_t e = 0; e < k->counts[r]; e++)
        SAME(k, r, e, o[e], acc[P[r] + e]);
      break;
    case CRNET_COLL_SCAN:
      /* acc: the prefix of the ranks before r */
      for (uint64_t e = 0; e < m; e++) {
        uint64_t v = value_of(k, r, e);
        uint64_t with = r > 0 ? op(acc[e], v) : v;
        if (!k->exclusive)
          SAME(k, r, e, o[e], with);
        else if (r > 0)
          SAME(k, r, e, o[e], acc[e]);
        else /* rank 0's exscan result is undefined: RECV is left alone */
          SAME(k, r, e, o[e], aliased(k, r) ? v : SENTINEL);
        acc[e] = with;
      }
      break;
    case CRNET_COLL_ALLGATHER:
      for (int32_t b = 0; b < p; b++)
        for (uint64_t e = 0; e < k->counts[b]; e++)
          SAME(k, r, P[b] + e, o[P[b] + e], sim_encode(b, 0, e));
      break;
    case CRNET_COLL_BCAST:
      for (uint64_t e = 0; e < m; e++)
        SAME(k, r, e, o[e], sim_encode(k->root, 0, e));
      break;
    case CRNET_COLL_GATHER:
      for (int32_t b = 0; r == k->root && b < p; b++)
        for (uint64_t e = 0; e < k->counts[b]; e++)
          SAME(k, r, P[b] + e, o[P[b] + e], sim_encode(b, k->root, e));
      break;
    case CRNET_COLL_SCATTER:
      for (uint64_t e = 0; e < rk[r].recv_count; e++)
        SAME(k, r, e, o[e], sim_encode(k->root, r, e));
      break;
    case CRNET_COLL_ALLTOALL:
      for (int32_t b = 0; b < p; b++)
        for (uint64_t e = 0; e < k->count; e++) {
          uint64_t i = (uint64_t)b * k->count + e;
          SAME(k, r, i, o[i], sim_encode(b, r, e));
        }
      break;
    case CRNET_COLL_ALLTOALLV: {
      /* every block in place, every gap untouched */
      const sim_vargs *a = &k->v[r];
      uint64_t at = 0;
      for (int32_t j = p - 1; j >= 0; j--) {
        for (; at < a->rdispls[j]; at++)
          SAME(k, r, at, o[at], SENTINEL);
        for (uint64_t e = 0; e < a->rcounts[j]; e++, at++)
          SAME(k, r, at, o[at], sim_encode(j, r, e));
      }
      for (; at < a->rlen; at++)
        SAME(k, r, at, o[at], SENTINEL);
      break;
    }
    default: /* barrier: the simulator's causal check is the reference */
      break;
    }
  }
}

/* ------------------------------------------------------------------------
 * One case
 */

void sim_run(const sim_case *k, sim_claims claims, void *arg) {
  int32_t p = k->p;
  uint64_t *P = calloc((size_t)p + 1, sizeof *P), m, *acc;
  crnet__schedule *sc = calloc((size_t)p, sizeof *sc);
  crnet__sim_rank *rk = calloc((size_t)p, sizeof *rk);
  crnet__sim_combine op = op_of(k);
  bool fold = sim_is_reducing(k->coll) && k->coll != CRNET_COLL_SCAN;
  char err[512] = "";
  int rc;
  EXPECT(P && sc && rk, "out of memory");
  for (int32_t b = 0; b < p && k->counts != NULL; b++)
    P[b + 1] = P[b] + k->counts[b];
  m = k->counts != NULL                ? P[p]
      : k->coll == CRNET_COLL_ALLTOALL ? (uint64_t)p * k->count
                                       : k->count;
  acc = malloc((m ? m : 1) * sizeof *acc);
  EXPECT(acc, "out of memory");

  for (int32_t r = 0; r < p; r++) {
    crnet__call call = sim_call_of(k, r);
    rc = build(k, &call, &sc[r]);
    EXPECT(rc == 0, "%s: build rank %d: %d", k->what, (int)r, rc);
    if (k->probe_host != NULL) {
      crnet__schedule other;
      call.host = k->probe_host;
      call.nhosts = k->probe_nhosts;
      rc = build(k, &call, &other);
      EXPECT(rc == 0, "%s: build rank %d with hosts: %d", k->what, (int)r, rc);
      EXPECT(sched_same(&sc[r], &other),
             "%s: rank %d: a host layout changes the schedule of a row that "
             "is not host-aware",
             k->what, (int)r);
      crnet__sched_free(&other);
    }
    if (aliased(k, r))
      alias_send(&sc[r], k->what, r);
  }

  for (int32_t r = 0; r < p; r++) {
    crnet__sim_rank *q = &rk[r];
    uint64_t in_len, in_off, *in = input_of(k, r, P, m, &in_len, &in_off);
    uint64_t rn = recv_len(k, r, m);
    uint64_t *recv = malloc((rn ? rn : 1) * sizeof *recv);
    EXPECT(recv, "out of memory");
    /* the reference: the rank-order fold V_0 (+) ... (+) V_p-1 of the
     * inputs, as they are made (each input is all m elements) */
    for (uint64_t e = 0; fold && k->reference == NULL && e < m; e++)
      acc[e] = r == 0 ? in[e] : op(acc[e], in[e]);
    for (uint64_t e = 0; e < rn; e++)
      recv[e] = SENTINEL;
    q->sched = &sc[r];
    q->recv = recv;
    q->recv_count = rn;
    if (aliased(k, r)) {
      EXPECT(in_off + in_len <= rn, "%s: rank %d: input beyond RECV", k->what,
             (int)r);
      memcpy(recv + in_off, in, in_len * sizeof *in);
      q->init_off = in_off;
      q->init_count = in_len;
      free(in);
    } else {
      q->send = in;
      q->send_count = in_len;
    }
  }

  for (uint64_t e = 0; fold && k->reference != NULL && e < m; e++)
    acc[e] = k->reference(k, e);
  rc = crnet__sim_run(rk, p, false, k->causal || k->coll == CRNET_COLL_BARRIER,
                      op, err, sizeof err);
  EXPECT(rc == 0, "%s: %s", k->what, err);
  check_results(k, rk, P, m, acc);
  if (claims != NULL) {
    sim_result res = {sc, rk, P, m};
    claims(k, &res, arg);
  }

  for (int32_t r = 0; r < p; r++) {
    crnet__sched_free(&sc[r]);
    free((void *)rk[r].send);
    free(rk[r].recv);
  }
  free(acc);
  free(rk);
  free(sc);
  free(P);
}
