/* mpi_types: crnet-mpi's derived datatypes with holes (vector, hvector,
 * indexed, hindexed, indexed_block, struct, resized, subarray, dup), their
 * sizes and extents, MPI_Pack and MPI_Unpack, and moving them: messages
 * (blocking, nonblocking, sendrecv, sendrecv_replace, a short message),
 * collectives (bcast, reduce, allreduce in place and not, scan, allgather,
 * alltoall as a transpose, gather and scatter of matrix columns, their
 * I-forms), a type freed while a receive of it is in flight, and the calls
 * that refuse such types. Every receive also checks that the holes of the
 * receive buffer keep what they held. At any p >= 2.
 *
 *   crlaunch -n P mpi_types
 *
 * Exits 0 when every check held. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT_PROG "mpi_types"
#include "mpi.h"
#include "mpi_expect.h"

static int rank, p;
static int failures;

#define HOLE (-7777.0) /* what a receive buffer's holes hold throughout */

/* --- sizes and extents -------------------------------------------------- */

static void check_bounds(MPI_Datatype t, int size, MPI_Aint lb, MPI_Aint ext,
                         MPI_Aint tlb, MPI_Aint text, const char *what) {
  int s = -1;
  MPI_Aint l = -1, e = -1, tl = -1, te = -1;
  OK(MPI_Type_size(t, &s));
  OK(MPI_Type_get_extent(t, &l, &e));
  OK(MPI_Type_get_true_extent(t, &tl, &te));
  EXPECT(s == size && l == lb && e == ext && tl == tlb && te == text,
         "%s: size %d lb %ld extent %ld true %ld %ld; wanted %d %ld %ld %ld "
         "%ld",
         what, s, (long)l, (long)e, (long)tl, (long)te, size, (long)lb,
         (long)ext, (long)tlb, (long)text);
}

struct particle {
  double x[3];
  int id;
  char tag;
};

static MPI_Datatype particle_type(void) {
  MPI_Datatype t;
  int lens[3] = {3, 1, 1};
  MPI_Aint disps[3] = {offsetof(struct particle, x),
                       offsetof(struct particle, id),
                       offsetof(struct particle, tag)};
  MPI_Datatype types[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR};
  OK(MPI_Type_create_struct(3, lens, disps, types, &t));
  OK(MPI_Type_commit(&t));
  return t;
}

static void constructors(void) {
  MPI_Datatype v, hv, ix, hix, blk, res, sub, dup, st, contig, dense;
  int lens[3] = {2, 1, 3}, disps[3] = {5, 0, 9};
  MPI_Aint hdisps[2] = {16, 0};
  int sizes[2] = {6, 5}, subs[2] = {3, 2}, starts[2] = {1, 2};

  OK(MPI_Type_vector(4, 2, 5, MPI_DOUBLE, &v)); /* 4 x 2 doubles, stride 5 */
  check_bounds(v, 64, 0, (3 * 5 + 2) * 8, 0, 17 * 8, "vector");
  OK(MPI_Type_create_hvector(3, 1, 12, MPI_INT, &hv));
  check_bounds(hv, 12, 0, 28, 0, 28, "hvector");
  OK(MPI_Type_indexed(3, lens, disps, MPI_INT, &ix));
  check_bounds(ix, 24, 0, 48, 0, 48, "indexed");
  OK(MPI_Type_create_hindexed(2, (int[]){1, 1}, hdisps, MPI_DOUBLE, &hix));
  check_bounds(hix, 16, 0, 24, 0, 24, "hindexed");
  OK(MPI_Type_create_indexed_block(2, 2, (int[]){4, 1}, MPI_FLOAT, &blk));
  check_bounds(blk, 16, 4, 20, 4, 20, "indexed_block");
  OK(MPI_Type_create_resized(MPI_INT, -4, 16, &res));
  check_bounds(res, 4, -4, 16, 0, 4, "resized");
  OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT,
                              &sub));
  check_bounds(sub, 24, 0, 120, (1 * 5 + 2) * 4,
               ((3 * 5 + 3 + 1) - (1 * 5 + 2)) * 4, "subarray");
  st = particle_type();
  check_bounds(st, 3 * 8 + 4 + 1, 0, sizeof(struct particle), 0,
               offsetof(struct particle, tag) + 1, "struct (padded extent)");
  OK(MPI_Type_dup(v, &dup));
  check_bounds(dup, 64, 0, 17 * 8, 0, 17 * 8, "dup");
  /* A contiguous run of a type with holes keeps them. */
  OK(MPI_Type_contiguous(2, v, &contig));
  check_bounds(contig, 128, 0, 2 * 17 * 8, 0, 2 * 17 * 8, "contiguous(vector)");
  /* A vector with no gaps: the bounds of a dense run. */
  OK(MPI_Type_vector(3, 2, 2, MPI_INT, &dense));
  check_bounds(dense, 24, 0, 24, 0, 24, "vector without gaps");
  /* Bad arguments change nothing and say why. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Datatype none = MPI_DATATYPE_NULL;
  EXPECT(error_class(MPI_Type_vector(-1, 1, 1, MPI_INT, &none)) ==
                 MPI_ERR_COUNT &&
             none == MPI_DATATYPE_NULL,
         "a negative count");
  EXPECT(error_class(MPI_Type_vector(2, 1, 1, MPI_DOUBLE_INT, &none)) ==
                 MPI_ERR_TYPE &&
             none == MPI_DATATYPE_NULL,
         "a pair type inside a vector");
  EXPECT(error_class(MPI_Type_create_subarray(2, sizes, (int[]){6, 1}, starts,
                                              MPI_ORDER_C, MPI_INT, &none)) ==
                 MPI_ERR_ARG &&
             none == MPI_DATATYPE_NULL,
         "a subarray past its array");
  MPI_Datatype list[] = {v, hv, ix, hix, blk, res, sub, st, dup, contig, dense};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
    OK(MPI_Type_free(&list[i]));
}

/* Bounds MPI defines with care: negative strides, empty blocks, structs
 * inside structs (C's padding), set bounds that win (MPI 3.1, 4.1.7), dup
 * of any type with its committed state. */
static void bounds(void) {
  MPI_Datatype neg, empty, hb, inner, outer, r12, s12, r16, s16, d2, dv, bad;
  /* 3 ints at 0, -8 and -16 bytes. */
  OK(MPI_Type_vector(3, 1, -2, MPI_INT, &neg));
  check_bounds(neg, 12, -16, 20, -16, 20, "a negative stride");
  /* A block of length 0 adds nothing, bounds included. */
  OK(MPI_Type_indexed(2, (int[]){0, 2}, (int[]){10, 1}, MPI_INT, &empty));
  check_bounds(empty, 8, 4, 8, 4, 8, "an empty block");
  OK(MPI_Type_create_hindexed_block(2, 3, (MPI_Aint[]){20, -4}, MPI_CHAR, &hb));
  check_bounds(hb, 6, -4, 27, -4, 27, "hindexed_block");
  /* struct { int a; float b; } is dense (no holes), aligned to 4: in
   * struct { inner s; char c; } the outer one is 12 bytes as in C. */
  struct inner_c {
    int a;
    float b;
  };
  struct outer_c {
    struct inner_c s;
    char c;
  };
  OK(MPI_Type_create_struct(
      2, (int[]){1, 1},
      (MPI_Aint[]){offsetof(struct inner_c, a), offsetof(struct inner_c, b)},
      (MPI_Datatype[]){MPI_INT, MPI_FLOAT}, &inner));
  OK(MPI_Type_create_struct(
      2, (int[]){1, 1},
      (MPI_Aint[]){offsetof(struct outer_c, s), offsetof(struct outer_c, c)},
      (MPI_Datatype[]){inner, MPI_CHAR}, &outer));
  check_bounds(outer, 9, 0, sizeof(struct outer_c), 0, 9,
               "a struct in a struct");
  /* Set bounds win, and a struct holding them is not padded. */
  OK(MPI_Type_create_resized(MPI_DOUBLE, 0, 12, &r12));
  OK(MPI_Type_create_struct(1, (int[]){1}, (MPI_Aint[]){0},
                            (MPI_Datatype[]){r12}, &s12));
  check_bounds(s12, 8, 0, 12, 0, 8, "a struct of a resized double");
  OK(MPI_Type_create_resized(MPI_INT, 0, 16, &r16));
  OK(MPI_Type_create_struct(2, (int[]){1, 1}, (MPI_Aint[]){0, 32},
                            (MPI_Datatype[]){r16, MPI_INT}, &s16));
  check_bounds(s16, 8, 0, 16, 0, 36, "data past the set bounds");
  /* Dup of a pair type; dup of an uncommitted type is uncommitted. */
  OK(MPI_Type_dup(MPI_2INT, &d2));
  check_bounds(d2, 8, 0, 8, 0, 8, "dup of MPI_2INT");
  OK(MPI_Type_vector(2, 1, 2, MPI_INT, &dv));
  OK(MPI_Type_dup(dv, &bad));
  int x[3] = {0};
  EXPECT(error_class(MPI_Send(x, 1, bad, MPI_PROC_NULL, 0, MPI_COMM_WORLD)) ==
             MPI_ERR_TYPE,
         "a send of a dup of an uncommitted type");
  OK(MPI_Type_free(&bad));
  /* Pairs with their padding inside a type with holes are refused. */
  MPI_Datatype pairs;
  OK(MPI_Type_contiguous(1, MPI_DOUBLE_INT, &pairs));
  bad = MPI_DATATYPE_NULL;
  EXPECT(error_class(MPI_Type_vector(2, 1, 2, pairs, &bad)) == MPI_ERR_TYPE &&
             bad == MPI_DATATYPE_NULL,
         "a vector of contiguous pairs");
  /* A freed handle names nothing, even once its slot holds another type
   * (the low 12 bits of a derived handle are its slot: types.c). */
  MPI_Datatype gone = neg, again = MPI_DATATYPE_NULL;
  OK(MPI_Type_free(&neg));
  int sz = -1, found = 0;
  for (int k = 0; k < 5000 && !found; k++) {
    MPI_Datatype t;
    OK(MPI_Type_contiguous(3, MPI_INT, &t));
    if ((t & 4095) == (gone & 4095)) {
      found = 1;
      EXPECT(error_class(MPI_Type_size(gone, &sz)) == MPI_ERR_TYPE,
             "a freed handle names the next type of its slot");
    }
    OK(MPI_Type_free(&t));
  }
  EXPECT(found, "no type took the freed slot again");
  OK(MPI_Type_vector(3, 1, -2, MPI_INT, &again));
  MPI_Datatype list[] = {again, empty, hb,  inner, outer, r12,
                         s12,   r16,   s16, d2,    dv,    pairs};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
    OK(MPI_Type_free(&list[i]));
}

/* --- MPI_Pack ------------------------------------------------------------ */

static void pack_unpack(void) {
  double m[4][5], back[4][5];
  char buf[256];
  int pos = 0, size = 0;
  MPI_Datatype col;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 5; j++) {
      m[i][j] = 10 * i + j;
      back[i][j] = HOLE;
    }
  OK(MPI_Type_vector(4, 1, 5, MPI_DOUBLE, &col));
  OK(MPI_Type_commit(&col));
  OK(MPI_Pack_size(2, col, MPI_COMM_WORLD, &size));
  EXPECT(size == 64, "pack size %d", size);
  OK(MPI_Pack(&m[0][1], 1, col, buf, sizeof buf, &pos, MPI_COMM_WORLD));
  OK(MPI_Pack(&m[0][3], 1, MPI_DOUBLE, buf, sizeof buf, &pos, MPI_COMM_WORLD));
  EXPECT(pos == 40, "position %d", pos);
  double packed[5];
  memcpy(packed, buf, sizeof packed);
  EXPECT(packed[0] == 1 && packed[1] == 11 && packed[2] == 21 &&
             packed[3] == 31 && packed[4] == 3,
         "packed %g %g %g %g %g", packed[0], packed[1], packed[2], packed[3],
         packed[4]);
  pos = 0;
  OK(MPI_Unpack(buf, 40, &pos, &back[0][4], 1, col, MPI_COMM_WORLD));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 5; j++)
      EXPECT(back[i][j] == (j == 4 ? 10 * i + 1 : HOLE), "unpacked [%d][%d] %g",
             i, j, back[i][j]);
  pos = 30;
  EXPECT(error_class(MPI_Pack(m, 1, col, buf, 40, &pos, MPI_COMM_WORLD)) ==
                 MPI_ERR_TRUNCATE &&
             pos == 30,
         "a pack past the buffer's end");
  pos = 0;
  EXPECT(error_class(MPI_Unpack(buf, 24, &pos, &back[0][0], 1, col,
                                MPI_COMM_WORLD)) == MPI_ERR_TRUNCATE &&
             pos == 0,
         "an unpack past the packed bytes");
  /* A packed message: a column and an int, received as MPI_PACKED. */
  int next = (rank + 1) % p, prev = (rank + p - 1) % p, tag = 40 + rank;
  char in[256];
  pos = 0;
  OK(MPI_Pack(&m[0][2], 1, col, buf, sizeof buf, &pos, MPI_COMM_WORLD));
  OK(MPI_Pack(&tag, 1, MPI_INT, buf, sizeof buf, &pos, MPI_COMM_WORLD));
  OK(MPI_Sendrecv(buf, pos, MPI_PACKED, next, 11, in, sizeof in, MPI_PACKED,
                  prev, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  int got_tag = -1;
  pos = 0;
  for (int i = 0; i < 4; i++)
    back[i][0] = HOLE;
  OK(MPI_Unpack(in, sizeof in, &pos, &back[0][0], 1, col, MPI_COMM_WORLD));
  OK(MPI_Unpack(in, sizeof in, &pos, &got_tag, 1, MPI_INT, MPI_COMM_WORLD));
  EXPECT(got_tag == 40 + prev && back[3][0] == 32,
         "a packed message: tag %d, [3][0] %g", got_tag, back[3][0]);
  OK(MPI_Type_free(&col));
}

/* --- messages ------------------------------------------------------------ */

#define R 6
#define C 7

static double value(int from, int i, int j) { return from * 1000 + i * C + j; }

static void fill(double m[R][C], int from) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++)
      m[i][j] = value(from, i, j);
}

static void holes(double m[R][C]) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++)
      m[i][j] = HOLE;
}

/* Column j of the matrix m, as sent from rank `from`, landed in column k
 * of got; every other entry is still a hole. */
static void check_column(double got[R][C], int k, int from, int j,
                         const char *what) {
  int bad = 0;
  for (int i = 0; i < R; i++)
    for (int c = 0; c < C; c++) {
      double want = c == k ? value(from, i, j) : HOLE;
      if (got[i][c] != want && bad++ == 0)
        EXPECT(0, "%s: [%d][%d] = %g, wanted %g", what, i, c, got[i][c], want);
    }
}

static void messages(MPI_Datatype col) {
  double m[R][C], got[R][C], dense[R];
  int next = (rank + 1) % p, prev = (rank + p - 1) % p, n = -1;
  MPI_Status st;
  MPI_Request rq[2];
  fill(m, rank);

  /* A column to the next rank, received as a column elsewhere. */
  holes(got);
  OK(MPI_Sendrecv(&m[0][2], 1, col, next, 1, &got[0][5], 1, col, prev, 1,
                  MPI_COMM_WORLD, &st));
  check_column(got, 5, prev, 2, "sendrecv column");
  OK(MPI_Get_count(&st, col, &n));
  EXPECT(n == 1, "count of columns %d", n);
  OK(MPI_Get_count(&st, MPI_DOUBLE, &n));
  EXPECT(n == R, "count of doubles %d", n);

  /* A column sent, received densely (the signatures match). */
  OK(MPI_Irecv(dense, R, MPI_DOUBLE, prev, 2, MPI_COMM_WORLD, &rq[0]));
  OK(MPI_Isend(&m[0][3], 1, col, next, 2, MPI_COMM_WORLD, &rq[1]));
  OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
  for (int i = 0; i < R; i++)
    EXPECT(dense[i] == value(prev, i, 3), "dense[%d] = %g", i, dense[i]);

  /* Dense sent, received as a column, blocking; the send modes. */
  for (int i = 0; i < R; i++)
    dense[i] = value(rank, i, 6);
  holes(got);
  if (rank % 2 == 0) {
    OK(MPI_Ssend(dense, R, MPI_DOUBLE, next, 3, MPI_COMM_WORLD));
    OK(MPI_Recv(&got[0][0], 1, col, prev, 3, MPI_COMM_WORLD, &st));
  } else {
    OK(MPI_Recv(&got[0][0], 1, col, prev, 3, MPI_COMM_WORLD, &st));
    OK(MPI_Send(dense, R, MPI_DOUBLE, next, 3, MPI_COMM_WORLD));
  }
  check_column(got, 0, prev, 6, "recv into a column");

  /* A short message: two doubles into a column; the rest stays holes. */
  holes(got);
  OK(MPI_Sendrecv(&m[0][1], 2, MPI_DOUBLE, next, 4, &got[0][1], 1, col, prev, 4,
                  MPI_COMM_WORLD, &st));
  OK(MPI_Get_count(&st, MPI_DOUBLE, &n));
  EXPECT(n == 2, "a short message: %d doubles", n);
  OK(MPI_Get_count(&st, col, &n));
  EXPECT(n == MPI_UNDEFINED, "a short message: %d columns", n);
  for (int i = 0; i < R; i++)
    for (int c = 0; c < C; c++) {
      double want = c == 1 && i < 2 ? value(prev, 0, 1 + i) : HOLE;
      EXPECT(got[i][c] == want, "short: [%d][%d] = %g, wanted %g", i, c,
             got[i][c], want);
    }

  /* In place: a column goes round the ring. */
  fill(got, rank);
  OK(MPI_Sendrecv_replace(&got[0][4], 1, col, next, 5, prev, 5, MPI_COMM_WORLD,
                          &st));
  for (int i = 0; i < R; i++)
    for (int c = 0; c < C; c++)
      EXPECT(got[i][c] == value(c == 4 ? prev : rank, i, c),
             "replace: [%d][%d] = %g", i, c, got[i][c]);

  /* The other send modes with a column. */
  static char space[4 * (R * sizeof(double) + MPI_BSEND_OVERHEAD)];
  OK(MPI_Buffer_attach(space, sizeof space));
  holes(got);
  OK(MPI_Bsend(&m[0][6], 1, col, next, 20, MPI_COMM_WORLD));
  OK(MPI_Ibsend(&m[0][5], 1, col, next, 21, MPI_COMM_WORLD, &rq[0]));
  OK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
  OK(MPI_Irecv(&got[0][0], 1, col, prev, 20, MPI_COMM_WORLD, &rq[0]));
  OK(MPI_Recv(&got[0][1], 1, col, prev, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  OK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
  void *was;
  int was_size;
  OK(MPI_Buffer_detach(&was, &was_size));
  for (int i = 0; i < R; i++)
    EXPECT(got[i][0] == value(prev, i, 6) && got[i][1] == value(prev, i, 5) &&
               got[i][2] == HOLE,
           "buffered columns, row %d: %g %g", i, got[i][0], got[i][1]);
  holes(got);
  OK(MPI_Irecv(&got[0][3], 1, col, prev, 22, MPI_COMM_WORLD, &rq[0]));
  OK(MPI_Issend(&m[0][4], 1, col, next, 22, MPI_COMM_WORLD, &rq[1]));
  OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
  check_column(got, 3, prev, 4, "issend of a column");

  /* A type freed while a receive of it is in flight. */
  MPI_Datatype tmp;
  OK(MPI_Type_dup(col, &tmp));
  holes(got);
  OK(MPI_Irecv(&got[0][2], 1, tmp, prev, 6, MPI_COMM_WORLD, &rq[0]));
  OK(MPI_Type_free(&tmp));
  OK(MPI_Send(&m[0][0], 1, col, next, 6, MPI_COMM_WORLD));
  OK(MPI_Wait(&rq[0], &st));
  check_column(got, 2, prev, 0, "irecv of a freed type");
}

/* A 2-D halo exchange: the interior of a block of a 2-D array as a
 * subarray, sent whole to the next rank. */
static void subarray(void) {
  enum { N = 8, M = 6 };
  int a[N][M], b[N][M];
  int sizes[2] = {N, M}, subs[2] = {3, 4}, starts[2] = {2, 1};
  int next = (rank + 1) % p, prev = (rank + p - 1) % p;
  MPI_Datatype sub;
  OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT,
                              &sub));
  OK(MPI_Type_commit(&sub));
  for (int i = 0; i < N; i++)
    for (int j = 0; j < M; j++) {
      a[i][j] = rank * 100 + i * M + j;
      b[i][j] = -1;
    }
  OK(MPI_Sendrecv(a, 1, sub, next, 9, b, 1, sub, prev, 9, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE));
  for (int i = 0; i < N; i++)
    for (int j = 0; j < M; j++) {
      bool in = i >= 2 && i < 5 && j >= 1 && j < 5;
      EXPECT(b[i][j] == (in ? prev * 100 + i * M + j : -1),
             "subarray [%d][%d] = %d", i, j, b[i][j]);
    }
  /* Fortran order: the first index runs fastest. */
  int f[4][3] = {{0}}, fs[2] = {3, 4}, fsub[2] = {2, 1}, fst[2] = {1, 2};
  int packed[2], pos = 0;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      f[i][j] = 10 * i + j;
  MPI_Datatype ft;
  OK(MPI_Type_create_subarray(2, fs, fsub, fst, MPI_ORDER_FORTRAN, MPI_INT,
                              &ft));
  OK(MPI_Type_commit(&ft));
  OK(MPI_Pack(f, 1, ft, packed, sizeof packed, &pos, MPI_COMM_WORLD));
  /* Column-major 3 x 4: element (i, j) at j * 3 + i, that is f[j][i]. */
  EXPECT(packed[0] == f[2][1] && packed[1] == f[2][2],
         "Fortran subarray packed %d %d", packed[0], packed[1]);
  OK(MPI_Type_free(&ft));
  OK(MPI_Type_free(&sub));
}

/* --- collectives --------------------------------------------------------- */

static void collectives(MPI_Datatype col) {
  double m[R][C], got[R][C];
  MPI_Request rq;
  int root = p - 1;

  /* bcast of a column from the last rank into column 1 everywhere. */
  fill(m, rank);
  if (rank == root)
    memcpy(got, m, sizeof got);
  else
    holes(got);
  OK(MPI_Bcast(&got[0][1], 1, col, root, MPI_COMM_WORLD));
  if (rank != root)
    check_column(got, 1, root, 1, "bcast");
  else
    for (int i = 0; i < R; i++)
      for (int c = 0; c < C; c++)
        EXPECT(got[i][c] == value(root, i, c), "bcast's root changed");
  holes(got);
  if (rank == 0)
    fill(got, 0);
  OK(MPI_Ibcast(&got[0][3], 1, col, 0, MPI_COMM_WORLD, &rq));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  if (rank != 0)
    check_column(got, 3, 0, 3, "ibcast");

  /* allreduce of two columns (a vector of blocks of one) at once. */
  MPI_Datatype cols2;
  OK(MPI_Type_vector(R, 2, C, MPI_DOUBLE, &cols2));
  OK(MPI_Type_commit(&cols2));
  holes(got);
  OK(MPI_Allreduce(&m[0][2], &got[0][2], 1, cols2, MPI_SUM, MPI_COMM_WORLD));
  double ranks = p * (p - 1) / 2.0;
  for (int i = 0; i < R; i++)
    for (int c = 0; c < C; c++) {
      double want = c == 2 || c == 3 ? 1000 * ranks + p * (i * C + c) : HOLE;
      EXPECT(got[i][c] == want, "allreduce [%d][%d] = %g, wanted %g", i, c,
             got[i][c], want);
    }
  /* in place, nonblocking: only the column changes. */
  fill(got, rank);
  OK(MPI_Iallreduce(MPI_IN_PLACE, &got[0][6], 1, col, MPI_MAX, MPI_COMM_WORLD,
                    &rq));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  for (int i = 0; i < R; i++)
    for (int c = 0; c < C; c++)
      EXPECT(got[i][c] == value(c == 6 ? p - 1 : rank, i, c),
             "iallreduce in place [%d][%d] = %g", i, c, got[i][c]);
  /* reduce to rank 0; the others' receive buffers are not touched. */
  holes(got);
  OK(MPI_Reduce(&m[0][0], &got[0][0], 1, col, MPI_MIN, 0, MPI_COMM_WORLD));
  if (rank == 0)
    check_column(got, 0, 0, 0, "reduce");
  else
    check_column(got, -1, 0, 0, "reduce's non-root");
  /* scan: rank r gets the sum over ranks 0..r. */
  holes(got);
  OK(MPI_Scan(&m[0][5], &got[0][5], 1, col, MPI_SUM, MPI_COMM_WORLD));
  for (int i = 0; i < R; i++)
    for (int c = 0; c < C; c++)
      EXPECT(got[i][c] == (c == 5 ? 1000.0 * rank * (rank + 1) / 2 +
                                        (rank + 1) * (i * C + 5)
                                  : HOLE),
             "scan [%d][%d] = %g", i, c, got[i][c]);
  /* exscan, nonblocking: rank 0's result is left as it was. */
  holes(got);
  OK(MPI_Iexscan(&m[0][4], &got[0][4], 1, col, MPI_SUM, MPI_COMM_WORLD, &rq));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  for (int i = 0; i < R; i++)
    for (int c = 0; c < C; c++)
      EXPECT(got[i][c] == (c == 4 && rank > 0 ? 1000.0 * rank * (rank - 1) / 2 +
                                                    rank * (i * C + 4)
                                              : HOLE),
             "iexscan [%d][%d] = %g", i, c, got[i][c]);
  /* iscan in place; ireduce in place at the root. */
  fill(got, rank);
  OK(MPI_Iscan(MPI_IN_PLACE, &got[0][0], 1, col, MPI_MAX, MPI_COMM_WORLD, &rq));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  for (int i = 0; i < R; i++)
    EXPECT(got[i][0] == value(rank, i, 0) && got[i][1] == value(rank, i, 1),
           "iscan in place, row %d", i);
  fill(got, rank);
  if (rank == root)
    OK(MPI_Ireduce(MPI_IN_PLACE, &got[0][2], 1, col, MPI_SUM, root,
                   MPI_COMM_WORLD, &rq));
  else
    OK(MPI_Ireduce(&got[0][2], NULL, 1, col, MPI_SUM, root, MPI_COMM_WORLD,
                   &rq));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  for (int i = 0; i < R && rank == root; i++)
    for (int c = 0; c < C; c++)
      EXPECT(got[i][c] ==
                 (c == 2 ? 1000 * ranks + p * (i * C + 2) : value(rank, i, c)),
             "ireduce in place [%d][%d] = %g", i, c, got[i][c]);
  /* A type freed while a nonblocking collective with it is in flight. */
  MPI_Datatype tmp;
  OK(MPI_Type_dup(col, &tmp));
  holes(got);
  OK(MPI_Iallreduce(&m[0][1], &got[0][1], 1, tmp, MPI_SUM, MPI_COMM_WORLD,
                    &rq));
  OK(MPI_Type_free(&tmp));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  for (int i = 0; i < R; i++)
    EXPECT(got[i][1] == 1000 * ranks + p * (i * C + 1) && got[i][0] == HOLE,
           "iallreduce of a freed type, row %d: %g", i, got[i][1]);
  OK(MPI_Type_free(&cols2));

  /* A column type resized to one double: consecutive columns, the way
   * programs scatter and transpose matrices. */
  MPI_Datatype col1;
  OK(MPI_Type_create_resized(col, 0, sizeof(double), &col1));
  OK(MPI_Type_commit(&col1));
  /* allgather: rank r's column r % C lands in column r of everyone's. */
  if (p <= C) {
    holes(got);
    OK(MPI_Allgather(&m[0][rank], 1, col1, &got[0][0], 1, col1,
                     MPI_COMM_WORLD));
    for (int i = 0; i < R; i++)
      for (int c = 0; c < C; c++)
        EXPECT(got[i][c] == (c < p ? value(c, i, c) : HOLE),
               "allgather [%d][%d] = %g", i, c, got[i][c]);
    /* The same nonblocking, in place. */
    holes(got);
    for (int i = 0; i < R; i++)
      got[i][rank] = value(rank, i, rank);
    OK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, &got[0][0], 1, col1,
                      MPI_COMM_WORLD, &rq));
    OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int i = 0; i < R; i++)
      for (int c = 0; c < C; c++)
        EXPECT(got[i][c] == (c < p ? value(c, i, c) : HOLE),
               "iallgather in place [%d][%d] = %g", i, c, got[i][c]);
    /* scatter the root's columns, one per rank, gather them back. */
    double mine[R];
    OK(MPI_Scatter(&m[0][0], 1, col1, mine, R, MPI_DOUBLE, root,
                   MPI_COMM_WORLD));
    for (int i = 0; i < R; i++)
      EXPECT(mine[i] == value(root, i, rank), "scatter [%d] = %g", i, mine[i]);
    /* Iscatter into a column; the root keeps its own in place. */
    holes(got);
    if (rank == root)
      OK(MPI_Iscatter(&m[0][0], 1, col1, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
                      root, MPI_COMM_WORLD, &rq));
    else
      OK(MPI_Iscatter(NULL, 0, MPI_DATATYPE_NULL, &got[0][6], 1, col, root,
                      MPI_COMM_WORLD, &rq));
    OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    if (rank != root)
      check_column(got, 6, root, rank, "iscatter into a column");
    /* Gather columns in place at the root. */
    fill(got, rank);
    if (rank == 0) {
      for (int i = 0; i < R; i++)
        got[i][0] = -1; /* its own block, in place: stays */
      OK(MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, &got[0][0], 1, col1, 0,
                    MPI_COMM_WORLD));
      for (int i = 0; i < R; i++)
        for (int c = 0; c < C; c++)
          EXPECT(got[i][c] == (c == 0 ? -1 : value(c < p ? c : 0, i, c)),
                 "gather in place [%d][%d] = %g", i, c, got[i][c]);
    } else {
      OK(MPI_Gather(&got[0][rank], 1, col, NULL, 0, MPI_DATATYPE_NULL, 0,
                    MPI_COMM_WORLD));
    }
    holes(got);
    OK(MPI_Igather(mine, R, MPI_DOUBLE, &got[0][0], 1, col1, 0, MPI_COMM_WORLD,
                   &rq));
    OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    if (rank == 0)
      for (int i = 0; i < R; i++)
        for (int c = 0; c < C; c++)
          EXPECT(got[i][c] == (c < p ? value(root, i, c) : HOLE),
                 "gather [%d][%d] = %g", i, c, got[i][c]);
  }
  /* alltoall as a transpose: rank r sends row block j to rank j; each
   * row of p ints is received as a column of the result. */
  int *rows = malloc(sizeof *rows * (size_t)p * (size_t)p);
  int *cols = malloc(sizeof *cols * (size_t)p * (size_t)p);
  MPI_Datatype icol, icol1;
  for (int j = 0; j < p; j++)
    for (int k = 0; k < p; k++) {
      rows[j * p + k] = rank * p * p + j * p + k;
      cols[j * p + k] = -1;
    }
  OK(MPI_Type_vector(p, 1, p, MPI_INT, &icol));
  OK(MPI_Type_create_resized(icol, 0, sizeof(int), &icol1));
  OK(MPI_Type_commit(&icol1));
  /* From rank s: its row for me (p ints) into column s. */
  OK(MPI_Alltoall(rows, p, MPI_INT, cols, 1, icol1, MPI_COMM_WORLD));
  for (int k = 0; k < p; k++)
    for (int s = 0; s < p; s++)
      EXPECT(cols[k * p + s] == s * p * p + rank * p + k,
             "alltoall [%d][%d] = %d", k, s, cols[k * p + s]);
  /* Again, nonblocking and in place: column s goes to rank s, and what
   * comes back is this rank's own rows transposed (cols[k][s] =
   * rows[s][k]). */
  OK(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, cols, 1, icol1,
                   MPI_COMM_WORLD, &rq));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  for (int k = 0; k < p; k++)
    for (int s = 0; s < p; s++)
      EXPECT(cols[k * p + s] == rank * p * p + s * p + k,
             "ialltoall in place [%d][%d] = %d", k, s, cols[k * p + s]);
  free(rows);
  free(cols);
  OK(MPI_Type_free(&icol));
  OK(MPI_Type_free(&icol1));
  OK(MPI_Type_free(&col1));

  /* A struct of several base types moves as bytes: a bcast of particles. */
  MPI_Datatype pt = particle_type();
  struct particle ps[3];
  memset(ps, 0, sizeof ps);
  for (int k = 0; k < 3; k++)
    if (rank == 0) {
      ps[k].x[0] = k;
      ps[k].x[2] = -k;
      ps[k].id = 40 + k;
      ps[k].tag = (char)('a' + k);
    }
  OK(MPI_Bcast(ps, 3, pt, 0, MPI_COMM_WORLD));
  for (int k = 0; k < 3; k++)
    EXPECT(ps[k].x[0] == k && ps[k].x[2] == -k && ps[k].id == 40 + k &&
               ps[k].tag == 'a' + k,
           "particle %d: %g %g %d %c", k, ps[k].x[0], ps[k].x[2], ps[k].id,
           ps[k].tag);
  /* ... but is never reduced, and the calls without staging refuse holes:
   * every rank refuses alike, nothing is sent. */
  EXPECT(error_class(
             MPI_Allreduce(MPI_IN_PLACE, ps, 1, pt, MPI_SUM, MPI_COMM_WORLD)) ==
             MPI_ERR_UNSUPPORTED_OPERATION,
         "a reduction of a struct of doubles and ints");
  int counts[64], displs[64];
  for (int k = 0; k < p && k < 64; k++) {
    counts[k] = 1;
    displs[k] = k;
  }
  int code = MPI_Allgatherv(&m[0][0], 1, col, got, counts, displs, col,
                            MPI_COMM_WORLD);
  EXPECT(error_class(code) == MPI_ERR_TYPE &&
             strstr(error_text(code), "holes") != NULL,
         "allgatherv of a column: %s", error_text(code));
  /* A NULL buffer of a type with holes: the stage refuses it (crnet would
   * be handed the stage's own buffer). Every rank refuses alike. */
  code = MPI_Allreduce(MPI_IN_PLACE, NULL, 1, col, MPI_SUM, MPI_COMM_WORLD);
  EXPECT(error_class(code) == MPI_ERR_BUFFER, "a NULL column: %s",
         error_text(code));
  code =
      MPI_Reduce_scatter_block(&m[0][0], got, 1, col, MPI_SUM, MPI_COMM_WORLD);
  EXPECT(error_class(code) == MPI_ERR_TYPE, "reduce_scatter_block: %s",
         error_text(code));
  code = MPI_Gatherv(&m[0][0], 1, col, got, counts, displs, MPI_DOUBLE, 0,
                     MPI_COMM_WORLD);
  EXPECT(error_class(code) == MPI_ERR_TYPE, "gatherv of a column: %s",
         error_text(code));
  OK(MPI_Type_free(&pt));
  /* Still in step after the refusals. */
  int one = 1, sum = 0;
  OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  EXPECT(sum == p, "after the refusals: %d", sum);
}

int main(int argc, char **argv) {
  MPI_Datatype col;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
  if (p < 2 || p > 64) {
    fprintf(stderr, "mpi_types: run it on 2 to 64 ranks\n");
    return 2;
  }
  constructors();
  bounds();
  pack_unpack();
  OK(MPI_Type_vector(R, 1, C, MPI_DOUBLE, &col)); /* a column of R x C */
  OK(MPI_Type_commit(&col));
  messages(col);
  subarray();
  collectives(col);
  OK(MPI_Type_free(&col));
  OK(MPI_Finalize());
  if (failures == 0 && rank == 0)
    printf("mpi_types: p=%d: every check held\n", p);
  return failures == 0 ? 0 : 1;
}
