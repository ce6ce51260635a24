/* mpi_requests: crnet-mpi's calls on sets of requests (MPI_Testany,
 * MPI_Waitsome, MPI_Testsome, with MPI_Waitany beside them),
 * MPI_Sendrecv_replace, the send modes (MPI_Ssend, MPI_Issend, MPI_Rsend,
 * MPI_Irsend, MPI_Bsend, MPI_Ibsend), MPI_Request_free and MPI_Cancel, at
 * any p >= 2.
 *
 *   crlaunch -n P mpi_requests
 *
 * Each rank posts a receive from every other rank and sends to each in a
 * ring order, so the receives complete in an order none of them knows;
 * the sets are drained with each call in turn, and every message, index
 * and status is checked; inactive entries (MPI_REQUEST_NULL) are passed
 * too, and a set of none. Exits 0 when every check held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT_PROG "mpi_requests"
#include "mpi.h"
#include "mpi_expect.h"

static int rank, p;
static int failures;

#define WORDS 300 /* per message: a few in the eager way */

/* Posts a receive from every other rank (tag 7) into got; sends to each,
 * starting with the next rank; the sends are waited for at once. */
static void exchange(MPI_Request *recvs, int *got) {
  MPI_Request *sends = malloc(sizeof *sends * (size_t)p);
  int *out = malloc(sizeof *out * (size_t)WORDS * (size_t)p);
  for (int r = 0; r < p; r++) {
    recvs[r] = MPI_REQUEST_NULL;
    sends[r] = MPI_REQUEST_NULL;
    if (r != rank)
      OK(MPI_Irecv(got + (size_t)r * WORDS, WORDS, MPI_INT, r, 7,
                   MPI_COMM_WORLD, &recvs[r]));
  }
  for (int k = 1; k < p; k++) {
    int to = (rank + k) % p;
    for (int i = 0; i < WORDS; i++)
      out[(size_t)to * WORDS + i] = rank * 100000 + to * 1000 + i;
    OK(MPI_Isend(out + (size_t)to * WORDS, WORDS, MPI_INT, to, 7,
                 MPI_COMM_WORLD, &sends[to]));
  }
  OK(MPI_Waitall(p, sends, MPI_STATUSES_IGNORE));
  free(sends);
  free(out);
}

/* Receive index r (from rank r) came complete and right. */
static void check_one(const int *got, int r, const MPI_Status *st,
                      const char *how) {
  int n = -1;
  EXPECT(r >= 0 && r < p && r != rank, "%s: index %d", how, r);
  if (r < 0 || r >= p)
    return;
  EXPECT(st->MPI_SOURCE == r && st->MPI_TAG == 7, "%s: status %d/%d", how,
         st->MPI_SOURCE, st->MPI_TAG);
  OK(MPI_Get_count(st, MPI_INT, &n));
  EXPECT(n == WORDS, "%s: count %d", how, n);
  for (int i = 0; i < WORDS; i++)
    if (got[(size_t)r * WORDS + i] != r * 100000 + rank * 1000 + i) {
      EXPECT(0, "%s: from %d word %d is %d", how, r, i,
             got[(size_t)r * WORDS + i]);
      break;
    }
}

static void check_sets(void) {
  MPI_Request *recvs = malloc(sizeof *recvs * (size_t)p);
  int *got = malloc(sizeof *got * (size_t)WORDS * (size_t)p);
  int *seen = calloc((size_t)p, sizeof *seen);
  int *idx = malloc(sizeof *idx * (size_t)p);
  MPI_Status *sts = malloc(sizeof *sts * (size_t)p);
  int index, flag, out, left;

  for (int how = 0; how < 3; how++) {
    const char *name = how == 0   ? "MPI_Testany"
                       : how == 1 ? "MPI_Waitsome"
                                  : "MPI_Testsome";
    memset(seen, 0, sizeof *seen * (size_t)p);
    exchange(recvs, got);
    left = p - 1;
    while (left > 0) {
      if (how == 0) {
        OK(MPI_Testany(p, recvs, &index, &flag, &sts[0]));
        if (!flag)
          continue;
        EXPECT(index != MPI_UNDEFINED, "Testany: flag with no index");
        if (index == MPI_UNDEFINED)
          break;
        EXPECT(recvs[index] == MPI_REQUEST_NULL, "Testany kept %d", index);
        check_one(got, index, &sts[0], name);
        seen[index]++;
        left--;
        continue;
      }
      if (how == 1)
        OK(MPI_Waitsome(p, recvs, &out, idx, sts));
      else
        OK(MPI_Testsome(p, recvs, &out, idx, sts));
      EXPECT(out != MPI_UNDEFINED && out >= (how == 1 ? 1 : 0) && out <= left,
             "%s: outcount %d with %d left", name, out, left);
      if (out == MPI_UNDEFINED || out < 0 || out > left)
        break;
      for (int k = 0; k < out; k++) {
        check_one(got, idx[k], &sts[k], name);
        if (idx[k] >= 0 && idx[k] < p)
          seen[idx[k]]++;
        EXPECT(recvs[idx[k]] == MPI_REQUEST_NULL, "%s kept %d", name, idx[k]);
      }
      left -= out;
    }
    for (int r = 0; r < p; r++)
      EXPECT(seen[r] == (r != rank), "%s reported %d %d times", name, r,
             seen[r]);
    /* Nothing live: the calls say so. */
    OK(MPI_Testany(p, recvs, &index, &flag, MPI_STATUS_IGNORE));
    EXPECT(flag && index == MPI_UNDEFINED, "Testany of none: %d %d", flag,
           index);
    OK(MPI_Waitsome(p, recvs, &out, idx, MPI_STATUSES_IGNORE));
    EXPECT(out == MPI_UNDEFINED, "Waitsome of none: %d", out);
    OK(MPI_Testsome(p, recvs, &out, idx, MPI_STATUSES_IGNORE));
    EXPECT(out == MPI_UNDEFINED, "Testsome of none: %d", out);
    OK(MPI_Waitany(0, NULL, &index, MPI_STATUS_IGNORE));
    EXPECT(index == MPI_UNDEFINED, "Waitany of nothing: %d", index);
    OK(MPI_Barrier(MPI_COMM_WORLD));
  }
  /* misuse: no output pointers */
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int code = MPI_Testsome(p, recvs, NULL, idx, sts);
  EXPECT(error_class(code) == MPI_ERR_ARG, "Testsome without outcount: %s",
         error_text(code));
  code = MPI_Testany(-1, recvs, &index, &flag, MPI_STATUS_IGNORE);
  EXPECT(error_class(code) == MPI_ERR_ARG, "Testany of -1: %s",
         error_text(code));
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  free(recvs);
  free(got);
  free(seen);
  free(idx);
  free(sts);
}

/* Around the ring: each rank's buffer goes to the next and takes the one
 * of the rank before, in place; then both ways at once with
 * MPI_PROC_NULL at the ends of a line. */
static void check_replace(void) {
  double buf[1000];
  MPI_Status st;
  int next = (rank + 1) % p, prev = (rank + p - 1) % p, n = -1;
  for (int i = 0; i < 1000; i++)
    buf[i] = rank * 1e4 + i;
  OK(MPI_Sendrecv_replace(buf, 1000, MPI_DOUBLE, next, 3, prev, 3,
                          MPI_COMM_WORLD, &st));
  EXPECT(st.MPI_SOURCE == prev && st.MPI_TAG == 3, "replace status");
  OK(MPI_Get_count(&st, MPI_DOUBLE, &n));
  EXPECT(n == 1000, "replace count %d", n);
  for (int i = 0; i < 1000; i++)
    if (buf[i] != prev * 1e4 + i) {
      EXPECT(0, "replace word %d: %g", i, buf[i]);
      break;
    }
  /* a line: rank 0 receives nothing, the last sends nothing */
  buf[0] = rank;
  OK(MPI_Sendrecv_replace(
      buf, 1, MPI_DOUBLE, rank == p - 1 ? MPI_PROC_NULL : rank + 1, 4,
      rank == 0 ? MPI_PROC_NULL : rank - 1, 4, MPI_COMM_WORLD, &st));
  EXPECT(rank == 0 ? buf[0] == 0 && st.MPI_SOURCE == MPI_PROC_NULL
                   : buf[0] == rank - 1,
         "line: %g", buf[0]);
}

/* Send modes: MPI_Issend stays incomplete until its receive is posted
 * (told by a barrier), MPI_Ssend meets a receive posted first, and
 * MPI_Rsend and MPI_Irsend (the receive posted first, as the mode
 * requires) arrive whole. Between ranks 0 and 1. */
static void check_modes(void) {
  int v[4] = {0, 0, 0, 0}, flag = 0;
  MPI_Request rq, rr[2];
  MPI_Status st;
  if (rank == 0) {
    v[0] = 41;
    OK(MPI_Issend(&v[0], 1, MPI_INT, 1, 11, MPI_COMM_WORLD, &rq));
    for (double end = MPI_Wtime() + 0.05; MPI_Wtime() < end;) {
      OK(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
      EXPECT(!flag, "MPI_Issend completed before its receive was posted");
      if (flag)
        break;
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (!flag)
      OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    OK(MPI_Barrier(MPI_COMM_WORLD)); /* rank 1's receives are posted */
    v[1] = 42, v[2] = 43, v[3] = 44;
    OK(MPI_Ssend(&v[1], 1, MPI_INT, 1, 12, MPI_COMM_WORLD));
    OK(MPI_Rsend(&v[2], 1, MPI_INT, 1, 13, MPI_COMM_WORLD));
    OK(MPI_Irsend(&v[3], 1, MPI_INT, 1, 14, MPI_COMM_WORLD, &rq));
    OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  } else if (rank == 1) {
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Recv(&v[0], 1, MPI_INT, 0, 11, MPI_COMM_WORLD, &st));
    EXPECT(v[0] == 41, "issend's word %d", v[0]);
    OK(MPI_Irecv(&v[2], 1, MPI_INT, 0, 13, MPI_COMM_WORLD, &rr[0]));
    OK(MPI_Irecv(&v[3], 1, MPI_INT, 0, 14, MPI_COMM_WORLD, &rr[1]));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Recv(&v[1], 1, MPI_INT, 0, 12, MPI_COMM_WORLD, &st));
    OK(MPI_Waitall(2, rr, MPI_STATUSES_IGNORE));
    EXPECT(v[1] == 42 && v[2] == 43 && v[3] == 44, "modes' words %d %d %d",
           v[1], v[2], v[3]);
  } else {
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Barrier(MPI_COMM_WORLD));
  }
}

/* MPI_Request_free: requests freed while active go on and end unseen.
 * Rank 0 frees a 1 MiB send (it waits at rank 0 for rank 1's receive) and
 * then frees the comm it was sent on: both calls return at once, the comm
 * goes when the send ends. A small send and a receive freed the same way
 * arrive. Collective requests and MPI_REQUEST_NULL are refused. */
static void check_request_free(void) {
  enum { BIG = 1 << 18 }; /* ints: 1 MiB, past the eager size */
  /* A freed receive's buffer must outlive it: nobody knows when it ends. */
  static int got = -1;
  int *big = malloc(sizeof(int) * BIG), small = 5, code;
  MPI_Comm d;
  MPI_Request rq = MPI_REQUEST_NULL;
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
  if (rank == 0) {
    for (int i = 0; i < BIG; i++)
      big[i] = i ^ 0x5a5a;
    OK(MPI_Isend(big, BIG, MPI_INT, 1, 21, d, &rq));
    OK(MPI_Request_free(&rq));
    EXPECT(rq == MPI_REQUEST_NULL, "MPI_Request_free left the handle");
    OK(MPI_Isend(&small, 1, MPI_INT, 1, 22, MPI_COMM_WORLD, &rq));
    OK(MPI_Request_free(&rq));
    OK(MPI_Comm_free(&d)); /* the big send is not over: the comm waits */
    EXPECT(d == MPI_COMM_NULL, "the comm's handle after its free");
    OK(MPI_Send(&small, 1, MPI_INT, 1, 23, MPI_COMM_WORLD));
  } else if (rank == 1) {
    MPI_Request rr;
    OK(MPI_Irecv(&got, 1, MPI_INT, 0, 23, MPI_COMM_WORLD, &rr));
    OK(MPI_Request_free(&rr));       /* ends once rank 0's third send comes */
    OK(MPI_Barrier(MPI_COMM_WORLD)); /* rank 0 freed its comm by now */
    OK(MPI_Recv(big, BIG, MPI_INT, 0, 21, d, MPI_STATUS_IGNORE));
    for (int i = 0; i < BIG; i++)
      if (big[i] != (i ^ 0x5a5a)) {
        EXPECT(0, "the freed send's word %d: %d", i, big[i]);
        break;
      }
    int s2 = -1;
    OK(MPI_Recv(&s2, 1, MPI_INT, 0, 22, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    EXPECT(s2 == 5, "the freed small send: %d", s2);
    OK(MPI_Comm_free(&d));
  }
  if (rank != 1) {
    if (rank != 0)
      OK(MPI_Comm_free(&d));
    OK(MPI_Barrier(MPI_COMM_WORLD));
  }
  /* refused: a collective's request, and none */
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  OK(MPI_Ibarrier(MPI_COMM_WORLD, &rq));
  code = MPI_Request_free(&rq);
  EXPECT(error_class(code) == MPI_ERR_REQUEST && rq != MPI_REQUEST_NULL,
         "freeing an ibarrier's request: %s", error_text(code));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  code = MPI_Request_free(&rq);
  EXPECT(error_class(code) == MPI_ERR_REQUEST, "freeing MPI_REQUEST_NULL: %s",
         error_text(code));
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  (void)got; /* rank 1's freed receive: its word is not to be read */
  free(big);
}

/* Buffered sends: with a buffer attached, MPI_Bsend and MPI_Ibsend of
 * 100 KiB each (past the eager size: a standard send would wait for the
 * receive) return, and MPI_Ibsend's request is complete, before rank 1 has
 * posted anything (it posts after a barrier: were they standard sends,
 * rank 0 would never reach it); a third does not fit (MPI_ERR_BUFFER);
 * MPI_Buffer_detach waits until they have gone and gives the buffer
 * back. */
static void check_buffered(void) {
  enum { N = 25600 }; /* ints: 100 KiB */
  int size = 2 * (N * (int)sizeof(int) + MPI_BSEND_OVERHEAD), flag = 0, code;
  int *msg = malloc(sizeof(int) * N), *att = malloc((size_t)size), got;
  void *back = NULL;
  MPI_Request rq;
  if (rank == 0) {
    OK(MPI_Buffer_attach(att, size));
    for (int i = 0; i < N; i++)
      msg[i] = 7 * i;
    OK(MPI_Bsend(msg, N, MPI_INT, 1, 31, MPI_COMM_WORLD));
    msg[0] = -1; /* the copy went, not this */
    OK(MPI_Ibsend(msg, N, MPI_INT, 1, 32, MPI_COMM_WORLD, &rq));
    OK(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
    EXPECT(flag, "MPI_Ibsend's request is not complete at once");
    if (!flag)
      OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    code = MPI_Bsend(msg, N, MPI_INT, 1, 33, MPI_COMM_WORLD);
    EXPECT(error_class(code) == MPI_ERR_BUFFER, "a third: %s",
           error_text(code));
    code = MPI_Buffer_attach(att, size);
    EXPECT(error_class(code) == MPI_ERR_BUFFER, "a second attach: %s",
           error_text(code));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Buffer_detach(&back, &got));
    EXPECT(back == att && got == size, "detach gave %p, %d", back, got);
  } else {
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 1) {
      OK(MPI_Recv(msg, N, MPI_INT, 0, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      EXPECT(msg[0] == 0 && msg[N - 1] == 7 * (N - 1), "bsend's words");
      OK(MPI_Recv(msg, N, MPI_INT, 0, 32, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      EXPECT(msg[0] == -1 && msg[5] == 35, "ibsend's words");
    }
  }
  OK(MPI_Barrier(MPI_COMM_WORLD));
  free(msg);
  free(att);
}

/* MPI_Cancel: each rank posts a receive from its left neighbour that no
 * message matches (tag 41; the staged kind too, a vector type) and cancels
 * it: the wait succeeds, MPI_Test_cancelled says so, the buffer is
 * untouched. The neighbour's message of that tag, sent after a barrier,
 * then goes to the next receive. A send's cancel does not win; a
 * collective's and MPI_REQUEST_NULL's are refused. */
static void check_cancel(void) {
  int left = (rank + p - 1) % p, right = (rank + 1) % p;
  int buf[4] = {-1, -1, -1, -1}, word = 100 + rank, got = -1, flag = -1, code;
  MPI_Datatype every_other;
  MPI_Request rq, sq;
  MPI_Status st;
  OK(MPI_Type_vector(2, 1, 2, MPI_INT, &every_other));
  OK(MPI_Type_commit(&every_other));
  for (int staged = 0; staged < 2; staged++) {
    OK(MPI_Irecv(buf, staged ? 1 : 2, staged ? every_other : MPI_INT, left, 41,
                 MPI_COMM_WORLD, &rq));
    OK(MPI_Cancel(&rq));
    EXPECT(rq != MPI_REQUEST_NULL, "MPI_Cancel freed the request");
    OK(MPI_Wait(&rq, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    EXPECT(flag == 1 && st.MPI_ERROR == MPI_SUCCESS,
           "a cancelled receive (staged %d): cancelled %d, error %d", staged,
           flag, st.MPI_ERROR);
    EXPECT(buf[0] == -1 && buf[1] == -1 && buf[2] == -1,
           "a cancelled receive wrote its buffer: %d %d %d", buf[0], buf[1],
           buf[2]);
  }
  OK(MPI_Type_free(&every_other));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  /* The message of that tag comes now and goes to this receive. */
  OK(MPI_Isend(&word, 1, MPI_INT, right, 41, MPI_COMM_WORLD, &sq));
  OK(MPI_Cancel(&sq)); /* a send goes on */
  OK(MPI_Recv(&got, 1, MPI_INT, left, 41, MPI_COMM_WORLD, &st));
  EXPECT(got == 100 + left, "after the cancels got %d, want %d", got,
         100 + left);
  OK(MPI_Test_cancelled(&st, &flag));
  EXPECT(flag == 0, "a received message's status says cancelled");
  OK(MPI_Wait(&sq, &st));
  OK(MPI_Test_cancelled(&st, &flag));
  EXPECT(flag == 0, "a send was cancelled");
  /* A receive from MPI_PROC_NULL is complete already: nothing to cancel. */
  OK(MPI_Irecv(&got, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &rq));
  OK(MPI_Cancel(&rq));
  OK(MPI_Wait(&rq, &st));
  OK(MPI_Test_cancelled(&st, &flag));
  EXPECT(flag == 0 && st.MPI_SOURCE == MPI_PROC_NULL,
         "MPI_PROC_NULL's receive: cancelled %d, source %d", flag,
         st.MPI_SOURCE);
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  OK(MPI_Ibarrier(MPI_COMM_WORLD, &rq));
  code = MPI_Cancel(&rq);
  EXPECT(error_class(code) == MPI_ERR_REQUEST, "cancelling an ibarrier: %s",
         error_text(code));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  code = MPI_Cancel(&rq);
  EXPECT(error_class(code) == MPI_ERR_REQUEST,
         "cancelling MPI_REQUEST_NULL: %s", error_text(code));
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  OK(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
  if (p < 2) {
    fprintf(stderr, "mpi_requests: run it on 2 ranks or more\n");
    return 2;
  }
  /* After MPI_Init, the level MPI_Init_thread grants MPI_THREAD_SINGLE
   * (MPI 3.1, 12.4.3). */
  int level = -1;
  OK(MPI_Query_thread(&level));
  EXPECT(level == MPI_THREAD_SINGLE, "MPI_Query_thread after MPI_Init: %d",
         level);
  check_sets();
  check_replace();
  check_modes();
  check_request_free();
  check_buffered();
  check_cancel();
  int bad = failures, all_bad = 0;
  OK(MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  OK(MPI_Finalize());
  if (rank == 0 && all_bad == 0 && failures == 0)
    printf("mpi_requests: p = %d: every check held\n", p);
  return failures == 0 && all_bad == 0 ? 0 : 1;
}
