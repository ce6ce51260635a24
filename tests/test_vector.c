/* The rooted and vector collectives through real ranks on loopback
 * (netjob.h): crnet_gather, crnet_scatter, crnet_allgatherv and
 * crnet_alltoallv, and their nonblocking twins, on every schedule, every
 * root, counts with zeros, displacements with gaps, in place where it
 * exists; every element checked. And misuse, refused before anything is
 * sent.
 *
 * Argument "unit": the checks of a job of one only.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "crnet.h"
#include "netjob.h"

#define FAIL_IF(cond, ...)                                                     \
  do {                                                                         \
    if (cond) {                                                                \
      fprintf(stderr, "rank %d, line %d: ", rank, __LINE__);                   \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      return EXIT_FAIL;                                                        \
    }                                                                          \
  } while (0)

#define CALL(expr)                                                             \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    FAIL_IF(rc_ != 0, "%s: %s: %s", #expr, crnet_err_name(rc_),                \
            crnet_comm_errmsg(c));                                             \
  } while (0)

#define SENTINEL (-7777)

/* Element i of what rank r contributes. */
static int64_t val(int r, size_t i) { return (int64_t)r * 100000 + (int64_t)i; }

static const char *const rooted_schedules[] = {"binomial", "linear", "auto"};
static const char *const a2av_schedules[] = {"pairwise", "ring", "auto"};

static int check_gather_scatter(crnet_comm *c, int rank, int p) {
  static const size_t counts[] = {0, 1, 7, 5000};
  for (size_t s = 0; s < 3; s++) {
    CALL(crnet_comm_set_schedule(c, CRNET_COLL_GATHER, rooted_schedules[s]));
    CALL(crnet_comm_set_schedule(c, CRNET_COLL_SCATTER, rooted_schedules[s]));
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
      size_t n = counts[k];
      int64_t *mine = malloc(sizeof *mine * (n + 1));
      int64_t *all = malloc(sizeof *all * (n * (size_t)p + 1));
      FAIL_IF(mine == NULL || all == NULL, "out of memory");
      for (int root = 0; root < p; root++) {
        for (int in_place = 0; in_place < 2; in_place++) {
          crnet_request *req = NULL;
          bool nb = (root + (int)k) % 2 == 1;
          /* gather */
          for (size_t i = 0; i < n; i++)
            mine[i] = val(rank, i);
          for (size_t i = 0; i < n * (size_t)p; i++)
            all[i] = SENTINEL;
          if (in_place && rank == root)
            for (size_t i = 0; i < n; i++)
              all[(size_t)root * n + i] = val(rank, i);
          if (nb) {
            CALL(crnet_igather(c, in_place && rank == root ? CRNET_IN_PLACE
                                                           : mine,
                               all, n, CRNET_INT64, root, &req));
            CALL(crnet_wait(&req));
          } else {
            CALL(crnet_gather(c, in_place && rank == root ? CRNET_IN_PLACE
                                                          : mine,
                              all, n, CRNET_INT64, root));
          }
          for (int r = 0; r < p; r++)
            for (size_t i = 0; i < n; i++) {
              int64_t want = rank == root ? val(r, i) : SENTINEL;
              FAIL_IF(all[(size_t)r * n + i] != want,
                      "gather %s n=%zu root %d in_place %d: block %d[%zu] = "
                      "%lld, want %lld",
                      rooted_schedules[s], n, root, in_place, r, i,
                      (long long)all[(size_t)r * n + i], (long long)want);
            }
          /* scatter */
          for (size_t i = 0; i < n * (size_t)p; i++)
            all[i] = rank == root ? val((int)(i / (n ? n : 1)), i % (n ? n : 1))
                                  : SENTINEL;
          for (size_t i = 0; i < n; i++)
            mine[i] = SENTINEL;
          if (nb) {
            CALL(crnet_iscatter(c, all,
                                in_place && rank == root ? CRNET_IN_PLACE
                                                         : mine,
                                n, CRNET_INT64, root, &req));
            CALL(crnet_wait(&req));
          } else {
            CALL(crnet_scatter(c, all,
                               in_place && rank == root ? CRNET_IN_PLACE
                                                        : mine,
                               n, CRNET_INT64, root));
          }
          for (size_t i = 0; i < n; i++) {
            int64_t want =
                in_place && rank == root ? SENTINEL : val(rank, i);
            FAIL_IF(mine[i] != want,
                    "scatter %s n=%zu root %d in_place %d: [%zu] = %lld, "
                    "want %lld",
                    rooted_schedules[s], n, root, in_place, i,
                    (long long)mine[i], (long long)want);
          }
        }
      }
      free(mine);
      free(all);
    }
  }
  return EXIT_OK;
}

/* allgatherv: rank r contributes (r * 3) % 4 elements (some none), placed
 * packed, or with gaps of r + 1 elements before each block. */
static int check_allgatherv(crnet_comm *c, int rank, int p) {
  size_t counts[16], displs[16], total = 0, end = 0;
  for (int r = 0; r < p; r++) {
    counts[r] = (size_t)((r * 3) % 4) * 250;
    total += counts[r];
  }
  for (int layout = 0; layout < 2; layout++) {
    size_t at = 0;
    for (int r = 0; r < p; r++) {
      at += layout == 1 ? (size_t)r + 1 : 0;
      displs[r] = at;
      at += counts[r];
    }
    end = at;
    for (int in_place = 0; in_place < 2; in_place++) {
      int64_t *mine = malloc(sizeof *mine * (counts[rank] + 1));
      int64_t *all = malloc(sizeof *all * (end + 1));
      crnet_request *req = NULL;
      FAIL_IF(mine == NULL || all == NULL, "out of memory");
      for (size_t i = 0; i < counts[rank]; i++)
        mine[i] = val(rank, i);
      for (size_t i = 0; i < end; i++)
        all[i] = SENTINEL;
      if (in_place)
        for (size_t i = 0; i < counts[rank]; i++)
          all[displs[rank] + i] = val(rank, i);
      if (layout == 1) {
        CALL(crnet_iallgatherv(c, in_place ? CRNET_IN_PLACE : mine,
                               counts[rank], all, counts, displs, CRNET_INT64,
                               &req));
        CALL(crnet_wait(&req));
      } else {
        CALL(crnet_allgatherv(c, in_place ? CRNET_IN_PLACE : mine,
                              counts[rank], all, counts,
                              in_place ? displs : NULL, CRNET_INT64));
      }
      for (int r = 0; r < p; r++) {
        for (size_t i = 0; i < counts[r]; i++)
          FAIL_IF(all[displs[r] + i] != val(r, i),
                  "allgatherv layout %d in_place %d: block %d[%zu] = %lld",
                  layout, in_place, r, i, (long long)all[displs[r] + i]);
        if (layout == 1 && displs[r] > 0)
          FAIL_IF(all[displs[r] - 1] != SENTINEL &&
                      (r == 0 || displs[r] - 1 >= displs[r - 1] + counts[r - 1]),
                  "allgatherv wrote a gap before block %d", r);
      }
      free(mine);
      free(all);
    }
  }
  (void)total;
  return EXIT_OK;
}

/* alltoallv: rank r sends rank j (r + 2j) % 5 * 100 elements; the send
 * blocks packed in reverse order of ranks, the receive blocks with gaps. */
static size_t a2av_count(int from, int to) {
  return (size_t)((from + 2 * to) % 5) * 100;
}

static int check_alltoallv(crnet_comm *c, int rank, int p) {
  size_t sc[16], sd[16], rcnt[16], rd[16], stot = 0, rend = 0;
  int64_t *s, *r;
  for (int j = p - 1; j >= 0; j--) {
    sc[j] = a2av_count(rank, j);
    sd[j] = stot;
    stot += sc[j];
  }
  for (int j = 0; j < p; j++) {
    rcnt[j] = a2av_count(j, rank);
    rend += 3;
    rd[j] = rend;
    rend += rcnt[j];
  }
  s = malloc(sizeof *s * (stot + 1));
  r = malloc(sizeof *r * (rend + 1));
  if (s == NULL || r == NULL)
    return EXIT_FAIL;
  for (int j = 0; j < p; j++)
    for (size_t i = 0; i < sc[j]; i++)
      s[sd[j] + i] = val(rank, i) * 16 + j;
  for (size_t k = 0; k < 3; k++) {
    crnet_request *req = NULL;
    CALL(crnet_comm_set_schedule(c, CRNET_COLL_ALLTOALLV, a2av_schedules[k]));
    for (size_t i = 0; i < rend; i++)
      r[i] = SENTINEL;
    if (k == 1) {
      CALL(crnet_ialltoallv(c, s, sc, sd, r, rcnt, rd, CRNET_INT64, &req));
      CALL(crnet_wait(&req));
    } else {
      CALL(crnet_alltoallv(c, s, sc, sd, r, rcnt, rd, CRNET_INT64));
    }
    for (int j = 0; j < p; j++) {
      for (size_t i = 0; i < rcnt[j]; i++)
        FAIL_IF(r[rd[j] + i] != val(j, i) * 16 + rank,
                "alltoallv %s: from %d [%zu] = %lld", a2av_schedules[k], j,
                i, (long long)r[rd[j] + i]);
      FAIL_IF(r[rd[j] - 1] != SENTINEL, "alltoallv %s wrote a gap",
              a2av_schedules[k]);
    }
  }
  /* Packed displacements (NULL), the same counts. */
  {
    size_t rtot = 0;
    for (int j = 0; j < p; j++)
      rtot += rcnt[j];
    int64_t *sp = malloc(sizeof *sp * (stot + 1)), *rp = malloc(sizeof *rp * (rtot + 1));
    size_t at = 0;
    FAIL_IF(sp == NULL || rp == NULL, "out of memory");
    for (int j = 0; j < p; j++)
      for (size_t i = 0; i < sc[j]; i++)
        sp[at++] = val(rank, i) * 16 + j;
    CALL(crnet_alltoallv(c, sp, sc, NULL, rp, rcnt, NULL, CRNET_INT64));
    at = 0;
    for (int j = 0; j < p; j++)
      for (size_t i = 0; i < rcnt[j]; i++, at++)
        FAIL_IF(rp[at] != val(j, i) * 16 + rank, "packed alltoallv");
    free(sp);
    free(rp);
  }
  free(s);
  free(r);
  return EXIT_OK;
}

static int rank_vector(int rank, int size, void *arg) {
  crnet_comm *c = NULL;
  (void)arg;
  if (crnet_comm_init(&c, NULL) != 0) {
    fprintf(stderr, "rank %d: init: %s\n", rank, crnet_init_errmsg());
    return EXIT_FAIL;
  }
  if (check_gather_scatter(c, rank, size) != EXIT_OK ||
      check_allgatherv(c, rank, size) != EXIT_OK ||
      check_alltoallv(c, rank, size) != EXIT_OK) {
    crnet_comm_abort(c, 1);
    crnet_comm_destroy(c);
    return EXIT_FAIL;
  }
  CALL(crnet_comm_destroy(c));
  return EXIT_OK;
}

START_TEST(every_shape_every_schedule) {
  static const int ps[] = {2, 3, 4, 5, 7};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    job j;
    job_init(&j, ps[i], 30);
    run_job(&j, rank_vector, NULL, 240);
    expect_all_ok(&j, __func__);
  }
}
END_TEST

/* A job of one: every shape works; misuse is refused with a reason. */
START_TEST(job_of_one_and_misuse) {
  crnet_comm *c = NULL;
  int64_t a[4] = {1, 2, 3, 4}, b[8] = {0};
  size_t one = 4, zero = 0, three = 3;
  crnet_request *req = (crnet_request *)1;
  unsetenv("CRNET_RANK");
  unsetenv("CRNET_SIZE");
  ck_assert_int_eq(crnet_comm_init(&c, NULL), 0);
  ck_assert_int_eq(crnet_gather(c, a, b, 4, CRNET_INT64, 0), 0);
  ck_assert_int_eq(b[3], 4);
  ck_assert_int_eq(crnet_scatter(c, a, b + 4, 4, CRNET_INT64, 0), 0);
  ck_assert_int_eq(b[7], 4);
  ck_assert_int_eq(crnet_allgatherv(c, a, 4, b, &one, &zero, CRNET_INT64), 0);
  ck_assert_int_eq(crnet_alltoallv(c, a, &one, NULL, b, &one, NULL,
                                   CRNET_INT64),
                   0);
  /* misuse */
  ck_assert_int_eq(crnet_gather(c, a, b, 4, CRNET_INT64, 1), CRNET_EINVAL);
  ck_assert_ptr_nonnull(strstr(crnet_comm_errmsg(c), "root"));
  ck_assert_int_eq(crnet_gather(c, a, CRNET_IN_PLACE, 4, CRNET_INT64, 0),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet_scatter(c, CRNET_IN_PLACE, b, 4, CRNET_INT64, 0),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet_allgatherv(c, a, 3, b, &one, NULL, CRNET_INT64),
                   CRNET_EINVAL);
  ck_assert_ptr_nonnull(strstr(crnet_comm_errmsg(c), "sendcount"));
  ck_assert_int_eq(crnet_allgatherv(c, a, 4, b, NULL, NULL, CRNET_INT64),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet_alltoallv(c, a, &one, NULL, b, &three, NULL,
                                   CRNET_INT64),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet_alltoallv(c, CRNET_IN_PLACE, &one, NULL, b, &one,
                                   NULL, CRNET_INT64),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet_igather(c, a, b, 4, CRNET_INT64, 0, NULL),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet_iscatter(c, a, b, 4, (crnet_datatype)77, 0, &req),
                   CRNET_EINVAL);
  ck_assert_ptr_null(req);
  ck_assert_int_eq(crnet_comm_set_schedule(c, CRNET_COLL_GATHER, "ring"),
                   CRNET_EUNSUPPORTED);
  ck_assert_int_eq(crnet_comm_set_schedule(c, CRNET_COLL_ALLTOALLV, "bruck"),
                   CRNET_EUNSUPPORTED);
  ck_assert_int_eq(crnet_comm_destroy(c), 0);
}
END_TEST

int main(int argc, char **argv) {
  bool unit = argc > 1 && strcmp(argv[1], "unit") == 0;
  Suite *s = suite_create(unit ? "vector-unit" : "vector");
  TCase *t = tcase_create(unit ? "one" : "jobs");
  SRunner *sr;
  int failed;
  tcase_set_timeout(t, 600);
  tcase_add_test(t, unit ? job_of_one_and_misuse : every_shape_every_schedule);
  suite_add_tcase(s, t);
  sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  failed = check_failures(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
