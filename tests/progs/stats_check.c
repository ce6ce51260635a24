/* stats_check: the counters of crnet.h against a known workload, on every
 * rank (crlaunch -n P stats_check, P >= 2).
 *
 *   1. 5 allreduce (1000 x int32), 3 bcast (500 x double, root 1),
 *      2 alltoall (64 x int32 a rank), 1 barrier, and one allreduce refused
 *      for its arguments, which must not count;
 *   2. per collective: the calls, no failure, rounds and time; the time
 *      waiting plus reducing within the time of the calls; the payload
 *      summed over collectives equal to the payload summed over peers;
 *   3. across ranks (two allgathers): what rank i counts as sent to j is
 *      what j counts as received from i, bytes and messages;
 *   4. crnet_comm_stats_reset zeroes everything; bad arguments give
 *      CRNET_EINVAL;
 *   5. 2 more allreduce, which are what the comm reports at destroy
 *      (CRNET_STATS=1) and what tests/observe.sh then expects in crlaunch
 *      --stats's table.
 * Exit 0 and "rank R: counters ok", or 1 with the first difference.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crnet.h"

static int rank = -1;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "rank %d: ", rank);                                      \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);                       \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define CALL(x)                                                                \
  do {                                                                         \
    int rc_ = (x);                                                             \
    CHECK(rc_ == 0, "%s: %s: %s", #x, crnet_err_name(rc_),                     \
          crnet_comm_errmsg(comm));                                            \
  } while (0)

static const uint64_t want_calls[CRNET_COLL_COUNT] = {
    [CRNET_COLL_ALLREDUCE] = 5, [CRNET_COLL_BCAST] = 3,
    [CRNET_COLL_ALLTOALL] = 2, [CRNET_COLL_BARRIER] = 1};

int main(void) {
  crnet_comm *comm;
  int rc = crnet_comm_init(&comm, NULL);
  if (rc != 0) {
    fprintf(stderr, "init: %s: %s\n", crnet_strerror(rc), crnet_init_errmsg());
    return 1;
  }
  rank = crnet_comm_rank(comm);
  int p = crnet_comm_size(comm);
  CHECK(p >= 2, "needs 2 ranks or more");

  /* 1. The workload. */
  int32_t v[1000];
  double d[500];
  int32_t *a2a_in = calloc((size_t)p * 64, sizeof *a2a_in);
  int32_t *a2a_out = calloc((size_t)p * 64, sizeof *a2a_out);
  CHECK(a2a_in != NULL && a2a_out != NULL, "out of memory");
  for (int i = 0; i < 1000; i++)
    v[i] = i + rank;
  for (int i = 0; i < 500; i++)
    d[i] = rank == 1 ? i * 0.5 : -1;
  for (int it = 0; it < 5; it++)
    CALL(crnet_allreduce(comm, CRNET_IN_PLACE, v, 1000, CRNET_INT32,
                         CRNET_MAX));
  CHECK(crnet_allreduce(comm, NULL, NULL, 5, CRNET_INT32, CRNET_SUM) ==
            CRNET_EINVAL,
        "a NULL buffer was not refused");
  for (int it = 0; it < 3; it++)
    CALL(crnet_bcast(comm, d, 500, CRNET_DOUBLE, 1));
  for (int it = 0; it < 2; it++)
    CALL(crnet_alltoall(comm, a2a_in, a2a_out, 64, CRNET_INT32));
  CALL(crnet_barrier(comm));

  /* 2. Per collective. */
  uint64_t coll_sent = 0, coll_received = 0;
  for (int k = 0; k < CRNET_COLL_COUNT; k++) {
    crnet_coll_stats st;
    const char *name = crnet_collective_name((crnet_collective)k);
    CALL(crnet_comm_coll_stats(comm, (crnet_collective)k, &st));
    CHECK(st.calls == want_calls[k], "%s: %" PRIu64 " calls, not %" PRIu64,
          name, st.calls, want_calls[k]);
    CHECK(st.failed == 0, "%s: %" PRIu64 " failed", name, st.failed);
    if (st.calls > 0) {
      CHECK(st.rounds >= st.calls, "%s: %" PRIu64 " rounds in %" PRIu64
            " calls", name, st.rounds, st.calls);
      CHECK(st.seconds > 0 && st.wait_seconds >= 0 && st.reduce_seconds >= 0 &&
                st.wait_seconds + st.reduce_seconds <= st.seconds * 1.001,
            "%s: %.9f s, of which %.9f waiting and %.9f reducing", name,
            st.seconds, st.wait_seconds, st.reduce_seconds);
    } else {
      CHECK(st.rounds == 0 && st.seconds == 0 && st.bytes_sent == 0,
            "%s: counted without a call", name);
    }
    if (k == CRNET_COLL_ALLREDUCE || k == CRNET_COLL_ALLTOALL)
      CHECK(st.bytes_sent > 0 && st.bytes_received > 0,
            "%s: no payload counted", name);
    coll_sent += st.bytes_sent;
    coll_received += st.bytes_received;
  }
  uint64_t *sent = calloc((size_t)p * 2, sizeof *sent);
  uint64_t *all = calloc((size_t)p * p * 2, sizeof *all);
  CHECK(sent != NULL && all != NULL, "out of memory");
  uint64_t peer_sent = 0, peer_received = 0;
  for (int j = 0; j < p; j++) {
    crnet_peer_stats ps;
    CALL(crnet_comm_peer_stats(comm, j, &ps));
    if (j == rank)
      CHECK(ps.bytes_sent == 0 && ps.bytes_received == 0 &&
                ps.messages_sent == 0,
            "traffic with itself counted");
    CHECK(ps.bytes_sent == 0 || ps.messages_sent > 0,
          "peer %d: bytes without messages", j);
    peer_sent += ps.bytes_sent;
    peer_received += ps.bytes_received;
    sent[2 * j] = ps.bytes_sent;
    sent[2 * j + 1] = ps.messages_sent;
  }
  CHECK(peer_sent == coll_sent && peer_received == coll_received,
        "per peer %" PRIu64 "/%" PRIu64 " bytes, per collective %" PRIu64
        "/%" PRIu64,
        peer_sent, peer_received, coll_sent, coll_received);

  /* 3. Across ranks: before the allgathers add their own traffic, keep
   * what was received from each peer too. */
  uint64_t *recvd = calloc((size_t)p * 2, sizeof *recvd);
  CHECK(recvd != NULL, "out of memory");
  for (int j = 0; j < p; j++) {
    crnet_peer_stats ps;
    CALL(crnet_comm_peer_stats(comm, j, &ps));
    recvd[2 * j] = ps.bytes_received;
    recvd[2 * j + 1] = ps.messages_received;
  }
  CALL(crnet_allgather(comm, sent, all, (size_t)p * 2, CRNET_UINT64));
  for (int i = 0; i < p; i++) {
    const uint64_t *of_i = all + (size_t)i * p * 2; /* what i sent to each */
    CHECK(of_i[2 * rank] == recvd[2 * i] &&
              of_i[2 * rank + 1] == recvd[2 * i + 1],
          "rank %d counts %" PRIu64 " bytes in %" PRIu64
          " messages sent here, this rank %" PRIu64 " in %" PRIu64,
          i, of_i[2 * rank], of_i[2 * rank + 1], recvd[2 * i],
          recvd[2 * i + 1]);
  }

  /* 4. Reset and bad arguments. */
  CALL(crnet_comm_stats_reset(comm));
  for (int k = 0; k < CRNET_COLL_COUNT; k++) {
    crnet_coll_stats st;
    CALL(crnet_comm_coll_stats(comm, (crnet_collective)k, &st));
    CHECK(st.calls == 0 && st.bytes_sent == 0 && st.seconds == 0,
          "%s: not reset", crnet_collective_name((crnet_collective)k));
  }
  for (int j = 0; j < p; j++) {
    crnet_peer_stats ps;
    CALL(crnet_comm_peer_stats(comm, j, &ps));
    CHECK(ps.bytes_sent == 0 && ps.messages_received == 0,
          "peer %d: not reset", j);
  }
  crnet_coll_stats st;
  crnet_peer_stats ps;
  CHECK(crnet_comm_coll_stats(NULL, CRNET_COLL_ALLREDUCE, &st) ==
                CRNET_EINVAL &&
            crnet_comm_coll_stats(comm, CRNET_COLL_COUNT, &st) ==
                CRNET_EINVAL &&
            crnet_comm_coll_stats(comm, CRNET_COLL_ALLREDUCE, NULL) ==
                CRNET_EINVAL &&
            crnet_comm_peer_stats(comm, -1, &ps) == CRNET_EINVAL &&
            crnet_comm_peer_stats(comm, p, &ps) == CRNET_EINVAL &&
            crnet_comm_peer_stats(comm, 0, NULL) == CRNET_EINVAL &&
            crnet_comm_stats_reset(NULL) == CRNET_EINVAL,
        "a bad argument was not refused");

  /* 5. What destroy reports. */
  for (int it = 0; it < 2; it++)
    CALL(crnet_allreduce(comm, CRNET_IN_PLACE, v, 1000, CRNET_INT32,
                         CRNET_MAX));
  printf("rank %d: counters ok\n", rank);
  free(a2a_in);
  free(a2a_out);
  free(sent);
  free(all);
  free(recvd);
  rc = crnet_comm_destroy(comm);
  CHECK(rc == 0, "destroy: %s", crnet_err_name(rc));
  return 0;
}
