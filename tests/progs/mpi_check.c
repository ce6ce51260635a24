/* mpi_check: crnet-mpi's semantics through the MPI names, at any p >= 2.
 *
 *   crlaunch -n P mpi_check            every check below
 *   crlaunch -n P mpi_check mismatch   rank 0 calls MPI_Allreduce, the others
 *                                      MPI_Bcast: each gets MPI_ERR_OTHER and
 *                                      a message that says so
 *   crlaunch -n P mpi_check fatal      rank 1 sends to a rank that does not
 *                                      exist under MPI_ERRORS_ARE_FATAL: the
 *                                      job ends, naming MPI_ERR_RANK
 *
 * Exits 0 when every check held; else prints the first that failed. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPECT_PROG "mpi_check"
#include "mpi.h"
#include "mpi_expect.h"

static int rank, p;
static int failures;
/* The predefined handles are constant expressions, as MPI requires. */
static MPI_Comm world_static = MPI_COMM_WORLD;

/* A non-commutative operator: affine maps x -> a x + b modulo 2^32, one
 * per element (a in the high half of a uint64, b in the low), composed in
 * rank order: invec holds the lower ranks' map, which applies first. */
static void compose(void *in, void *inout, int *len, MPI_Datatype *dt) {
  const uint64_t *f = in;
  uint64_t *g = inout;
  (void)dt;
  for (int i = 0; i < *len; i++) {
    uint32_t af = (uint32_t)(f[i] >> 32), bf = (uint32_t)f[i];
    uint32_t ag = (uint32_t)(g[i] >> 32), bg = (uint32_t)g[i];
    g[i] = (uint64_t)(ag * af) << 32 | (uint32_t)(ag * bf + bg);
  }
}

static uint64_t affine(uint32_t a, uint32_t b) { return (uint64_t)a << 32 | b; }

static void check_reductions(void) {
  int x = rank + 1, sum = -1, v[4], w[4];
  double d = rank * 0.5, dmax = -1;
  OK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  EXPECT(sum == p * (p + 1) / 2, "allreduce sum %d", sum);
  OK(MPI_Allreduce(&d, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  EXPECT(dmax == (p - 1) * 0.5, "allreduce max %g", dmax);
  /* in place */
  for (int i = 0; i < 4; i++)
    v[i] = rank * 10 + i;
  OK(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  for (int i = 0; i < 4; i++)
    EXPECT(v[i] == 10 * p * (p - 1) / 2 + p * i, "in place [%d] = %d", i, v[i]);
  /* LXOR, which crnet lacks and the shim adds: odd count of true values */
  int t = rank % 3, lx = -1, nonzero = 0; /* 0, 1, 2: BXOR would differ */
  for (int q = 0; q < p; q++)
    nonzero += q % 3 != 0;
  OK(MPI_Allreduce(&t, &lx, 1, MPI_INT, MPI_LXOR, MPI_COMM_WORLD));
  EXPECT(lx == nonzero % 2, "lxor %d", lx);
  /* reduce to the last rank, in place there */
  int root = p - 1, r = rank + 1;
  if (rank == root)
    OK(MPI_Reduce(MPI_IN_PLACE, &r, 1, MPI_INT, MPI_PROD, root,
                  MPI_COMM_WORLD));
  else
    OK(MPI_Reduce(&r, NULL, 1, MPI_INT, MPI_PROD, root, MPI_COMM_WORLD));
  if (rank == root) {
    int fact = 1;
    for (int i = 2; i <= p; i++)
      fact *= i;
    EXPECT(r == fact, "reduce prod %d", r);
  }
  /* scan and exscan */
  int s = -1, e = -7;
  OK(MPI_Scan(&x, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  EXPECT(s == (rank + 1) * (rank + 2) / 2, "scan %d", s);
  OK(MPI_Exscan(&x, &e, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (rank > 0)
    EXPECT(e == rank * (rank + 1) / 2, "exscan %d", e);
  /* a user operator that does not commute: the composition in rank order */
  MPI_Op op;
  OK(MPI_Op_create(compose, 0, &op));
  uint64_t f[5], g[5];
  for (int i = 0; i < 5; i++)
    f[i] = affine((uint32_t)(rank + 2 + i), (uint32_t)(rank * 3 + i));
  OK(MPI_Allreduce(f, g, 5, MPI_UINT64_T, op, MPI_COMM_WORLD));
  for (int i = 0; i < 5; i++) {
    uint32_t a = 1, b = 0; /* rank 0's map first */
    for (int q = 0; q < p; q++) {
      b = (uint32_t)(q + 2 + i) * b + (uint32_t)(q * 3 + i);
      a = (uint32_t)(q + 2 + i) * a;
    }
    EXPECT(g[i] == affine(a, b), "user op [%d]: %llx, expected %llx", i,
           (unsigned long long)g[i], (unsigned long long)affine(a, b));
  }
  OK(MPI_Op_free(&op));
  EXPECT(op == MPI_OP_NULL, "op not reset");
  /* a contiguous type of 3 ints */
  MPI_Datatype three;
  int size = 0;
  OK(MPI_Type_contiguous(3, MPI_INT, &three));
  OK(MPI_Type_commit(&three));
  OK(MPI_Type_size(three, &size));
  EXPECT(size == 12, "type size %d", size);
  int tin[6], tout[6];
  for (int i = 0; i < 6; i++)
    tin[i] = i + rank;
  OK(MPI_Allreduce(tin, tout, 2, three, MPI_SUM, MPI_COMM_WORLD));
  for (int i = 0; i < 6; i++)
    EXPECT(tout[i] == p * i + p * (p - 1) / 2, "three[%d] = %d", i, tout[i]);
  OK(MPI_Type_free(&three));
  EXPECT(three == MPI_DATATYPE_NULL, "type not reset");
  /* reduce-scatter with blocks of rank + 1 elements */
  int total = p * (p + 1) / 2, *counts = malloc(sizeof(int) * (size_t)p);
  int *in = malloc(sizeof(int) * (size_t)total), out[64];
  for (int i = 0; i < p; i++)
    counts[i] = i + 1;
  for (int i = 0; i < total; i++)
    in[i] = i * (rank + 1);
  OK(MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  int first = rank * (rank + 1) / 2;
  for (int i = 0; i <= rank; i++)
    EXPECT(out[i] == (first + i) * total, "reduce_scatter[%d] = %d", i, out[i]);
  for (int i = 0; i < 4; i++)
    w[i] = 0;
  int blk[2 * 64];
  for (int i = 0; i < 2 * p; i++)
    blk[i] = i;
  OK(MPI_Reduce_scatter_block(blk, w, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  EXPECT(w[0] == 2 * rank * p && w[1] == (2 * rank + 1) * p,
         "reduce_scatter_block %d %d", w[0], w[1]);
  free(counts);
  free(in);
}

static void check_moves(void) {
  int *all = malloc(sizeof(int) * (size_t)(4 * p + 8));
  int *cnt = malloc(sizeof(int) * (size_t)p);
  int *dis = malloc(sizeof(int) * (size_t)p);
  int *scnt = malloc(sizeof(int) * (size_t)p);
  int *sdis = malloc(sizeof(int) * (size_t)p);
  int mine[2] = {rank * 100, rank * 100 + 1};
  /* allgather, in place */
  for (int i = 0; i < 2 * p; i++)
    all[i] = i / 2 == rank ? mine[i % 2] : -1;
  OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT,
                   MPI_COMM_WORLD));
  for (int i = 0; i < 2 * p; i++)
    EXPECT(all[i] == (i / 2) * 100 + i % 2, "allgather[%d] = %d", i, all[i]);
  /* allgatherv, rank r's r+1 elements at displacement 2r + r(r+1)/2 (a gap
   * of 2 before each block), the gaps untouched */
  int end = 0;
  for (int r = 0; r < p; r++) {
    cnt[r] = r + 1;
    dis[r] = 2 * (r + 1) + r * (r + 1) / 2;
    end = dis[r] + cnt[r];
  }
  int *vout = malloc(sizeof(int) * (size_t)end), vin[64];
  for (int i = 0; i < end; i++)
    vout[i] = -5;
  for (int i = 0; i <= rank; i++)
    vin[i] = rank * 1000 + i;
  OK(MPI_Allgatherv(vin, rank + 1, MPI_INT, vout, cnt, dis, MPI_INT,
                    MPI_COMM_WORLD));
  for (int r = 0, at = 0; r < p; r++) {
    for (; at < dis[r]; at++)
      EXPECT(vout[at] == -5, "allgatherv gap at %d written: %d", at, vout[at]);
    for (int i = 0; i < cnt[r]; i++, at++)
      EXPECT(vout[at] == r * 1000 + i, "allgatherv[%d] = %d", at, vout[at]);
  }
  free(vout);
  /* alltoallv: to rank j, j+1 elements; blocks of the receive side in
   * reverse rank order */
  int sbuf[256], rbuf[256], rtotal = 0;
  for (int j = 0, at = 0; j < p; j++) {
    scnt[j] = j + 1;
    sdis[j] = at;
    for (int i = 0; i <= j; i++)
      sbuf[at + i] = rank * 100 + j * 10 + i;
    at += j + 1;
  }
  for (int j = p - 1, at = 0; j >= 0; j--) {
    cnt[j] = rank + 1;
    dis[j] = at;
    at += rank + 1;
    rtotal = at;
  }
  OK(MPI_Alltoallv(sbuf, scnt, sdis, MPI_INT, rbuf, cnt, dis, MPI_INT,
                   MPI_COMM_WORLD));
  for (int j = 0; j < p; j++)
    for (int i = 0; i <= rank; i++)
      EXPECT(rbuf[dis[j] + i] == j * 100 + rank * 10 + i,
             "alltoallv from %d [%d] = %d", j, i, rbuf[dis[j] + i]);
  /* alltoallv in place: the blocks to send are in the receive buffer */
  for (int j = 0; j < p; j++) {
    cnt[j] = 2;
    dis[j] = 2 * j;
    rbuf[2 * j] = rank * 10 + j;
    rbuf[2 * j + 1] = -rank;
  }
  OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, rbuf, cnt, dis,
                   MPI_INT, MPI_COMM_WORLD));
  for (int j = 0; j < p; j++)
    EXPECT(rbuf[2 * j] == j * 10 + rank && rbuf[2 * j + 1] == -j,
           "alltoallv in place from %d: %d %d", j, rbuf[2 * j],
           rbuf[2 * j + 1]);
  (void)rtotal;
  /* alltoall */
  for (int j = 0; j < p; j++)
    sbuf[j] = rank * p + j;
  OK(MPI_Alltoall(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT, MPI_COMM_WORLD));
  for (int j = 0; j < p; j++)
    EXPECT(rbuf[j] == j * p + rank, "alltoall from %d: %d", j, rbuf[j]);
  /* gather to the last rank, scatter from it in place */
  int root = p - 1;
  OK(MPI_Gather(mine, 2, MPI_INT, rank == root ? all : NULL, 2, MPI_INT, root,
                MPI_COMM_WORLD));
  if (rank == root)
    for (int i = 0; i < 2 * p; i++)
      EXPECT(all[i] == (i / 2) * 100 + i % 2, "gather[%d] = %d", i, all[i]);
  int got[2] = {-1, -1};
  if (rank == root) {
    for (int i = 0; i < 2 * p; i++)
      all[i] = 7 * i;
    OK(MPI_Scatter(all, 2, MPI_INT, MPI_IN_PLACE, 2, MPI_INT, root,
                   MPI_COMM_WORLD));
  } else {
    OK(MPI_Scatter(NULL, 2, MPI_INT, got, 2, MPI_INT, root, MPI_COMM_WORLD));
    EXPECT(got[0] == 14 * rank && got[1] == 14 * rank + 7, "scatter %d %d",
           got[0], got[1]);
  }
  /* bcast of 3 doubles from rank 1 */
  double bd[3] = {rank, rank, rank};
  if (rank == 1)
    bd[0] = 1.5, bd[1] = 2.5, bd[2] = 3.5;
  OK(MPI_Bcast(bd, 3, MPI_DOUBLE, 1, MPI_COMM_WORLD));
  EXPECT(bd[0] == 1.5 && bd[2] == 3.5, "bcast %g %g", bd[0], bd[2]);
  free(all);
  free(cnt);
  free(dis);
  free(scnt);
  free(sdis);
}

/* alltoallw: the block from i to j has c(i, j) elements of type T(i, j),
 * doubles or ints, each sender's blocks in reverse order of j with a
 * 3-byte gap before each, each receiver's in reverse order of i with a
 * gap of 5 bytes that must stay untouched; then in place, then the
 * nonblocking form, then the errors. */
static int w_count(int i, int j) { return (i + 2 * j) % 3 + 1; }
static MPI_Datatype w_type(int i, int j) {
  return (i + j) % 2 ? MPI_INT : MPI_DOUBLE;
}
static size_t w_size(int i, int j) {
  return (size_t)w_count(i, j) * (w_type(i, j) == MPI_INT ? 4 : 8);
}
static double w_value(int i, int j, int k) { return i * 10000 + j * 100 + k; }

static void w_put(unsigned char *at, int i, int j) {
  for (int k = 0; k < w_count(i, j); k++)
    if (w_type(i, j) == MPI_INT) {
      int v = (int)w_value(i, j, k);
      memcpy(at + 4 * (size_t)k, &v, 4);
    } else {
      double v = w_value(i, j, k);
      memcpy(at + 8 * (size_t)k, &v, 8);
    }
}

static bool w_holds(const unsigned char *at, int i, int j) {
  unsigned char want[24];
  w_put(want, i, j);
  return memcmp(at, want, w_size(i, j)) == 0;
}

static void check_alltoallw(void) {
  int scnt[64], sdis[64], rcnt[64], rdis[64], code;
  MPI_Datatype sty[64], rty[64];
  unsigned char sbuf[64 * 32], rbuf[64 * 32];
  size_t at = 0;
  MPI_Request rq;
  for (int j = p - 1; j >= 0; j--) {
    at += 3;
    scnt[j] = w_count(rank, j);
    sty[j] = w_type(rank, j);
    sdis[j] = (int)at;
    w_put(sbuf + at, rank, j);
    at += w_size(rank, j);
  }
  at = 0;
  for (int i = p - 1; i >= 0; i--) {
    at += 5;
    rcnt[i] = w_count(i, rank);
    rty[i] = w_type(i, rank);
    rdis[i] = (int)at;
    at += w_size(i, rank);
  }
  for (int round = 0; round < 2; round++) {
    memset(rbuf, 0xee, sizeof rbuf);
    if (round == 0) {
      OK(MPI_Alltoallw(sbuf, scnt, sdis, sty, rbuf, rcnt, rdis, rty,
                       MPI_COMM_WORLD));
    } else {
      OK(MPI_Ialltoallw(sbuf, scnt, sdis, sty, rbuf, rcnt, rdis, rty,
                        MPI_COMM_WORLD, &rq));
      OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    }
    for (int i = 0; i < p; i++) {
      EXPECT(w_holds(rbuf + rdis[i], i, rank), "alltoallw%s from %d",
             round ? " (nonblocking)" : "", i);
      for (int g = 1; g <= 5; g++)
        EXPECT(rbuf[rdis[i] - g] == 0xee, "alltoallw gap before %d written", i);
    }
  }
  /* in place: the block for j sits where j's block will land, so the
   * blocks both ways are alike (two ints each) */
  for (int j = 0; j < p; j++) {
    rcnt[j] = 2;
    rty[j] = MPI_INT;
    rdis[j] = 8 * j;
    int v[2] = {rank * 100 + j, -rank};
    memcpy(rbuf + 8 * j, v, 8);
  }
  OK(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, rbuf, rcnt, rdis, rty,
                   MPI_COMM_WORLD));
  for (int j = 0; j < p; j++) {
    int v[2];
    memcpy(v, rbuf + 8 * j, 8);
    EXPECT(v[0] == j * 100 + rank && v[1] == -j,
           "alltoallw in place from %d: %d %d", j, v[0], v[1]);
  }
  /* errors: nothing moves, the comm works after */
  MPI_Comm c;
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
  OK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
  code = MPI_Alltoallw(sbuf, scnt, sdis, NULL, rbuf, rcnt, rdis, rty, c);
  EXPECT(error_class(code) == MPI_ERR_ARG, "alltoallw NULL types: %s",
         error_text(code));
  sdis[0] = -1;
  code = MPI_Alltoallw(sbuf, scnt, sdis, sty, rbuf, rcnt, rdis, rty, c);
  EXPECT(error_class(code) == MPI_ERR_ARG, "alltoallw sdispls -1: %s",
         error_text(code));
  sty[0] = (MPI_Datatype)999;
  code = MPI_Ialltoallw(sbuf, scnt, sdis, sty, rbuf, rcnt, rdis, rty, c, &rq);
  EXPECT(error_class(code) == MPI_ERR_TYPE, "ialltoallw type 999: %s",
         error_text(code));
  OK(MPI_Barrier(c));
  OK(MPI_Comm_free(&c));
}

static void check_comms(void) {
  MPI_Comm half, none, dup;
  int hr = -1, hs = -1;
  /* split: by parity, keys reversing the order */
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
  OK(MPI_Comm_rank(half, &hr));
  OK(MPI_Comm_size(half, &hs));
  int same = (p - rank % 2 + 1) / 2; /* ranks of my parity */
  EXPECT(hs == same, "split size %d, expected %d", hs, same);
  EXPECT(hr == same - 1 - rank / 2, "split rank %d, expected %d", hr,
         same - 1 - rank / 2);
  int sum = -1;
  OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half));
  int want = 0;
  for (int r = rank % 2; r < p; r += 2)
    want += r;
  EXPECT(sum == want, "sum over the split %d, expected %d", sum, want);
  OK(MPI_Comm_free(&half));
  EXPECT(half == MPI_COMM_NULL, "free did not reset the handle");
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &none));
  EXPECT((rank == 0) == (none != MPI_COMM_NULL), "MPI_UNDEFINED split");
  if (none != MPI_COMM_NULL)
    OK(MPI_Comm_free(&none));
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  OK(MPI_Barrier(dup));
  /* MPI_COMM_SELF is this rank alone */
  int ss = 0, sr = -1;
  OK(MPI_Comm_size(MPI_COMM_SELF, &ss));
  OK(MPI_Comm_rank(MPI_COMM_SELF, &sr));
  EXPECT(ss == 1 && sr == 0, "self %d %d", ss, sr);
  /* freeing the world is refused, and returns */
  MPI_Comm w = MPI_COMM_WORLD;
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  EXPECT(error_class(MPI_Comm_free(&w)) == MPI_ERR_COMM, "world freed");
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  OK(MPI_Comm_free(&dup));
}

static void check_messages(void) {
  int next = (rank + 1) % p, prev = (rank + p - 1) % p, got = -1, n = -1;
  MPI_Status st;
  MPI_Request req[4];
  /* a ring of sendrecvs with tags */
  OK(MPI_Sendrecv(&rank, 1, MPI_INT, next, 5, &got, 1, MPI_INT, prev, 5,
                  MPI_COMM_WORLD, &st));
  EXPECT(got == prev && st.MPI_SOURCE == prev && st.MPI_TAG == 5,
         "sendrecv got %d from %d tag %d", got, st.MPI_SOURCE, st.MPI_TAG);
  OK(MPI_Get_count(&st, MPI_INT, &n));
  EXPECT(n == 1, "get_count %d", n);
  /* nonblocking both ways, any source and any tag */
  int sv[3] = {rank, rank * 2, rank * 3}, rv[3] = {0};
  OK(MPI_Irecv(rv, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
               &req[0]));
  OK(MPI_Isend(sv, 3, MPI_INT, next, 100 + rank, MPI_COMM_WORLD, &req[1]));
  MPI_Status sts[2];
  OK(MPI_Waitall(2, req, sts));
  EXPECT(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL,
         "waitall left requests");
  EXPECT(rv[2] == prev * 3 && sts[0].MPI_SOURCE == prev &&
             sts[0].MPI_TAG == 100 + prev,
         "irecv %d from %d tag %d", rv[2], sts[0].MPI_SOURCE, sts[0].MPI_TAG);
  /* waitany and test over a receive and a barrier */
  OK(MPI_Irecv(&got, 1, MPI_INT, prev, 9, MPI_COMM_WORLD, &req[0]));
  OK(MPI_Ibarrier(MPI_COMM_WORLD, &req[1]));
  OK(MPI_Send(&rank, 1, MPI_INT, next, 9, MPI_COMM_WORLD));
  int idx = -1, flag = 0;
  OK(MPI_Waitany(2, req, &idx, &st));
  EXPECT(idx == 0 || idx == 1, "waitany index %d", idx);
  while (!flag)
    OK(MPI_Testall(2, req, &flag, MPI_STATUSES_IGNORE));
  EXPECT(got == prev, "irecv after waitany %d", got);
  OK(MPI_Waitany(2, req, &idx, &st));
  EXPECT(idx == MPI_UNDEFINED, "waitany on nothing: %d", idx);
  /* MPI_PROC_NULL: at once, an empty status */
  OK(MPI_Recv(&got, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
  OK(MPI_Get_count(&st, MPI_INT, &n));
  EXPECT(st.MPI_SOURCE == MPI_PROC_NULL && n == 0, "proc null %d %d",
         st.MPI_SOURCE, n);
  /* a nonblocking collective and a message in flight together */
  double x = rank, sum = 0;
  OK(MPI_Iallreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req[0]));
  OK(MPI_Isend(&rank, 1, MPI_INT, next, 11, MPI_COMM_WORLD, &req[1]));
  OK(MPI_Irecv(&got, 1, MPI_INT, prev, 11, MPI_COMM_WORLD, &req[2]));
  int tflag = 0;
  while (!tflag)
    OK(MPI_Test(&req[0], &tflag, MPI_STATUS_IGNORE));
  OK(MPI_Waitall(2, req + 1, MPI_STATUSES_IGNORE));
  EXPECT(sum == p * (p - 1) / 2.0 && got == prev, "iallreduce %g, got %d", sum,
         got);
  /* probes: a message of a size only its sender knows (prev + 1 doubles),
   * seen by MPI_Iprobe in a loop, then MPI_Probe, then received with the
   * count the status gives */
  double out[64], in[64];
  for (int i = 0; i <= rank && i < 64; i++)
    out[i] = rank * 100 + i;
  OK(MPI_Isend(out, rank + 1 < 64 ? rank + 1 : 64, MPI_DOUBLE, next, 12,
               MPI_COMM_WORLD, &req[0]));
  flag = 0;
  while (!flag)
    OK(MPI_Iprobe(MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &flag, &st));
  OK(MPI_Get_count(&st, MPI_DOUBLE, &n));
  EXPECT(st.MPI_SOURCE == prev && st.MPI_TAG == 12 &&
             n == (prev + 1 < 64 ? prev + 1 : 64),
         "iprobe: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, n);
  OK(MPI_Probe(prev, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
  OK(MPI_Get_count(&st, MPI_DOUBLE, &n));
  OK(MPI_Recv(in, n, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD,
              MPI_STATUS_IGNORE));
  EXPECT(in[n - 1] == prev * 100 + n - 1, "probed message: %g", in[n - 1]);
  OK(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
  /* nothing more with tag 12 here: the flag stays 0 */
  OK(MPI_Iprobe(MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &flag, &st));
  EXPECT(flag == 0, "iprobe found a message already received");
  OK(MPI_Iprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &st));
  EXPECT(flag == 1 && st.MPI_SOURCE == MPI_PROC_NULL, "iprobe of proc null");
  OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* MPI_MINLOC and MPI_MAXLOC on every pair type: values with ties across
 * ranks, indices that do not follow the ranks (the smallest index among
 * the ties must win, not the lowest rank), through allreduce (also in
 * place), reduce (in place at the root), reduce_scatter_block and
 * reduce_scatter; each rank works out the expected pairs from everyone's
 * inputs. */
#define LOC_N 7
#define LOC_VALUE(r, i) (((r)*7 + (i)*3) % 4 - 1)
#define LOC_INDEX(r, i) ((p - (r)) * 100 + (i))

#define DEFINE_LOC_CHECK(name, vtype, mtype)                                   \
  static void name(void) {                                                     \
    typedef struct {                                                           \
      vtype v;                                                                 \
      int i;                                                                   \
    } pair;                                                                    \
    pair in[LOC_N * 16], out[LOC_N * 16], want[2][LOC_N * 16];                 \
    int counts[16], n = LOC_N * p, first = 0;                                  \
    if (p > 16)                                                                \
      return;                                                                  \
    for (int k = 0; k < n; k++) {                                              \
      in[k].v = (vtype)LOC_VALUE(rank, k);                                     \
      in[k].i = LOC_INDEX(rank, k);                                            \
      for (int m = 0; m < 2; m++) {                                            \
        want[m][k].v = (vtype)LOC_VALUE(0, k);                                 \
        want[m][k].i = LOC_INDEX(0, k);                                        \
      }                                                                        \
      for (int r = 1; r < p; r++) {                                            \
        vtype v = (vtype)LOC_VALUE(r, k);                                      \
        int i = LOC_INDEX(r, k);                                               \
        for (int m = 0; m < 2; m++) { /* 0: MINLOC, 1: MAXLOC */               \
          pair *w = &want[m][k];                                               \
          if (m == 0 ? v < w->v : v > w->v)                                    \
            *w = (pair){v, i};                                                 \
          else if (v == w->v && i < w->i)                                      \
            w->i = i;                                                          \
        }                                                                      \
      }                                                                        \
    }                                                                          \
    for (int m = 0; m < 2; m++) {                                              \
      MPI_Op op = m == 0 ? MPI_MINLOC : MPI_MAXLOC;                            \
      const char *what = m == 0 ? #mtype " minloc" : #mtype " maxloc";         \
      memset(out, 0x55, sizeof out);                                           \
      OK(MPI_Allreduce(in, out, n, mtype, op, MPI_COMM_WORLD));                \
      for (int k = 0; k < n; k++)                                              \
        EXPECT(out[k].v == want[m][k].v && out[k].i == want[m][k].i,           \
               "%s allreduce [%d]: (%g, %d), want (%g, %d)", what, k,          \
               (double)out[k].v, out[k].i, (double)want[m][k].v,               \
               want[m][k].i);                                                  \
      memcpy(out, in, sizeof in);                                              \
      OK(MPI_Allreduce(MPI_IN_PLACE, out, n, mtype, op, MPI_COMM_WORLD));      \
      EXPECT(out[n - 1].i == want[m][n - 1].i, "%s in place", what);           \
      memcpy(out, in, sizeof in);                                              \
      OK(MPI_Reduce(rank == p - 1 ? MPI_IN_PLACE : in, out, n, mtype, op,      \
                    p - 1, MPI_COMM_WORLD));                                   \
      for (int k = 0; rank == p - 1 && k < n; k++)                             \
        EXPECT(out[k].v == want[m][k].v && out[k].i == want[m][k].i,           \
               "%s reduce [%d]", what, k);                                     \
      memset(out, 0x55, sizeof out);                                           \
      OK(MPI_Reduce_scatter_block(in, out, n / p, mtype, op, MPI_COMM_WORLD)); \
      for (int k = 0; k < n / p; k++)                                          \
        EXPECT(out[k].i == want[m][rank * (n / p) + k].i &&                    \
                   out[k].v == want[m][rank * (n / p) + k].v,                  \
               "%s reduce_scatter_block [%d]", what, k);                       \
      first = 0;                                                               \
      counts[p - 1] = n;                                                       \
      for (int r = 0; r < p - 1; r++) {                                        \
        counts[r] = r % 3;                                                     \
        counts[p - 1] -= counts[r];                                            \
        if (r < rank)                                                          \
          first += counts[r];                                                  \
      }                                                                        \
      if (counts[p - 1] >= 0) {                                                \
        memset(out, 0x55, sizeof out);                                         \
        OK(MPI_Reduce_scatter(in, out, counts, mtype, op, MPI_COMM_WORLD));    \
        for (int k = 0; k < counts[rank]; k++)                                 \
          EXPECT(out[k].i == want[m][first + k].i &&                           \
                     out[k].v == want[m][first + k].v,                         \
                 "%s reduce_scatter [%d]", what, k);                           \
      }                                                                        \
    }                                                                          \
    /* pairs move as they are */                                               \
    OK(MPI_Sendrecv(in, 2, mtype, (rank + 1) % p, 31, out, 2, mtype,           \
                    (rank + p - 1) % p, 31, MPI_COMM_WORLD,                    \
                    MPI_STATUS_IGNORE));                                       \
    EXPECT(out[1].i == LOC_INDEX((rank + p - 1) % p, 1), "%s sendrecv",        \
           #mtype);                                                            \
  }

DEFINE_LOC_CHECK(check_loc_float, float, MPI_FLOAT_INT)
DEFINE_LOC_CHECK(check_loc_double, double, MPI_DOUBLE_INT)
DEFINE_LOC_CHECK(check_loc_long, long, MPI_LONG_INT)
DEFINE_LOC_CHECK(check_loc_int, int, MPI_2INT)
DEFINE_LOC_CHECK(check_loc_short, short, MPI_SHORT_INT)

static void check_loc(void) {
  check_loc_float();
  check_loc_double();
  check_loc_long();
  check_loc_int();
  check_loc_short();
}

/* MPI_Gatherv and MPI_Scatterv (and their I-forms) at every root: rank r
 * contributes r % 3 + 1 elements (rank 1 none at all, where p > 2),
 * placed at the root with a gap of 3 before each block; in place at the
 * root, and mixed with a message of the program's own on MPI_ANY_TAG,
 * which must not take theirs. */
static void check_vrooted(void) {
  int *cnt = malloc(sizeof(int) * (size_t)p),
      *dis = malloc(sizeof(int) * (size_t)p);
  int end = 0, mine[4], got[4];
  for (int r = 0; r < p; r++) {
    cnt[r] = p > 2 && r == 1 ? 0 : r % 3 + 1;
    dis[r] = end + 3;
    end = dis[r] + cnt[r];
  }
  int *buf = malloc(sizeof(int) * (size_t)end);
  for (int root = 0; root < p; root++) {
    for (int nb = 0; nb < 2; nb++) {
      MPI_Request req[2];
      int other = -1, idx = -1;
      for (int i = 0; i < cnt[rank]; i++)
        mine[i] = rank * 100 + i + root;
      for (int i = 0; i < end; i++)
        buf[i] = -9;
      /* a receive of the program's own, matching any tag, posted first */
      OK(MPI_Irecv(&other, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                   MPI_COMM_WORLD, &req[1]));
      if (nb) {
        OK(MPI_Igatherv(mine, cnt[rank], MPI_INT, buf, cnt, dis, MPI_INT, root,
                        MPI_COMM_WORLD, &req[0]));
        /* The program's receive may complete first (a faster rank's
         * message of 77 below): then the gatherv is still to come. */
        OK(MPI_Waitany(2, req, &idx, MPI_STATUS_IGNORE));
        if (idx == 1)
          OK(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
      } else {
        OK(MPI_Gatherv(mine, cnt[rank], MPI_INT, buf, cnt, dis, MPI_INT, root,
                       MPI_COMM_WORLD));
      }
      if (rank == root)
        for (int r = 0, at = 0; r < p; r++) {
          for (; at < dis[r]; at++)
            EXPECT(buf[at] == -9, "gatherv root %d: gap %d written", root, at);
          for (int i = 0; i < cnt[r]; i++, at++)
            EXPECT(buf[at] == r * 100 + i + root,
                   "gatherv root %d nb %d [%d] = %d", root, nb, at, buf[at]);
        }
      /* the program's own message ends its receive */
      int next = (rank + 1) % p;
      OK(MPI_Send(&rank, 1, MPI_INT, next, 77, MPI_COMM_WORLD));
      OK(MPI_Wait(&req[1], MPI_STATUS_IGNORE));
      EXPECT(other == (rank + p - 1) % p,
             "the program's receive got %d, not its message", other);
      /* scatterv back, in place at the root */
      for (int i = 0; i < 4; i++)
        got[i] = -1;
      if (rank == root && nb) {
        OK(MPI_Iscatterv(buf, cnt, dis, MPI_INT, MPI_IN_PLACE, cnt[rank],
                         MPI_INT, root, MPI_COMM_WORLD, &req[0]));
        OK(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
      } else if (rank == root) {
        OK(MPI_Scatterv(buf, cnt, dis, MPI_INT, MPI_IN_PLACE, cnt[rank],
                        MPI_INT, root, MPI_COMM_WORLD));
      } else if (nb) {
        OK(MPI_Iscatterv(NULL, NULL, NULL, MPI_INT, got, cnt[rank], MPI_INT,
                         root, MPI_COMM_WORLD, &req[0]));
        OK(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
      } else {
        OK(MPI_Scatterv(NULL, NULL, NULL, MPI_INT, got, cnt[rank], MPI_INT,
                        root, MPI_COMM_WORLD));
      }
      if (rank != root)
        for (int i = 0; i < cnt[rank]; i++)
          EXPECT(got[i] == rank * 100 + i + root,
                 "scatterv root %d nb %d [%d] = %d", root, nb, i, got[i]);
    }
  }
  /* a count the root does not expect: the root's receive is truncated */
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int code = MPI_Gatherv(mine, rank == 1 ? cnt[1] + 1 : cnt[rank], MPI_INT, buf,
                         cnt, dis, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0)
    EXPECT(error_class(code) == MPI_ERR_TRUNCATE, "gatherv truncated: %s",
           error_text(code));
  else
    EXPECT(code == MPI_SUCCESS, "gatherv sender: %s", error_text(code));
  /* Refused arguments, on one side only: nobody waits for the rank that
   * refused, the ranks that needed its block say who, the comm goes on.
   * The root refuses a negative count (scatterv, then gatherv). */
  int saved = cnt[p - 1], big = 70000; /* a block past the eager size too */
  int *large = calloc((size_t)big, sizeof(int));
  cnt[p - 1] = -1;
  code =
      MPI_Scatterv(rank == 0 ? buf : NULL, cnt, dis, MPI_INT, got,
                   cnt[rank] < 0 ? 0 : cnt[rank], MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0)
    EXPECT(error_class(code) == MPI_ERR_COUNT, "scatterv, root refuses: %s",
           error_text(code));
  else
    EXPECT(error_class(code) == MPI_ERR_OTHER &&
               strstr(error_text(code), "rank 0 refused") != NULL,
           "scatterv, the root refused: %s", error_text(code));
  code =
      MPI_Gatherv(rank == p - 1 ? large : mine, rank == p - 1 ? big : cnt[rank],
                  MPI_INT, buf, cnt, dis, MPI_INT, 0, MPI_COMM_WORLD);
  EXPECT(rank == 0 ? error_class(code) == MPI_ERR_COUNT : code == MPI_SUCCESS,
         "gatherv, root refuses: %s", error_text(code));
  cnt[p - 1] = saved;
  /* The last rank refuses its own block's type (gatherv), then its
   * request pointer (iscatterv). */
  code =
      MPI_Gatherv(mine, cnt[rank], rank == p - 1 ? (MPI_Datatype)999 : MPI_INT,
                  buf, cnt, dis, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == p - 1)
    EXPECT(error_class(code) == MPI_ERR_TYPE, "gatherv, type 999: %s",
           error_text(code));
  else if (rank == 0)
    EXPECT(error_class(code) == MPI_ERR_OTHER &&
               strstr(error_text(code), "refused") != NULL,
           "gatherv, rank %d refused: %s", p - 1, error_text(code));
  else
    EXPECT(code == MPI_SUCCESS, "gatherv beside a refusal: %s",
           error_text(code));
  MPI_Request rq = MPI_REQUEST_NULL;
  code =
      MPI_Iscatterv(rank == 0 ? buf : NULL, cnt, dis, MPI_INT, got, cnt[rank],
                    MPI_INT, 0, MPI_COMM_WORLD, rank == p - 1 ? NULL : &rq);
  if (rank == p - 1)
    EXPECT(error_class(code) == MPI_ERR_ARG, "iscatterv, request NULL: %s",
           error_text(code));
  else
    OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  free(large);
  /* and the comm works */
  for (int i = 0; i < cnt[rank]; i++)
    mine[i] = rank * 100 + i;
  OK(MPI_Gatherv(mine, cnt[rank], MPI_INT, buf, cnt, dis, MPI_INT, 0,
                 MPI_COMM_WORLD));
  if (rank == 0)
    EXPECT(buf[dis[p - 1]] == (p - 1) * 100, "gatherv after the refusals");
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  free(buf);
  free(cnt);
  free(dis);
}

/* Every collective over counts from 0 up, every root, blocking and
 * nonblocking alike: the results against what each rank can compute
 * alone (element i of rank r's contribution is r * 1000 + i). */
static void check_sweep(void) {
  static const int counts[] = {0, 1, 2, 3, 7, 31, 64, 127, 300, 1000, 4099};
  size_t cap = (size_t)p * 4099;
  int *in = malloc(sizeof(int) * cap), *out = malloc(sizeof(int) * cap);
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    int n = counts[c];
    for (int nb = 0; nb < 2; nb++) {
      MPI_Request req;
      for (int i = 0; i < n; i++)
        in[i] = rank * 1000 + i;
      if (nb) {
        OK(MPI_Iallreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req));
        OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
      } else {
        OK(MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
      }
      for (int i = 0; i < n; i++)
        EXPECT(out[i] == 1000 * p * (p - 1) / 2 + p * i,
               "allreduce n=%d nb=%d [%d] = %d", n, nb, i, out[i]);
      for (int root = 0; root < p; root++) {
        for (int i = 0; i < n; i++)
          out[i] = rank == root ? root * 1000 + i : -1;
        if (nb) {
          OK(MPI_Ibcast(out, n, MPI_INT, root, MPI_COMM_WORLD, &req));
          OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        } else {
          OK(MPI_Bcast(out, n, MPI_INT, root, MPI_COMM_WORLD));
        }
        for (int i = 0; i < n; i++)
          EXPECT(out[i] == root * 1000 + i, "bcast n=%d root=%d [%d] = %d", n,
                 root, i, out[i]);
        if (nb) {
          OK(MPI_Ireduce(in, out, n, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD,
                         &req));
          OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        } else {
          OK(MPI_Reduce(in, out, n, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD));
        }
        if (rank == root)
          for (int i = 0; i < n; i++)
            EXPECT(out[i] == (p - 1) * 1000 + i,
                   "reduce n=%d root=%d [%d] = %d", n, root, i, out[i]);
        OK(MPI_Gather(in, n, MPI_INT, out, n, MPI_INT, root, MPI_COMM_WORLD));
        if (rank == root)
          for (int i = 0; i < n * p; i++)
            EXPECT(out[i] == (i / n) * 1000 + i % n,
                   "gather n=%d root=%d [%d] = %d", n, root, i, out[i]);
      }
      /* allgather, alltoall, reduce-scatter-block, scan: blocks of n */
      OK(MPI_Allgather(in, n, MPI_INT, out, n, MPI_INT, MPI_COMM_WORLD));
      for (int i = 0; i < n * p; i++)
        EXPECT(out[i] == (i / n) * 1000 + i % n, "allgather n=%d [%d] = %d", n,
               i, out[i]);
      for (int i = 0; i < n * p; i++)
        in[i] = rank * 1000 + i;
      OK(MPI_Alltoall(in, n, MPI_INT, out, n, MPI_INT, MPI_COMM_WORLD));
      for (int i = 0; i < n * p; i++)
        EXPECT(out[i] == (i / n) * 1000 + rank * n + i % n,
               "alltoall n=%d [%d] = %d", n, i, out[i]);
      OK(MPI_Reduce_scatter_block(in, out, n, MPI_INT, MPI_SUM,
                                  MPI_COMM_WORLD));
      for (int i = 0; i < n; i++)
        EXPECT(out[i] == 1000 * p * (p - 1) / 2 + p * (rank * n + i),
               "reduce_scatter_block n=%d [%d] = %d", n, i, out[i]);
      OK(MPI_Scan(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
      for (int i = 0; i < n; i++)
        EXPECT(out[i] == 1000 * rank * (rank + 1) / 2 + (rank + 1) * i,
               "scan n=%d [%d] = %d", n, i, out[i]);
    }
  }
  free(in);
  free(out);
}

/* Bad arguments return their class under MPI_ERRORS_RETURN and change
 * nothing: the comm works after each. */
static void check_errors(void) {
  MPI_Comm c;
  int x = 1, y = 0, code;
  float fx = 1, fy;
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
  OK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
  MPI_Errhandler eh;
  OK(MPI_Comm_get_errhandler(c, &eh));
  EXPECT(eh == MPI_ERRORS_RETURN, "errhandler %d", eh);
  code = MPI_Allreduce(&x, &y, -1, MPI_INT, MPI_SUM, c);
  EXPECT(error_class(code) == MPI_ERR_COUNT, "count -1: %s", error_text(code));
  code = MPI_Allreduce(&x, &y, 1, (MPI_Datatype)999, MPI_SUM, c);
  EXPECT(error_class(code) == MPI_ERR_TYPE, "type 999: %s", error_text(code));
  code = MPI_Bcast(&x, 1, MPI_INT, p, c);
  EXPECT(error_class(code) == MPI_ERR_ROOT, "root p: %s", error_text(code));
  code = MPI_Gather(&x, 1, MPI_INT, &y, 1, MPI_INT, -3, c);
  EXPECT(error_class(code) == MPI_ERR_ROOT, "root -3: %s", error_text(code));
  code = MPI_Allreduce(&fx, &fy, 1, MPI_FLOAT, MPI_BAND, c);
  EXPECT(error_class(code) == MPI_ERR_OP, "band on float: %s",
         error_text(code));
  code = MPI_Send(&x, 1, MPI_INT, p + 5, 0, c);
  EXPECT(error_class(code) == MPI_ERR_RANK, "rank p+5: %s", error_text(code));
  code = MPI_Send(&x, 1, MPI_INT, 0, -4, c);
  EXPECT(error_class(code) == MPI_ERR_TAG, "tag -4: %s", error_text(code));
  code = MPI_Probe(p, 0, c, MPI_STATUS_IGNORE);
  EXPECT(error_class(code) == MPI_ERR_RANK, "probe rank p: %s",
         error_text(code));
  {
    struct {
      double v;
      int i;
    } dp = {1, 2}, dq;
    MPI_Request rq;
    code = MPI_Allreduce(&dp, &dq, 1, MPI_DOUBLE_INT, MPI_SUM, c);
    EXPECT(error_class(code) == MPI_ERR_OP, "sum of pairs: %s",
           error_text(code));
    code = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MINLOC, c);
    EXPECT(error_class(code) == MPI_ERR_OP, "minloc of ints: %s",
           error_text(code));
    code = MPI_Iallreduce(&dp, &dq, 1, MPI_DOUBLE_INT, MPI_MAXLOC, c, &rq);
    EXPECT(error_class(code) == MPI_ERR_UNSUPPORTED_OPERATION,
           "iallreduce maxloc: %s", error_text(code));
    code = MPI_Scan(&dp, &dq, 1, MPI_DOUBLE_INT, MPI_MINLOC, c);
    EXPECT(error_class(code) == MPI_ERR_UNSUPPORTED_OPERATION,
           "scan minloc: %s", error_text(code));
  }
  code = MPI_Iprobe(0, 0, c, NULL, MPI_STATUS_IGNORE);
  EXPECT(error_class(code) == MPI_ERR_ARG, "iprobe, flag NULL: %s",
         error_text(code));
  MPI_Op op;
  MPI_Datatype two;
  OK(MPI_Op_create(compose, 1, &op));
  OK(MPI_Type_contiguous(2, MPI_UINT64_T, &two));
  OK(MPI_Type_commit(&two));
  uint64_t pair[2] = {1, 0}, out[2];
  code = MPI_Allreduce(pair, out, 1, two, op, c);
  EXPECT(error_class(code) == MPI_ERR_UNSUPPORTED_OPERATION &&
             strstr(error_text(code), "user operator") != NULL,
         "user op on a derived type: %s", error_text(code));
  OK(MPI_Type_free(&two));
  OK(MPI_Op_free(&op));
  /* different send and receive signatures */
  int sv[2], rv[2 * 64];
  code = MPI_Allgather(sv, 2, MPI_INT, rv, 1, MPI_INT, c);
  EXPECT(error_class(code) == MPI_ERR_TYPE, "signatures: %s", error_text(code));
  /* truncation: the receive's class, the sizes in its message */
  if (p >= 2 && rank < 2) {
    int big[4] = {1, 2, 3, 4}, small = 0;
    if (rank == 0) {
      OK(MPI_Send(big, 4, MPI_INT, 1, 3, c));
    } else {
      MPI_Status st;
      code = MPI_Recv(&small, 1, MPI_INT, 0, 3, c, &st);
      EXPECT(error_class(code) == MPI_ERR_TRUNCATE, "truncate: %s",
             error_text(code));
    }
  }
  /* a negative count in a v-variant's array, the same on every rank */
  int *neg = malloc(sizeof(int) * (size_t)p),
      *dneg = calloc((size_t)p, sizeof(int));
  for (int r = 0; r < p; r++)
    neg[r] = r == p - 1 ? -2 : 1;
  code = MPI_Allgatherv(&x, 1, MPI_INT, rv, neg, dneg, MPI_INT, c);
  EXPECT(error_class(code) == MPI_ERR_COUNT, "allgatherv count -2: %s",
         error_text(code));
  /* the same refused by the nonblocking forms: no request is left behind
   * (MPI_Comm_free of c below would be refused) */
  MPI_Request none;
  code = MPI_Iallgatherv(&x, 1, MPI_INT, rv, neg, dneg, MPI_INT, c, &none);
  EXPECT(error_class(code) == MPI_ERR_COUNT, "iallgatherv count -2: %s",
         error_text(code));
  code =
      MPI_Ialltoallv(rv, neg, dneg, MPI_INT, rv, neg, dneg, MPI_INT, c, &none);
  EXPECT(error_class(code) == MPI_ERR_COUNT, "ialltoallv count -2: %s",
         error_text(code));
  code = MPI_Ireduce_scatter(rv, rv, neg, MPI_INT, MPI_SUM, c, &none);
  EXPECT(error_class(code) == MPI_ERR_COUNT, "ireduce_scatter count -2: %s",
         error_text(code));
  free(neg);
  free(dneg);
  /* a comm with a request in flight is not freed; after the wait it is */
  MPI_Comm busy;
  MPI_Request req;
  OK(MPI_Comm_dup(c, &busy));
  OK(MPI_Ibarrier(busy, &req));
  code = MPI_Comm_free(&busy);
  EXPECT(error_class(code) == MPI_ERR_UNSUPPORTED_OPERATION &&
             busy != MPI_COMM_NULL,
         "free with a request in flight: %s", error_text(code));
  OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
  OK(MPI_Comm_free(&busy));
  /* the comm still works */
  OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, c));
  EXPECT(y == p, "after the errors: %d", y);
  char s[MPI_MAX_ERROR_STRING];
  int len;
  OK(MPI_Error_string(MPI_ERR_TRUNCATE, s, &len));
  EXPECT(len > 0 && strstr(s, "MPI_ERR_TRUNCATE") != NULL, "string %s", s);
  OK(MPI_Comm_free(&c));
}

/* MPI_Query_thread gives what MPI_Init_thread granted; the processor's
 * name is the host's (gethostname, docs/MPI.md); the library's version
 * names crnet. Each string NUL-terminated within its MPI_MAX_ length,
 * its length as returned. */
static void check_environment(int provided) {
  int level = -1, len = -1;
  char name[MPI_MAX_PROCESSOR_NAME + 8], host[MPI_MAX_PROCESSOR_NAME];
  char version[MPI_MAX_LIBRARY_VERSION_STRING + 8];
  OK(MPI_Query_thread(&level));
  EXPECT(level == provided, "MPI_Query_thread: %d, MPI_Init_thread gave %d",
         level, provided);
  memset(name, 'x', sizeof name);
  OK(MPI_Get_processor_name(name, &len));
  EXPECT(len > 0 && len < MPI_MAX_PROCESSOR_NAME && name[len] == '\0' &&
             strlen(name) == (size_t)len,
         "processor name of length %d", len);
  if (gethostname(host, sizeof host) == 0) {
    host[sizeof host - 1] = '\0';
    EXPECT(strcmp(name, host) == 0, "processor name '%s', host '%s'", name,
           host);
  }
  memset(version, 'x', sizeof version);
  OK(MPI_Get_library_version(version, &len));
  EXPECT(len > 0 && len < MPI_MAX_LIBRARY_VERSION_STRING &&
             version[len] == '\0' && strlen(version) == (size_t)len &&
             strstr(version, "crnet") != NULL,
         "library version of length %d: '%.*s'", len,
         MPI_MAX_LIBRARY_VERSION_STRING, version);
}

static int mismatch(void) {
  int x = rank, y = 0, code;
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  /* Everyone past MPI_Init first: the failure the mismatch causes is the
   * job's, and a rank still in MPI_Init (whose MPI_COMM_SELF is a split of
   * the world) would meet it there and end with the fatal handler. A rank
   * still in this barrier when the others have left it and met the
   * mismatch gets the failure here (relayed), which counts as well. */
  code = MPI_Barrier(MPI_COMM_WORLD);
  if (code == MPI_SUCCESS && rank == 0)
    code = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  else if (code == MPI_SUCCESS)
    code = MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
  EXPECT(error_class(code) == MPI_ERR_OTHER &&
             strstr(error_text(code), "mismatch") != NULL,
         "mismatch: %s", error_text(code));
  if (failures == 0)
    printf("mpi_check: rank %d: %s\n", rank, error_text(code));
  /* the world has failed: finalize says so, returning */
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  int provided = -1, flag = 0, v = 0, sv = 0;
  const char *mode = argc > 1 ? argv[1] : "all";
  OK(MPI_Initialized(&flag));
  EXPECT(!flag, "initialized before MPI_Init");
  OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  EXPECT(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
  OK(MPI_Comm_rank(world_static, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
  if (p < 2 || p > 64) {
    fprintf(stderr, "mpi_check: run it on 2 to 64 ranks\n");
    return 2;
  }
  if (strcmp(mode, "mismatch") == 0)
    return mismatch();
  if (strcmp(mode, "fatal") == 0) {
    int x = 0;
    /* Everyone past MPI_Init first, as in mismatch(): the abort must meet
     * the others in the barrier below, not in MPI_Init. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 1)
      MPI_Send(&x, 1, MPI_INT, p + 7, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD); /* fails on the others: the job aborted */
    fprintf(stderr, "mpi_check: rank %d: not ended by the error\n", rank);
    return 0; /* the test wants a failing job */
  }
  OK(MPI_Get_version(&v, &sv));
  EXPECT(v == 3 && sv == 1, "version %d.%d", v, sv);
  check_environment(provided);
  double t0 = MPI_Wtime();
  EXPECT(MPI_Wtick() > 0 && MPI_Wtick() < 1e-3, "wtick %g", MPI_Wtick());
  check_reductions();
  check_moves();
  check_alltoallw();
  check_comms();
  check_messages();
  check_loc();
  check_sweep();
  check_vrooted();
  check_errors();
  EXPECT(MPI_Wtime() >= t0, "wtime went back");
  /* A comm the program never frees: MPI_Finalize destroys it (and under
   * the sanitizers nothing of it leaks). */
  MPI_Comm leftover;
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &leftover));
  OK(MPI_Barrier(leftover));
  int bad = failures, all_bad = 0;
  OK(MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  OK(MPI_Finalize());
  OK(MPI_Finalized(&flag));
  EXPECT(flag, "not finalized");
  if (rank == 0 && all_bad == 0 && failures == 0)
    printf("mpi_check: p = %d: every check held\n", p);
  return failures == 0 && all_bad == 0 ? 0 : 1;
}
