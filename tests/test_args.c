/* Argument checks of every public function in include/crnet.h.
 *
 * The contract (crnet.h, DESIGN.md): misuse -- a NULL comm, a NULL buffer
 * with count > 0, CRNET_IN_PLACE where it is not allowed, a datatype or
 * operator that does not exist or does not fit, a root out of range, a
 * count whose buffer cannot exist, a bad schedule name -- returns
 * CRNET_EINVAL, says why in crnet_comm_errmsg, changes nothing (no buffer
 * written, no collective begun, the schedule choice kept) and sends
 * nothing, so the comm stays usable and the ranks stay in step. A schedule
 * that cannot do a call returns CRNET_EUNSUPPORTED the same way.
 *
 *   ./test_args            suite 'unit': a job of one (no environment)
 *   ./test_args net        suite 'net': real jobs of 2, 3 and 4 ranks
 *
 * In the unit part every rejected call is checked for its code, a keyword
 * of its reason, an unchanged receive buffer and an unchanged collective
 * sequence number (the comm's internals: nothing began), and the comm is
 * checked to still compute right afterwards. In the net part every rank
 * first makes the same bad calls, each followed by a correct collective
 * whose result is checked; then one rank at a time makes a bad call that
 * the others do not make, and the next collective must still match across
 * ranks: a rejected call that sent anything, or counted a collective,
 * would make it fail with CRNET_EMISMATCH or hang (the job has a deadline
 * and the test fails naming the ranks still running).
 */
#include <check.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "comm.h"
#include "comm_state.h"
#include "crnet.h"
#include "netjob.h"
#include "select.h"

#define NBUF 64

static void noop_fn(const void *in, void *inout, size_t count,
                    crnet_datatype dt, void *ctx) {
  (void)in;
  (void)inout;
  (void)count;
  (void)dt;
  (void)ctx;
}

/* x -> a*x + b on uint64 elements packed a << 32 | b, composed in rank
 * order: not commutative. */
static void affine_fn(const void *in, void *inout, size_t count,
                      crnet_datatype dt, void *ctx) {
  const uint64_t *a = in;
  uint64_t *b = inout;
  (void)dt;
  (void)ctx;
  for (size_t i = 0; i < count; i++) {
    uint32_t a1 = (uint32_t)(a[i] >> 32), b1 = (uint32_t)a[i];
    uint32_t a2 = (uint32_t)(b[i] >> 32), b2 = (uint32_t)b[i];
    b[i] = (uint64_t)(uint32_t)(a1 * a2) << 32 | (uint32_t)(a2 * b1 + b2);
  }
}

/* --- the unit part: a job of one -------------------------------------------- */

static crnet_comm *comm;
static int64_t sbuf[NBUF], rbuf[NBUF], rbuf_before[NBUF];

static void singleton_setup(void) {
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  unsetenv("SLURM_PROCID");
  unsetenv("SLURM_NTASKS");
  unsetenv("CRNET_ALLREDUCE_SCHEDULE");
  unsetenv("CRNET_ALLTOALL_SCHEDULE");
  ck_assert_int_eq(crnet_comm_init(&comm, NULL), 0);
  ck_assert_int_eq(crnet_comm_size(comm), 1);
  for (int i = 0; i < NBUF; i++) {
    sbuf[i] = i + 1;
    rbuf[i] = rbuf_before[i] = -1000 - i;
  }
}

static void singleton_teardown(void) {
  ck_assert_int_eq(crnet_comm_destroy(comm), 0);
  comm = NULL;
}

/* A correct allreduce still gives the right answer, and its success
 * clears the reason of the last rejected call. */
static void still_works(int line) {
  int64_t in[3] = {5, -7, 11}, out[3] = {0, 0, 0};
  int rc = crnet_allreduce(comm, in, out, 3, CRNET_INT64, CRNET_SUM);
  ck_assert_msg(rc == 0, "line %d: allreduce after a rejected call: %s: %s",
                line, crnet_err_name(rc), crnet_comm_errmsg(comm));
  ck_assert_msg(out[0] == 5 && out[1] == -7 && out[2] == 11,
                "line %d: allreduce after a rejected call gave a wrong result",
                line);
  ck_assert_msg(crnet_comm_errmsg(comm)[0] == '\0',
                "line %d: errmsg '%s' left after a successful call", line,
                crnet_comm_errmsg(comm));
}

/* `call` on the comm must return `want` with `keyword` in errmsg, leave
 * rbuf and the collective sequence as they were, and the comm usable. */
#define REJECT(want, keyword, call)                                            \
  do {                                                                         \
    uint64_t seq0_ = comm->seq;                                                \
    int rc_ = (call);                                                          \
    ck_assert_msg(rc_ == (want), "line %d: %s returned %s, expected %s",       \
                  __LINE__, #call, crnet_err_name(rc_),                        \
                  crnet_err_name(want));                                       \
    ck_assert_msg(strstr(crnet_comm_errmsg(comm), (keyword)) != NULL,          \
                  "line %d: %s: reason '%s' does not say '%s'", __LINE__,      \
                  #call, crnet_comm_errmsg(comm), (keyword));                  \
    ck_assert_msg(comm->seq == seq0_, "line %d: %s began a collective",        \
                  __LINE__, #call);                                            \
    ck_assert_msg(memcmp(rbuf, rbuf_before, sizeof rbuf) == 0,                 \
                  "line %d: %s wrote the receive buffer", __LINE__, #call);    \
    still_works(__LINE__);                                                     \
  } while (0)

#define EINVAL_(keyword, call) REJECT(CRNET_EINVAL, keyword, call)

/* A call with a NULL comm: EINVAL and nothing written. */
#define NULL_COMM(call)                                                        \
  do {                                                                         \
    int rc_ = (call);                                                          \
    ck_assert_msg(rc_ == CRNET_EINVAL, "line %d: %s returned %s", __LINE__,    \
                  #call, crnet_err_name(rc_));                                 \
    ck_assert_msg(memcmp(rbuf, rbuf_before, sizeof rbuf) == 0,                 \
                  "line %d: %s wrote the receive buffer", __LINE__, #call);    \
  } while (0)

START_TEST(null_comm) {
  size_t counts[1] = {1};
  crnet_op op;
  NULL_COMM(crnet_allreduce(NULL, sbuf, rbuf, 1, CRNET_INT64, CRNET_SUM));
  NULL_COMM(crnet_reduce_scatter_block(NULL, sbuf, rbuf, 1, CRNET_INT64,
                                       CRNET_SUM));
  NULL_COMM(crnet_reduce_scatter(NULL, sbuf, rbuf, counts, CRNET_INT64,
                                 CRNET_SUM));
  NULL_COMM(crnet_scan(NULL, sbuf, rbuf, 1, CRNET_INT64, CRNET_SUM));
  NULL_COMM(crnet_exscan(NULL, sbuf, rbuf, 1, CRNET_INT64, CRNET_SUM));
  NULL_COMM(crnet_alltoall(NULL, sbuf, rbuf, 1, CRNET_INT64));
  NULL_COMM(crnet_allgather(NULL, sbuf, rbuf, 1, CRNET_INT64));
  NULL_COMM(crnet_bcast(NULL, rbuf, 1, CRNET_INT64, 0));
  NULL_COMM(crnet_reduce(NULL, sbuf, rbuf, 1, CRNET_INT64, CRNET_SUM, 0));
  NULL_COMM(crnet_barrier(NULL));
  NULL_COMM(crnet_comm_set_schedule(NULL, CRNET_COLL_ALLREDUCE, "ring"));
  NULL_COMM(crnet_comm_abort(NULL, 3));
  /* Even with count 0, a call needs a comm. */
  NULL_COMM(crnet_allreduce(NULL, NULL, NULL, 0, CRNET_INT64, CRNET_SUM));
  ck_assert_int_eq(crnet_comm_rank(NULL), -1);
  ck_assert_int_eq(crnet_comm_size(NULL), -1);
  ck_assert_int_eq(crnet_comm_abort_code(NULL), 0);
  ck_assert_ptr_nonnull(crnet_comm_errmsg(NULL));
  ck_assert_msg(strstr(crnet_comm_errmsg(NULL), "NULL") != NULL, "'%s'",
                crnet_comm_errmsg(NULL));
  ck_assert_int_eq(crnet_comm_destroy(NULL), 0);
  ck_assert_int_eq(crnet_op_create(&op, noop_fn, NULL, 1), 0);
  ck_assert_int_eq(crnet_op_free(&op), 0);
  still_works(__LINE__);
}
END_TEST

START_TEST(null_buffers) {
  size_t one[1] = {4}, zero[1] = {0};
  crnet_comm *c = comm;
  EINVAL_("NULL", crnet_allreduce(c, NULL, rbuf, 4, CRNET_INT64, CRNET_SUM));
  EINVAL_("NULL", crnet_allreduce(c, sbuf, NULL, 4, CRNET_INT64, CRNET_SUM));
  EINVAL_("NULL", crnet_allreduce(c, CRNET_IN_PLACE, NULL, 4, CRNET_INT64,
                                  CRNET_SUM));
  EINVAL_("NULL", crnet_reduce_scatter_block(c, NULL, rbuf, 4, CRNET_INT64,
                                             CRNET_SUM));
  EINVAL_("NULL", crnet_reduce_scatter_block(c, sbuf, NULL, 4, CRNET_INT64,
                                             CRNET_SUM));
  EINVAL_("NULL", crnet_reduce_scatter_block(c, CRNET_IN_PLACE, NULL, 4,
                                             CRNET_INT64, CRNET_SUM));
  EINVAL_("recvcounts", crnet_reduce_scatter(c, sbuf, rbuf, NULL, CRNET_INT64,
                                             CRNET_SUM));
  EINVAL_("NULL", crnet_reduce_scatter(c, NULL, rbuf, one, CRNET_INT64,
                                       CRNET_SUM));
  EINVAL_("NULL", crnet_reduce_scatter(c, sbuf, NULL, one, CRNET_INT64,
                                       CRNET_SUM));
  EINVAL_("NULL", crnet_reduce_scatter(c, CRNET_IN_PLACE, NULL, one,
                                       CRNET_INT64, CRNET_SUM));
  EINVAL_("NULL", crnet_scan(c, NULL, rbuf, 4, CRNET_INT64, CRNET_SUM));
  EINVAL_("NULL", crnet_scan(c, sbuf, NULL, 4, CRNET_INT64, CRNET_SUM));
  EINVAL_("NULL", crnet_exscan(c, NULL, rbuf, 4, CRNET_INT64, CRNET_SUM));
  EINVAL_("NULL", crnet_exscan(c, CRNET_IN_PLACE, NULL, 4, CRNET_INT64,
                               CRNET_SUM));
  EINVAL_("NULL", crnet_alltoall(c, NULL, rbuf, 4, CRNET_INT64));
  EINVAL_("NULL", crnet_alltoall(c, sbuf, NULL, 4, CRNET_INT64));
  EINVAL_("NULL", crnet_alltoall(c, CRNET_IN_PLACE, NULL, 4, CRNET_INT64));
  EINVAL_("NULL", crnet_allgather(c, NULL, rbuf, 4, CRNET_INT64));
  EINVAL_("NULL", crnet_allgather(c, sbuf, NULL, 4, CRNET_INT64));
  EINVAL_("NULL", crnet_allgather(c, CRNET_IN_PLACE, NULL, 4, CRNET_INT64));
  EINVAL_("NULL", crnet_bcast(c, NULL, 4, CRNET_INT64, 0));
  EINVAL_("NULL",
          crnet_reduce(c, NULL, rbuf, 4, CRNET_INT64, CRNET_SUM, 0));
  EINVAL_("NULL",
          crnet_reduce(c, sbuf, NULL, 4, CRNET_INT64, CRNET_SUM, 0));
  EINVAL_("NULL", crnet_reduce(c, CRNET_IN_PLACE, NULL, 4, CRNET_INT64,
                               CRNET_SUM, 0));

  /* Count 0: NULL buffers are fine everywhere. */
  ck_assert_int_eq(crnet_allreduce(c, NULL, NULL, 0, CRNET_INT64, CRNET_SUM),
                   0);
  ck_assert_int_eq(crnet_reduce_scatter_block(c, NULL, NULL, 0, CRNET_INT64,
                                              CRNET_SUM),
                   0);
  ck_assert_int_eq(
      crnet_reduce_scatter(c, NULL, NULL, zero, CRNET_INT64, CRNET_SUM), 0);
  ck_assert_int_eq(crnet_scan(c, NULL, NULL, 0, CRNET_INT64, CRNET_SUM), 0);
  ck_assert_int_eq(crnet_exscan(c, NULL, NULL, 0, CRNET_INT64, CRNET_SUM), 0);
  ck_assert_int_eq(crnet_alltoall(c, NULL, NULL, 0, CRNET_INT64), 0);
  ck_assert_int_eq(crnet_allgather(c, NULL, NULL, 0, CRNET_INT64), 0);
  ck_assert_int_eq(crnet_bcast(c, NULL, 0, CRNET_INT64, 0), 0);
  ck_assert_int_eq(
      crnet_reduce(c, NULL, NULL, 0, CRNET_INT64, CRNET_SUM, 0), 0);
  ck_assert_int_eq(crnet_allreduce(c, CRNET_IN_PLACE, NULL, 0, CRNET_INT64,
                                   CRNET_SUM),
                   0);
  /* ... but a NULL recvcounts is not, even when every count would be 0. */
  EINVAL_("recvcounts", crnet_reduce_scatter(c, NULL, NULL, NULL, CRNET_INT64,
                                             CRNET_SUM));
  ck_assert(memcmp(rbuf, rbuf_before, sizeof rbuf) == 0);
  still_works(__LINE__);
}
END_TEST

START_TEST(in_place_misuse) {
  crnet_comm *c = comm;
  void *ip = (void *)(uintptr_t)CRNET_IN_PLACE;
  size_t one[1] = {4};
  EINVAL_("IN_PLACE", crnet_allreduce(c, sbuf, ip, 4, CRNET_INT64, CRNET_SUM));
  EINVAL_("IN_PLACE", crnet_allreduce(c, CRNET_IN_PLACE, ip, 4, CRNET_INT64,
                                      CRNET_SUM));
  EINVAL_("IN_PLACE", crnet_reduce_scatter_block(c, sbuf, ip, 4, CRNET_INT64,
                                                 CRNET_SUM));
  EINVAL_("IN_PLACE", crnet_reduce_scatter(c, CRNET_IN_PLACE, ip, one,
                                           CRNET_INT64, CRNET_SUM));
  EINVAL_("IN_PLACE", crnet_scan(c, sbuf, ip, 4, CRNET_INT64, CRNET_SUM));
  EINVAL_("IN_PLACE", crnet_exscan(c, sbuf, ip, 4, CRNET_INT64, CRNET_SUM));
  EINVAL_("IN_PLACE", crnet_alltoall(c, sbuf, ip, 4, CRNET_INT64));
  EINVAL_("IN_PLACE", crnet_allgather(c, CRNET_IN_PLACE, ip, 4, CRNET_INT64));
  EINVAL_("IN_PLACE", crnet_bcast(c, ip, 4, CRNET_INT64, 0));
  EINVAL_("IN_PLACE",
          crnet_reduce(c, sbuf, ip, 4, CRNET_INT64, CRNET_SUM, 0));

  /* Distinct buffers that overlap: CRNET_IN_PLACE is the way to share. */
  memcpy(rbuf, rbuf_before, sizeof rbuf);
  EINVAL_("overlap", crnet_allreduce(c, rbuf, rbuf, 4, CRNET_INT64,
                                     CRNET_SUM));
  EINVAL_("overlap", crnet_allreduce(c, rbuf + 3, rbuf, 4, CRNET_INT64,
                                     CRNET_SUM));
  EINVAL_("overlap", crnet_scan(c, rbuf, rbuf + 2, 4, CRNET_INT64, CRNET_SUM));
  EINVAL_("overlap",
          crnet_exscan(c, rbuf, rbuf, 4, CRNET_INT64, CRNET_SUM));
  EINVAL_("overlap", crnet_reduce_scatter_block(c, rbuf, rbuf, 4, CRNET_INT64,
                                                CRNET_SUM));
  EINVAL_("overlap", crnet_reduce_scatter(c, rbuf + 1, rbuf, one, CRNET_INT64,
                                          CRNET_SUM));
  EINVAL_("overlap", crnet_alltoall(c, rbuf, rbuf, 4, CRNET_INT64));
  EINVAL_("overlap", crnet_allgather(c, rbuf, rbuf, 4, CRNET_INT64));
  EINVAL_("overlap",
          crnet_reduce(c, rbuf, rbuf, 4, CRNET_INT64, CRNET_SUM, 0));
  /* Adjacent is not overlapping. */
  {
    int64_t two[8] = {1, 2, 3, 4, 0, 0, 0, 0};
    ck_assert_int_eq(
        crnet_allreduce(c, two, two + 4, 4, CRNET_INT64, CRNET_SUM), 0);
    ck_assert(two[4] == 1 && two[7] == 4);
  }
  still_works(__LINE__);
}
END_TEST

static const crnet_datatype bad_dts[] = {
    (crnet_datatype)-1, CRNET_DATATYPE_COUNT, (crnet_datatype)(CRNET_DATATYPE_COUNT + 1),
    (crnet_datatype)INT_MAX, (crnet_datatype)INT_MIN};
#define NBAD_DTS (sizeof bad_dts / sizeof bad_dts[0])

START_TEST(bad_datatypes) {
  crnet_comm *c = comm;
  size_t one[1] = {4};
  for (size_t k = 0; k < NBAD_DTS; k++) {
    crnet_datatype dt = bad_dts[k];
    EINVAL_("datatype", crnet_allreduce(c, sbuf, rbuf, 4, dt, CRNET_SUM));
    EINVAL_("datatype",
            crnet_reduce_scatter_block(c, sbuf, rbuf, 4, dt, CRNET_SUM));
    EINVAL_("datatype", crnet_reduce_scatter(c, sbuf, rbuf, one, dt, CRNET_SUM));
    EINVAL_("datatype", crnet_scan(c, sbuf, rbuf, 4, dt, CRNET_SUM));
    EINVAL_("datatype", crnet_exscan(c, sbuf, rbuf, 4, dt, CRNET_SUM));
    EINVAL_("datatype", crnet_alltoall(c, sbuf, rbuf, 4, dt));
    EINVAL_("datatype", crnet_allgather(c, sbuf, rbuf, 4, dt));
    EINVAL_("datatype", crnet_bcast(c, rbuf, 4, dt, 0));
    EINVAL_("datatype", crnet_reduce(c, sbuf, rbuf, 4, dt, CRNET_SUM, 0));
    /* Count 0 does not excuse a bad datatype. */
    EINVAL_("datatype", crnet_allreduce(c, NULL, NULL, 0, dt, CRNET_SUM));
    EINVAL_("datatype", crnet_bcast(c, NULL, 0, dt, 0));
  }
}
END_TEST

/* Every reducing call with (dt, op) must say `keyword`. */
static void reject_op(crnet_datatype dt, crnet_op op, const char *keyword,
                      int line) {
  crnet_comm *c = comm;
  size_t one[1] = {4};
  int rc[6];
  uint64_t seq0 = comm->seq;
  rc[0] = crnet_allreduce(c, sbuf, rbuf, 4, dt, op);
  rc[1] = crnet_reduce_scatter_block(c, sbuf, rbuf, 4, dt, op);
  rc[2] = crnet_reduce_scatter(c, sbuf, rbuf, one, dt, op);
  rc[3] = crnet_scan(c, sbuf, rbuf, 4, dt, op);
  rc[4] = crnet_exscan(c, sbuf, rbuf, 4, dt, op);
  rc[5] = crnet_reduce(c, sbuf, rbuf, 4, dt, op, 0);
  for (int i = 0; i < 6; i++)
    ck_assert_msg(rc[i] == CRNET_EINVAL,
                  "line %d: call %d with %s and op %d returned %s", line, i,
                  crnet_datatype_name(dt), (int)op, crnet_err_name(rc[i]));
  ck_assert_msg(strstr(crnet_comm_errmsg(c), keyword) != NULL,
                "line %d: %s, op %d: reason '%s' does not say '%s'", line,
                crnet_datatype_name(dt), (int)op, crnet_comm_errmsg(c),
                keyword);
  ck_assert_msg(comm->seq == seq0, "line %d: a collective began", line);
  ck_assert_msg(memcmp(rbuf, rbuf_before, sizeof rbuf) == 0,
                "line %d: the receive buffer was written", line);
  still_works(line);
}

START_TEST(bad_ops) {
  static const crnet_op missing[] = {-1, -1000, INT_MIN, CRNET_OP_BUILTIN_COUNT,
                                     CRNET_OP_BUILTIN_COUNT + 1, 63, 64, 65,
                                     1000, INT_MAX};
  crnet_op user, freed;
  for (size_t k = 0; k < sizeof missing / sizeof missing[0]; k++)
    reject_op(CRNET_INT32, missing[k], "does not exist", __LINE__);
  /* Bitwise operators on floating types; nothing built-in on bytes. */
  for (crnet_datatype dt = CRNET_FLOAT16; dt <= CRNET_DOUBLE; dt++)
    for (crnet_op op = CRNET_BAND; op <= CRNET_BXOR; op++)
      reject_op(dt, op, "cannot reduce", __LINE__);
  for (crnet_op op = 0; op < CRNET_OP_BUILTIN_COUNT; op++)
    reject_op(CRNET_BYTE, op, "cannot reduce byte", __LINE__);
  /* A freed user operator no longer exists; a live one works, bytes too. */
  ck_assert_int_eq(crnet_op_create(&user, noop_fn, NULL, 1), 0);
  freed = user;
  ck_assert_int_eq(crnet_op_free(&user), 0);
  reject_op(CRNET_INT64, freed, "does not exist", __LINE__);
  ck_assert_int_eq(crnet_op_create(&user, noop_fn, NULL, 1), 0);
  {
    uint8_t in[4] = {1, 2, 3, 4}, out[4] = {0};
    ck_assert_int_eq(crnet_allreduce(comm, in, out, 4, CRNET_BYTE, user), 0);
    ck_assert(out[3] == 4);
  }
  ck_assert_int_eq(crnet_op_free(&user), 0);
}
END_TEST

START_TEST(user_op_api) {
  crnet_op a, b, c2, stale, sum = CRNET_SUM;
  ck_assert_int_eq(crnet_op_create(NULL, noop_fn, NULL, 1), CRNET_EINVAL);
  a = 12345;
  ck_assert_int_eq(crnet_op_create(&a, NULL, NULL, 1), CRNET_EINVAL);
  ck_assert_int_eq(a, 12345); /* untouched */
  ck_assert_int_eq(crnet_op_free(NULL), CRNET_EINVAL);
  /* Built-ins cannot be freed, and stay usable. */
  for (crnet_op op = 0; op < CRNET_OP_BUILTIN_COUNT; op++) {
    crnet_op v = op;
    ck_assert_int_eq(crnet_op_free(&v), CRNET_EINVAL);
    ck_assert_int_eq(v, op);
  }
  ck_assert_int_eq(crnet_op_free(&sum), CRNET_EINVAL);
  ck_assert_int_eq(sum, CRNET_SUM);
  {
    crnet_op v = -1, w = INT_MAX, x = 64;
    ck_assert_int_eq(crnet_op_free(&v), CRNET_EINVAL);
    ck_assert_int_eq(crnet_op_free(&w), CRNET_EINVAL);
    ck_assert_int_eq(crnet_op_free(&x), CRNET_EINVAL);
  }
  /* Freeing twice through the same variable, and through a stale copy
   * after the slot was reused: the second frees fail and the operator that
   * reuses the slot survives them. */
  ck_assert_int_eq(crnet_op_create(&a, noop_fn, NULL, 1), 0);
  ck_assert_int_ge(a, CRNET_OP_BUILTIN_COUNT);
  stale = a;
  ck_assert_int_eq(crnet_op_free(&a), 0);
  ck_assert_int_eq(crnet_op_free(&a), CRNET_EINVAL);
  ck_assert_int_eq(crnet_op_create(&b, noop_fn, NULL, 0), 0);
  c2 = stale;
  ck_assert_int_eq(crnet_op_free(&c2), CRNET_EINVAL);
  ck_assert_str_eq(crnet_op_name(b), "user op");
  ck_assert_str_eq(crnet_op_name(stale), "unknown op");
  {
    int64_t in[2] = {7, 8}, out[2] = {0, 0};
    ck_assert_int_eq(crnet_allreduce(comm, in, out, 2, CRNET_INT64, b), 0);
    ck_assert(out[0] == 7 && out[1] == 8);
  }
  ck_assert_int_eq(crnet_op_free(&b), 0);
  still_works(__LINE__);
}
END_TEST

START_TEST(bad_roots) {
  static const int roots[] = {-1, 1, 2, INT_MAX, INT_MIN};
  crnet_comm *c = comm;
  for (size_t k = 0; k < sizeof roots / sizeof roots[0]; k++) {
    EINVAL_("root", crnet_bcast(c, rbuf, 4, CRNET_INT64, roots[k]));
    EINVAL_("root", crnet_bcast(c, NULL, 0, CRNET_INT64, roots[k]));
    EINVAL_("root",
            crnet_reduce(c, sbuf, rbuf, 4, CRNET_INT64, CRNET_SUM, roots[k]));
    EINVAL_("root", crnet_reduce(c, CRNET_IN_PLACE, rbuf, 4, CRNET_INT64,
                                 CRNET_SUM, roots[k]));
  }
}
END_TEST

START_TEST(counts_that_overflow) {
  static const struct {
    size_t count;
    crnet_datatype dt;
  } big[] = {
      {SIZE_MAX, CRNET_INT8},       {SIZE_MAX, CRNET_BYTE},
      {SIZE_MAX / 2, CRNET_INT32},  {SIZE_MAX / 2 + 1, CRNET_INT8},
      {SIZE_MAX / 4, CRNET_INT64},  {SIZE_MAX / 8 + 1, CRNET_DOUBLE},
      {SIZE_MAX / 2, CRNET_UINT16}, {(size_t)PTRDIFF_MAX / 4 + 1, CRNET_FLOAT},
  };
  crnet_comm *c = comm;
  for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
    size_t n = big[k].count;
    crnet_datatype dt = big[k].dt;
    size_t counts[1] = {n};
    bool moves_only = dt == CRNET_BYTE;
    if (!moves_only) {
      EINVAL_("too large", crnet_allreduce(c, sbuf, rbuf, n, dt, CRNET_MAX));
      EINVAL_("too large", crnet_allreduce(c, CRNET_IN_PLACE, rbuf, n, dt,
                                           CRNET_MAX));
      EINVAL_("too large",
              crnet_reduce_scatter_block(c, sbuf, rbuf, n, dt, CRNET_MAX));
      EINVAL_("too large",
              crnet_reduce_scatter(c, sbuf, rbuf, counts, dt, CRNET_MAX));
      EINVAL_("too large", crnet_scan(c, sbuf, rbuf, n, dt, CRNET_MAX));
      EINVAL_("too large", crnet_exscan(c, sbuf, rbuf, n, dt, CRNET_MAX));
      EINVAL_("too large",
              crnet_reduce(c, sbuf, rbuf, n, dt, CRNET_MAX, 0));
    }
    EINVAL_("too large", crnet_alltoall(c, sbuf, rbuf, n, dt));
    EINVAL_("too large", crnet_allgather(c, sbuf, rbuf, n, dt));
    EINVAL_("too large", crnet_bcast(c, rbuf, n, dt, 0));
  }
}
END_TEST

START_TEST(schedules) {
  crnet_comm *c = comm;
  char long_name[200];
  static const crnet_collective bad_colls[] = {
      (crnet_collective)-1, CRNET_COLL_COUNT, (crnet_collective)INT_MAX,
      (crnet_collective)INT_MIN};
  memset(long_name, 'r', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';

  ck_assert_int_eq(crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, "ring"),
                   0);
  ck_assert_str_eq(comm->coll->schedule[CRNET_COLL_ALLREDUCE], "ring");
  EINVAL_("NULL", crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, NULL));
  EINVAL_("bogus",
          crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, "bogus"));
  EINVAL_("no schedule", crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, ""));
  EINVAL_("RING", crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, "RING"));
  EINVAL_("no schedule",
          crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, long_name));
  /* 31 characters: the longest the comm can hold, still unknown. */
  long_name[31] = '\0';
  EINVAL_("no schedule",
          crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, long_name));
  for (size_t k = 0; k < sizeof bad_colls / sizeof bad_colls[0]; k++)
    EINVAL_("collective", crnet_comm_set_schedule(c, bad_colls[k], "auto"));
  /* A schedule that cannot do the collective. */
  REJECT(CRNET_EUNSUPPORTED, "cannot do",
         crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, "pairwise"));
  REJECT(CRNET_EUNSUPPORTED, "cannot do",
         crnet_comm_set_schedule(c, CRNET_COLL_ALLTOALL, "circulant"));
  REJECT(CRNET_EUNSUPPORTED, "cannot do",
         crnet_comm_set_schedule(c, CRNET_COLL_BARRIER, "ring"));
  REJECT(CRNET_EUNSUPPORTED, "cannot do",
         crnet_comm_set_schedule(c, CRNET_COLL_SCAN, "rabenseifner"));
  REJECT(CRNET_EUNSUPPORTED, "cannot do",
         crnet_comm_set_schedule(c, CRNET_COLL_BCAST, "star"));
  /* Nothing of that changed the choice made before. */
  ck_assert_str_eq(comm->coll->schedule[CRNET_COLL_ALLREDUCE], "ring");
  ck_assert_str_eq(comm->coll->schedule[CRNET_COLL_ALLTOALL], "auto");
  ck_assert_int_eq(crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, "auto"),
                   0);
  still_works(__LINE__);
}
END_TEST

/* What a call ran: NULL before the first call of a collective, then the
 * schedule set, or auto's pick; a refused call changes nothing. */
START_TEST(last_schedule) {
  crnet_comm *c = comm;
  const char *ran;
  ck_assert_ptr_null(crnet_comm_last_schedule(c, CRNET_COLL_BCAST));
  ck_assert_ptr_null(crnet_comm_last_schedule(NULL, CRNET_COLL_BCAST));
  ck_assert_ptr_null(crnet_comm_last_schedule(c, CRNET_COLL_COUNT));
  ck_assert_ptr_null(
      crnet_comm_last_schedule(c, (crnet_collective)-1));
  ck_assert_int_eq(crnet_bcast(c, sbuf, NBUF, CRNET_INT64, 0), 0);
  ran = crnet_comm_last_schedule(c, CRNET_COLL_BCAST);
  ck_assert_ptr_nonnull(ran);
  ck_assert_msg(strcmp(ran, "auto") != 0 &&
                    crnet__schedule_known(ran, CRNET_COLL_BCAST),
                "auto ran '%s'", ran);
  ck_assert_int_eq(crnet_comm_set_schedule(c, CRNET_COLL_BCAST, "ring"), 0);
  ck_assert_str_eq(crnet_comm_last_schedule(c, CRNET_COLL_BCAST), ran);
  ck_assert_int_eq(crnet_bcast(c, sbuf, NBUF, CRNET_INT64, 0), 0);
  ck_assert_str_eq(crnet_comm_last_schedule(c, CRNET_COLL_BCAST), "ring");
  ck_assert_int_eq(crnet_comm_set_schedule(c, CRNET_COLL_BCAST, "hypercube"),
                   0);
  REJECT(CRNET_EINVAL, "root", crnet_bcast(c, sbuf, NBUF, CRNET_INT64, 7));
  ck_assert_str_eq(crnet_comm_last_schedule(c, CRNET_COLL_BCAST), "ring");
}
END_TEST

/* A bad name from the environment is stored as given and named by the
 * call that meets it; setting a good one makes the comm work again. */
START_TEST(bad_schedule_from_environment) {
  crnet_comm *c;
  int64_t x = 3, y = 0;
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  setenv("CRNET_ALLREDUCE_SCHEDULE", "no-such-schedule", 1);
  ck_assert_int_eq(crnet_comm_init(&c, NULL), 0);
  ck_assert_int_eq(crnet_allreduce(c, &x, &y, 1, CRNET_INT64, CRNET_SUM),
                   CRNET_EINVAL);
  ck_assert_msg(strstr(crnet_comm_errmsg(c), "no-such-schedule") != NULL,
                "'%s'", crnet_comm_errmsg(c));
  ck_assert(y == 0);
  ck_assert_int_eq(crnet_comm_set_schedule(c, CRNET_COLL_ALLREDUCE, "auto"),
                   0);
  ck_assert_int_eq(crnet_allreduce(c, &x, &y, 1, CRNET_INT64, CRNET_SUM), 0);
  ck_assert(y == 3);
  ck_assert_int_eq(crnet_comm_destroy(c), 0);
  unsetenv("CRNET_ALLREDUCE_SCHEDULE");
}
END_TEST

/* A process is one rank: a second crnet_comm_init while its world comm is
 * open is refused, saying why, and changes nothing; once the world is
 * destroyed a job of one may start again. */
START_TEST(second_init_is_refused) {
  crnet_comm *c, *d = (crnet_comm *)&d;
  int64_t x = 3, y = 0;
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  ck_assert_int_eq(crnet_comm_init(&c, NULL), 0);
  ck_assert_int_eq(crnet_comm_init(&d, NULL), CRNET_EINVAL);
  ck_assert(d == NULL);
  ck_assert_msg(strstr(crnet_init_errmsg(), "joined its job already") != NULL,
                "'%s'", crnet_init_errmsg());
  ck_assert_int_eq(crnet_allreduce(c, &x, &y, 1, CRNET_INT64, CRNET_SUM), 0);
  ck_assert(y == 3);
  ck_assert_int_eq(crnet_comm_destroy(c), 0);
  ck_assert_int_eq(crnet_comm_init(&c, NULL), 0);
  ck_assert_int_eq(crnet_comm_destroy(c), 0);
}
END_TEST

/* crnet_comm_init with a config that cannot make a job: EINVAL at once,
 * *comm NULL, the reason in crnet_init_errmsg. */
static void init_fails(const crnet_config *cfg, const char *keyword, int line) {
  crnet_comm *c = (crnet_comm *)&c;
  double t0 = now_s();
  int rc = crnet_comm_init(&c, cfg);
  ck_assert_msg(rc == CRNET_EINVAL, "line %d: init returned %s (%s)", line,
                crnet_err_name(rc), crnet_init_errmsg());
  ck_assert_msg(c == NULL, "line %d: *comm not NULL after a failed init",
                line);
  ck_assert_msg(strstr(crnet_init_errmsg(), keyword) != NULL,
                "line %d: init reason '%s' does not say '%s'", line,
                crnet_init_errmsg(), keyword);
  ck_assert_msg(now_s() - t0 < 2.0, "line %d: init took %.1f s to refuse",
                line, now_s() - t0);
}

#define KEY_HEX "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

START_TEST(config) {
  crnet_config cfg, base;
  crnet_comm *c;
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  unsetenv("CRNET_RENDEZVOUS");
  unsetenv("CRNET_JOB_KEY");
  unsetenv("CRNET_JOB_KEY_FILE");
  unsetenv("CRNET_PORT_RANGE");
  unsetenv("CRNET_INIT_TIMEOUT");
  unsetenv("CRNET_HANDSHAKE_TIMEOUT");
  unsetenv("SLURM_PROCID");
  unsetenv("SLURM_NTASKS");
  unsetenv("CRNET_LAUNCHER");
  unsetenv("CRNET_IFACE");

  crnet_config_init(NULL); /* no crash */
  memset(&base, 0x5a, sizeof base);
  crnet_config_init(&base);
  ck_assert_int_eq(base.rank, -1);
  ck_assert_int_eq(base.size, -1);
  ck_assert_ptr_null(base.rendezvous);
  ck_assert_ptr_null(base.job_key_hex);
  ck_assert_ptr_null(base.job_key_file);
  ck_assert_ptr_null(base.port_range);
  ck_assert(base.init_timeout == 0);
  ck_assert(base.timeout == 0);
  ck_assert_int_eq(base.serve_rendezvous, -1);

  ck_assert_int_eq(crnet_comm_init(NULL, &base), CRNET_EINVAL);
  ck_assert_msg(strstr(crnet_init_errmsg(), "NULL") != NULL, "'%s'",
                crnet_init_errmsg());
  ck_assert_int_eq(crnet_comm_init(NULL, NULL), CRNET_EINVAL);

  cfg = base; /* rank without size, size without rank, out of range */
  cfg.rank = 0;
  init_fails(&cfg, "do not make a job", __LINE__);
  cfg = base;
  cfg.size = 2;
  init_fails(&cfg, "do not make a job", __LINE__);
  cfg = base;
  cfg.rank = 2;
  cfg.size = 2;
  init_fails(&cfg, "do not make a job", __LINE__);
  cfg.rank = 0;
  cfg.size = 0;
  init_fails(&cfg, "do not make a job", __LINE__);
  cfg.rank = INT_MAX;
  cfg.size = INT_MAX;
  init_fails(&cfg, "too large", __LINE__);
  cfg.rank = 0;
  cfg.size = (1 << 24) + 1;
  init_fails(&cfg, "too large", __LINE__);

  static const double bad_timeouts[] = {-1, -0.5, 1e7, 1e300};
  for (size_t k = 0; k < sizeof bad_timeouts / sizeof bad_timeouts[0]; k++) {
    cfg = base;
    cfg.init_timeout = bad_timeouts[k];
    init_fails(&cfg, "init_timeout", __LINE__);
  }
  cfg = base;
  cfg.init_timeout = NAN;
  init_fails(&cfg, "init_timeout", __LINE__);
  cfg.init_timeout = INFINITY;
  init_fails(&cfg, "init_timeout", __LINE__);
  /* The collective timeout likewise. */
  static const double bad_coll_timeouts[] = {-1, 1e7, 1e300, INFINITY, NAN};
  for (size_t k = 0;
       k < sizeof bad_coll_timeouts / sizeof bad_coll_timeouts[0]; k++) {
    cfg = base;
    cfg.timeout = bad_coll_timeouts[k];
    init_fails(&cfg, "crnet_config.timeout", __LINE__);
  }

  /* A bad CRNET_HANDSHAKE_TIMEOUT fails even a job of one, naming it. */
  static const char *const bad_handshakes[] = {"0", "-1", "abc", "3601"};
  for (size_t k = 0; k < sizeof bad_handshakes / sizeof bad_handshakes[0];
       k++) {
    cfg = base;
    cfg.rank = 0;
    cfg.size = 1;
    setenv("CRNET_HANDSHAKE_TIMEOUT", bad_handshakes[k], 1);
    init_fails(&cfg, "CRNET_HANDSHAKE_TIMEOUT", __LINE__);
  }
  unsetenv("CRNET_HANDSHAKE_TIMEOUT");

  /* A job of two with bad strings: refused before anything connects. */
  cfg = base;
  cfg.rank = 0;
  cfg.size = 2;
  cfg.job_key_hex = KEY_HEX;
  cfg.rendezvous = "no-port-here";
  init_fails(&cfg, "host:port", __LINE__);
  cfg.rendezvous = "";
  init_fails(&cfg, "host:port", __LINE__);
  cfg.rendezvous = "127.0.0.1:0";
  init_fails(&cfg, "host:port", __LINE__);
  cfg.rendezvous = "127.0.0.1:1";
  cfg.port_range = "9-3";
  init_fails(&cfg, "lo-hi", __LINE__);
  cfg.port_range = "x";
  init_fails(&cfg, "lo-hi", __LINE__);
  cfg.port_range = NULL;
  cfg.job_key_hex = "00ff";
  init_fails(&cfg, "hex", __LINE__);
  cfg.job_key_hex = NULL;
  init_fails(&cfg, "no job key", __LINE__);

  /* A good config of one still works after all that. */
  cfg = base;
  cfg.rank = 0;
  cfg.size = 1;
  cfg.init_timeout = 5;
  ck_assert_int_eq(crnet_comm_init(&c, &cfg), 0);
  ck_assert_int_eq(crnet_comm_size(c), 1);
  ck_assert_str_eq(crnet_init_errmsg(), "");
  ck_assert_int_eq(crnet_barrier(c), 0);
  ck_assert_int_eq(crnet_comm_destroy(c), 0);
}
END_TEST

START_TEST(names_of_unknown_values) {
  static const int bad_errs[] = {1, 2, -13, -100, 1000, INT_MIN, INT_MAX};
  for (size_t k = 0; k < sizeof bad_errs / sizeof bad_errs[0]; k++) {
    ck_assert_str_eq(crnet_strerror(bad_errs[k]), "unknown error");
    ck_assert_str_eq(crnet_err_name(bad_errs[k]), "CRNET_E?");
  }
  ck_assert_str_eq(crnet_err_name(CRNET_OK), "CRNET_OK");
  for (int e = CRNET_EREVOKED; e <= CRNET_EINVAL; e++) {
    ck_assert_msg(strncmp(crnet_err_name(e), "CRNET_E", 7) == 0 &&
                      strcmp(crnet_err_name(e), "CRNET_E?") != 0,
                  "code %d: %s", e, crnet_err_name(e));
    ck_assert_str_ne(crnet_strerror(e), "unknown error");
  }
  for (size_t k = 0; k < NBAD_DTS; k++) {
    ck_assert_uint_eq(crnet_datatype_size(bad_dts[k]), 0);
    ck_assert_str_eq(crnet_datatype_name(bad_dts[k]), "unknown datatype");
  }
  for (crnet_datatype dt = 0; dt < CRNET_DATATYPE_COUNT; dt++) {
    ck_assert_uint_gt(crnet_datatype_size(dt), 0);
    ck_assert_str_ne(crnet_datatype_name(dt), "unknown datatype");
  }
  static const crnet_op bad_ops[] = {-1, CRNET_OP_BUILTIN_COUNT, 63, 64,
                                     INT_MAX, INT_MIN};
  for (size_t k = 0; k < sizeof bad_ops / sizeof bad_ops[0]; k++)
    ck_assert_str_eq(crnet_op_name(bad_ops[k]), "unknown op");
  for (crnet_op op = 0; op < CRNET_OP_BUILTIN_COUNT; op++)
    ck_assert_str_ne(crnet_op_name(op), "unknown op");
  static const crnet_collective bad_colls[] = {
      (crnet_collective)-1, CRNET_COLL_COUNT, (crnet_collective)INT_MAX};
  for (size_t k = 0; k < sizeof bad_colls / sizeof bad_colls[0]; k++)
    ck_assert_str_eq(crnet_collective_name(bad_colls[k]),
                     "unknown collective");
  for (int k = 0; k < CRNET_COLL_COUNT; k++)
    ck_assert_str_ne(crnet_collective_name((crnet_collective)k),
                     "unknown collective");
}
END_TEST

/* crnet_schedule_name: NULL for a negative index and an unknown
 * collective; each collective's list is part of the whole list, holds no
 * "auto", and ends. */
START_TEST(schedule_names) {
  int all = 0;
  ck_assert_ptr_null(crnet_schedule_name(CRNET_COLL_COUNT, -1));
  ck_assert_ptr_null(crnet_schedule_name(CRNET_COLL_ALLREDUCE, INT_MIN));
  ck_assert_ptr_null(crnet_schedule_name((crnet_collective)-1, 0));
  ck_assert_ptr_null(
      crnet_schedule_name((crnet_collective)(CRNET_COLL_COUNT + 1), 0));
  while (crnet_schedule_name(CRNET_COLL_COUNT, all) != NULL)
    ck_assert_int_lt(++all, 256);
  ck_assert_int_gt(all, 0);
  for (int k = 0; k < CRNET_COLL_COUNT; k++) {
    const char *name;
    int n = 0;
    while ((name = crnet_schedule_name((crnet_collective)k, n)) != NULL) {
      bool listed = false;
      for (int i = 0; i < all && !listed; i++)
        listed = strcmp(crnet_schedule_name(CRNET_COLL_COUNT, i), name) == 0;
      ck_assert_msg(listed, "%s of %s is not in the whole list", name,
                    crnet_collective_name((crnet_collective)k));
      ck_assert_str_ne(name, "auto");
      ck_assert_int_lt(++n, all + 1);
    }
    ck_assert_msg(n > 0, "no schedule does %s",
                  crnet_collective_name((crnet_collective)k));
  }
  /* One collective's list leaves out what cannot do it. */
  for (int i = 0; crnet_schedule_name(CRNET_COLL_ALLTOALL, i) != NULL; i++)
    ck_assert_str_ne(crnet_schedule_name(CRNET_COLL_ALLTOALL, i), "circulant");
}
END_TEST

/* --- the net part: real jobs ------------------------------------------------ */

/* Rank programs report with these, and return EXIT_FAIL. */
#define FAIL_IF(cond, ...)                                                     \
  do {                                                                         \
    if (cond) {                                                                \
      fprintf(stderr, "rank %d, line %d: ", rank, __LINE__);                   \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      return EXIT_FAIL;                                                        \
    }                                                                          \
  } while (0)

typedef struct rank_state {
  crnet_comm *c;
  int rank, size;
  int round; /* correct collectives so far */
} rank_state;

/* A correct collective, different from round to round, checked. Every rank
 * makes it; a rank that sent something in a rejected call, or counted it
 * as a collective, breaks it. */
static int good_call(rank_state *st, int line) {
  const int rank = st->rank, p = st->size;
  int64_t v[16 * 3] = {0}, out[16 * 3] = {0};
  int rc = 0;
  int which = st->round++ % 4;
  switch (which) {
  case 0: /* allreduce of rank + 1 */
    v[0] = rank + 1;
    rc = crnet_allreduce(st->c, v, out, 1, CRNET_INT64, CRNET_SUM);
    FAIL_IF(rc == 0 && out[0] != (int64_t)p * (p + 1) / 2,
            "(after line %d) allreduce gave %" PRId64, line, out[0]);
    break;
  case 1: /* bcast from the last rank */
    v[0] = rank == p - 1 ? 4242 : -1;
    rc = crnet_bcast(st->c, v, 1, CRNET_INT64, p - 1);
    FAIL_IF(rc == 0 && v[0] != 4242, "(after line %d) bcast gave %" PRId64,
            line, v[0]);
    break;
  case 2: /* alltoall: block j of rank s is 100 s + j */
    for (int j = 0; j < p; j++)
      v[j] = 100 * rank + j;
    rc = crnet_alltoall(st->c, v, out, 1, CRNET_INT64);
    for (int j = 0; rc == 0 && j < p; j++)
      FAIL_IF(out[j] != 100 * j + rank,
              "(after line %d) alltoall block %d is %" PRId64, line, j,
              out[j]);
    break;
  default: /* scan of rank + 1 */
    v[0] = rank + 1;
    rc = crnet_scan(st->c, v, out, 1, CRNET_INT64, CRNET_SUM);
    FAIL_IF(rc == 0 && out[0] != (int64_t)(rank + 1) * (rank + 2) / 2,
            "(after line %d) scan gave %" PRId64, line, out[0]);
  }
  FAIL_IF(rc != 0, "(after line %d) correct call %d: %s: %s", line, which,
          crnet_err_name(rc), crnet_comm_errmsg(st->c));
  FAIL_IF(crnet_comm_errmsg(st->c)[0] != '\0',
          "(after line %d) errmsg '%s' after a successful call", line,
          crnet_comm_errmsg(st->c));
  return EXIT_OK;
}

/* The call must return want, with keyword in errmsg; then every rank makes
 * a correct call (when all_ranks; else the caller does). */
#define NET_REJECT(st, want, keyword, call)                                    \
  do {                                                                         \
    int rc_ = (call);                                                          \
    FAIL_IF(rc_ != (want), "%s returned %s, expected %s", #call,               \
            crnet_err_name(rc_), crnet_err_name(want));                        \
    FAIL_IF(strstr(crnet_comm_errmsg((st)->c), (keyword)) == NULL,             \
            "%s: reason '%s' does not say '%s'", #call,                        \
            crnet_comm_errmsg((st)->c), (keyword));                            \
  } while (0)

#define ALL_REJECT(st, want, keyword, call)                                    \
  do {                                                                         \
    NET_REJECT(st, want, keyword, call);                                       \
    if (good_call(st, __LINE__) != EXIT_OK)                                    \
      return EXIT_FAIL;                                                        \
  } while (0)

/* The rejected calls, made by one rank (`only`) or by all (-1). */
static int bad_calls(rank_state *st, int only) {
  crnet_comm *c = st->c;
  const int rank = st->rank, p = st->size;
  int64_t s[64], r[64];
  size_t *counts = calloc((size_t)p, sizeof *counts);
  size_t *huge = calloc((size_t)p, sizeof *huge);
  crnet_op nc;
  int k = 0;
  FAIL_IF(counts == NULL || huge == NULL, "out of memory");
  for (int i = 0; i < p; i++) {
    counts[i] = 1;
    huge[i] = SIZE_MAX / 2 + 1; /* two of them overflow size_t */
  }
  for (int i = 0; i < 64; i++)
    s[i] = r[i] = i;
  FAIL_IF(crnet_op_create(&nc, affine_fn, NULL, 0) != 0, "op_create");

#define STEP(want, keyword, call)                                              \
  do {                                                                         \
    if (only < 0) {                                                            \
      ALL_REJECT(st, want, keyword, call);                                     \
    } else {                                                                   \
      if (rank == only)                                                        \
        NET_REJECT(st, want, keyword, call);                                   \
      if (good_call(st, __LINE__) != EXIT_OK)                                  \
        return EXIT_FAIL;                                                      \
    }                                                                          \
    k++;                                                                       \
  } while (0)

  STEP(CRNET_EINVAL, "NULL",
       crnet_allreduce(c, NULL, r, 4, CRNET_INT64, CRNET_SUM));
  STEP(CRNET_EINVAL, "datatype",
       crnet_allgather(c, s, r, 1, (crnet_datatype)-1));
  STEP(CRNET_EINVAL, "cannot reduce",
       crnet_reduce_scatter_block(c, s, r, 1, CRNET_DOUBLE, CRNET_BXOR));
  STEP(CRNET_EINVAL, "does not exist",
       crnet_scan(c, s, r, 1, CRNET_INT64, 9999));
  STEP(CRNET_EINVAL, "root", crnet_bcast(c, r, 1, CRNET_INT64, p));
  STEP(CRNET_EINVAL, "root",
       crnet_reduce(c, s, r, 1, CRNET_INT64, CRNET_SUM, -1));
  /* Every rank names another one as the root: each is a non-root. */
  STEP(CRNET_EINVAL, "root only",
       crnet_reduce(c, CRNET_IN_PLACE, r, 1, CRNET_INT64, CRNET_SUM,
                    (rank + 1) % p));
  /* Every rank names itself: each is the root without a buffer. */
  STEP(CRNET_EINVAL, "NULL",
       crnet_reduce(c, s, NULL, 1, CRNET_INT64, CRNET_SUM, rank));
  /* count fits, count * p * 8 does not. */
  STEP(CRNET_EINVAL, "too large",
       crnet_alltoall(c, s, r, SIZE_MAX / 8 / (size_t)p + 1, CRNET_INT64));
  STEP(CRNET_EINVAL, "too large",
       crnet_allgather(c, s, r, SIZE_MAX / 8 / (size_t)p + 1, CRNET_INT64));
  STEP(CRNET_EINVAL, "too large",
       crnet_reduce_scatter_block(c, s, r, SIZE_MAX / (size_t)p + 1,
                                  CRNET_INT8, CRNET_SUM));
  STEP(CRNET_EINVAL, "overflow",
       crnet_reduce_scatter(c, s, r, huge, CRNET_INT8, CRNET_SUM));
  STEP(CRNET_EINVAL, "recvcounts",
       crnet_reduce_scatter(c, s, r, NULL, CRNET_INT64, CRNET_SUM));
  STEP(CRNET_EINVAL, "IN_PLACE",
       crnet_exscan(c, s, (void *)(uintptr_t)CRNET_IN_PLACE, 1, CRNET_INT64,
                    CRNET_SUM));
  STEP(CRNET_EINVAL, "overlap",
       crnet_reduce_scatter(c, r, r, counts, CRNET_INT64, CRNET_SUM));
  STEP(CRNET_EINVAL, "bogus",
       crnet_comm_set_schedule(c, CRNET_COLL_ALLTOALL, "bogus"));
  STEP(CRNET_EUNSUPPORTED, "cannot do",
       crnet_comm_set_schedule(c, CRNET_COLL_SCAN, "bruck"));
  /* A schedule that cannot serve this comm is refused when it is set
   * (hypercube all-to-all when p is not a power of two), and the choice
   * before stays; one that cannot serve a call's operator is refused by
   * the call (a non-commutative operator on the ring, p >= 4: below, its
   * rounds may happen to keep rank order). */
  if ((p & (p - 1)) != 0) {
    STEP(CRNET_EUNSUPPORTED, "power of two",
         crnet_comm_set_schedule(c, CRNET_COLL_ALLTOALL, "hypercube"));
    FAIL_IF(crnet_alltoall(c, s, r, 1, CRNET_INT64) != 0,
            "alltoall after a refused schedule: %s", crnet_comm_errmsg(c));
  }
  if (p >= 4) {
    FAIL_IF(crnet_comm_set_schedule(c, CRNET_COLL_REDUCE_SCATTER, "ring") != 0,
            "set ring");
    STEP(CRNET_EUNSUPPORTED, "rank order",
         crnet_reduce_scatter_block(c, s, r, 1, CRNET_UINT64, nc));
    FAIL_IF(crnet_comm_set_schedule(c, CRNET_COLL_REDUCE_SCATTER, "auto") != 0,
            "set auto");
  }
#undef STEP
  FAIL_IF(crnet_op_free(&nc) != 0, "op_free");
  free(counts);
  free(huge);
  return EXIT_OK;
}

static int rank_args(int rank, int size, void *arg) {
  rank_state st = {NULL, rank, size, 0};
  int rc;
  (void)arg;
  rc = crnet_comm_init(&st.c, NULL);
  FAIL_IF(rc != 0, "init: %s", crnet_init_errmsg());
  /* Every rank makes the same bad calls. */
  if (bad_calls(&st, -1) != EXIT_OK)
    goto fail;
  /* One rank at a time makes them, the others not. */
  for (int only = 0; only < size; only++)
    if (bad_calls(&st, only) != EXIT_OK)
      goto fail;
  rc = crnet_comm_destroy(st.c);
  FAIL_IF(rc != 0, "destroy: %s", crnet_err_name(rc));
  return EXIT_OK;
fail:
  crnet_comm_abort(st.c, 1);
  crnet_comm_destroy(st.c);
  return EXIT_FAIL;
}

START_TEST(rejected_calls_keep_ranks_in_step) {
  static const int sizes[] = {2, 3, 4};
  job j;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    job_init(&j, sizes[i], 20);
    run_job(&j, rank_args, NULL, 60);
    for (int r = 0; r < j.size; r++)
      ck_assert_msg(exit_code(&j, r) == EXIT_OK,
                    "p=%d rank %d exited %d (its stderr says why)", j.size, r,
                    exit_code(&j, r));
  }
}
END_TEST

static Suite *unit_suite(void) {
  Suite *s = suite_create("args");
  TCase *t = tcase_create("singleton");
  tcase_add_checked_fixture(t, singleton_setup, singleton_teardown);
  tcase_set_timeout(t, 30);
  tcase_add_test(t, null_comm);
  tcase_add_test(t, null_buffers);
  tcase_add_test(t, in_place_misuse);
  tcase_add_test(t, bad_datatypes);
  tcase_add_test(t, bad_ops);
  tcase_add_test(t, user_op_api);
  tcase_add_test(t, bad_roots);
  tcase_add_test(t, counts_that_overflow);
  tcase_add_test(t, schedules);
  tcase_add_test(t, last_schedule);
  suite_add_tcase(s, t);
  t = tcase_create("no comm");
  tcase_set_timeout(t, 30);
  tcase_add_test(t, bad_schedule_from_environment);
  tcase_add_test(t, second_init_is_refused);
  tcase_add_test(t, config);
  tcase_add_test(t, names_of_unknown_values);
  tcase_add_test(t, schedule_names);
  suite_add_tcase(s, t);
  return s;
}

static Suite *net_suite(void) {
  Suite *s = suite_create("args-net");
  TCase *t = tcase_create("jobs");
  tcase_set_timeout(t, 150);
  tcase_add_test(t, rejected_calls_keep_ranks_in_step);
  suite_add_tcase(s, t);
  return s;
}

int main(int argc, char **argv) {
  bool net = argc > 1 && strcmp(argv[1], "net") == 0;
  return check_run(net ? net_suite() : unit_suite());
}
