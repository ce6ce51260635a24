/* Tuning and auto: the tuning file's parser and wire encoding
 * (src/base/tuning.c), the cost model's terms (src/schedules/model.c)
 * against the schedules themselves, and the choices of auto
 * (src/schedules/select.c) under given constants.
 *
 * The model check builds every rank's schedule for every candidate of auto
 * at p = 2..24 and a few larger p, and counts rounds, bytes moved and bytes
 * reduced per round exactly as crsched --cost does (per round, the busiest
 * rank); the closed formulas must give the rounds exactly and the bytes
 * within the tolerance model.c states, and auto's pick, priced by those
 * exact counts, must be within a few percent of the best candidate's.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithm.h"
#include "check_main.h"
#include "model.h"
#include "schedule.h"
#include "select.h"
#include "tuning.h"

/* ------------------------------------------------------------------------
 * Helpers
 */

static char err[1024];

static int parse(crnet__tuning *t, const char *text) {
  err[0] = '\0';
  return crnet__tuning_parse(t, text, strlen(text), "T", err, sizeof err);
}

/* Parsing `text` fails with a message that contains `want`. */
static void expect_bad(const char *text, const char *want) {
  crnet__tuning t;
  int rc = parse(&t, text);
  ck_assert_msg(rc == CRNET_EINVAL, "accepted:\n%s", text);
  ck_assert_msg(strstr(err, want) != NULL, "for:\n%s\nmessage '%s' lacks '%s'",
                text, err, want);
  /* a failed parse leaves the defaults, never half a file */
  ck_assert(t.base[CRNET__TUNING_ALPHA] == CRNET__TUNING_DEFAULT_ALPHA);
  ck_assert_uint_eq(t.npoints[CRNET__TUNING_ALPHA], 0);
}

static char tmpdir[] = "/tmp/crnet-tuning-XXXXXX";

static void write_file(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "w");
  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  ck_assert_uint_eq(fwrite(text, 1, len, f), len);
  ck_assert_int_eq(fclose(f), 0);
}

static crnet__tuning constants(double a, double b, double g) {
  crnet__tuning t;
  crnet__tuning_defaults(&t);
  t.base[CRNET__TUNING_ALPHA] = a;
  t.base[CRNET__TUNING_BETA] = b;
  t.base[CRNET__TUNING_GAMMA] = g;
  return t;
}

/* A call of `coll` at p with an m-byte vector (see model.h) of 4-byte
 * elements, as the library makes it. counts: room for p entries. */
static crnet__call make_call(crnet_collective coll, bool exclusive, int32_t p,
                             uint64_t m, bool commutative,
                             const crnet__tuning *t, uint64_t *counts) {
  crnet__call c;
  uint64_t elems = m / 4;
  memset(&c, 0, sizeof c);
  c.coll = coll;
  c.exclusive = exclusive;
  c.p = p;
  c.esize = 4;
  c.commutative = commutative;
  c.tuning = t;
  c.count = elems;
  if (coll == CRNET_COLL_ALLTOALL)
    c.count = elems / (uint64_t)p;
  if (coll == CRNET_COLL_REDUCE_SCATTER || coll == CRNET_COLL_ALLGATHER) {
    for (int32_t r = 0; r < p; r++) {
      uint64_t off;
      crnet__block_range(elems, p, r, &off, &counts[r]);
    }
    c.counts = counts;
    if (coll == CRNET_COLL_ALLGATHER)
      c.count = elems / (uint64_t)p;
  }
  return c;
}

static const char *auto_pick(crnet_collective coll, bool exclusive, int32_t p,
                             uint64_t m, bool commutative,
                             const crnet__tuning *t) {
  uint64_t counts[64];
  crnet__call c;
  const char *name = NULL;
  ck_assert_int_le(p, 64);
  c = make_call(coll, exclusive, p, m, commutative, t, counts);
  ck_assert_int_eq(crnet__auto_choose(&c, &name, NULL), 0);
  ck_assert_ptr_nonnull(name);
  return name;
}

/* ------------------------------------------------------------------------
 * The file format
 */

START_TEST(test_parse_good) {
  crnet__tuning t;
  const char *text = "# crnet tuning\n"
                     "\n"
                     "alpha = 5e-05   # per round\n"
                     "  beta=2e-9\r\n"
                     "\tgamma = 0\n"
                     "alpha.16 = 2.0e-4\n"
                     "alpha.4 = 1e-4\n"
                     "beta.8 = 3e-9\n"
                     "   # only a comment\n"
                     "gamma.1000 = 1.5e-10"; /* no newline at the end */
  ck_assert_msg(parse(&t, text) == 0, "%s", err);
  ck_assert(t.base[CRNET__TUNING_ALPHA] == 5e-5);
  ck_assert(t.base[CRNET__TUNING_BETA] == 2e-9);
  ck_assert(t.base[CRNET__TUNING_GAMMA] == 0);
  ck_assert_uint_eq(t.npoints[CRNET__TUNING_ALPHA], 2);
  /* kept in increasing p whatever the file's order */
  ck_assert_int_eq(t.points[CRNET__TUNING_ALPHA][0].p, 4);
  ck_assert_int_eq(t.points[CRNET__TUNING_ALPHA][1].p, 16);
  ck_assert_uint_eq(t.npoints[CRNET__TUNING_BETA], 1);
  ck_assert_uint_eq(t.npoints[CRNET__TUNING_GAMMA], 1);
  ck_assert_str_eq(t.source, "T");

  /* an empty file and one of comments only: the defaults */
  ck_assert_int_eq(parse(&t, ""), 0);
  ck_assert(t.base[CRNET__TUNING_BETA] == CRNET__TUNING_DEFAULT_BETA);
  ck_assert_int_eq(parse(&t, "# nothing\n\n   \n"), 0);
  ck_assert(t.base[CRNET__TUNING_GAMMA] == CRNET__TUNING_DEFAULT_GAMMA);
  /* a key the file leaves out keeps its default */
  ck_assert_int_eq(parse(&t, "beta = 3e-9\n"), 0);
  ck_assert(t.base[CRNET__TUNING_ALPHA] == CRNET__TUNING_DEFAULT_ALPHA);
  ck_assert(t.base[CRNET__TUNING_BETA] == 3e-9);
}
END_TEST

/* ring_round: a newer key, optional, 1 when absent. */
START_TEST(test_parse_ring_round) {
  crnet__tuning t;
  /* a file written before ring_round existed: every round costs α */
  ck_assert_msg(parse(&t, "alpha = 2e-4\nbeta = 1e-9\ngamma = 0\n"
                          "alpha.8 = 1.4e-4\n") == 0,
                "%s", err);
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_RING_ROUND, 8) == 1);
  ck_assert(t.base[CRNET__TUNING_RING_ROUND] ==
            CRNET__TUNING_DEFAULT_RING_ROUND);
  /* plain and per-p, interpolated like the others */
  ck_assert_msg(parse(&t, "ring_round = 0.7\n") == 0, "%s", err);
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_RING_ROUND, 13) == 0.7);
  ck_assert_msg(parse(&t, "ring_round.4 = 0.9\nring_round.8 = 0.7\n") == 0,
                "%s", err);
  ck_assert(fabs(crnet__tuning_get(&t, CRNET__TUNING_RING_ROUND, 6) - 0.8) <
            1e-12);
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_RING_ROUND, 2) == 0.9);
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_ALPHA, 8) ==
            CRNET__TUNING_DEFAULT_ALPHA);
  ck_assert_str_eq(crnet__tuning_param_name(CRNET__TUNING_RING_ROUND),
                   "ring_round");
  /* a factor written in seconds, or absurdly large, is a unit mistake */
  expect_bad("ring_round = 2e-4\n",
             "ring_round must be at least 0.1 and at most 10 (multiples of "
             "alpha)");
  expect_bad("ring_round.8 = 11\n", "out of range");
  expect_bad("ring_round = 0.7\nring_round = 0.8\n", "set twice");
  expect_bad("hypercube_round = 1.1\n", "unknown key 'hypercube_round'");
  /* the description names it */
  {
    char desc[512];
    ck_assert_int_eq(parse(&t, "ring_round = 0.5\n"), 0);
    crnet__tuning_describe(&t, 8, desc, sizeof desc);
    ck_assert_msg(strstr(desc, "ring round x0.5, shared memory alpha 5e-06 s, beta 2.5e-10 s/B at p = 8") != NULL, "%s",
                  desc);
  }
}
END_TEST

START_TEST(test_parse_every_kind_of_bad_line) {
  expect_bad("alpha = 1e-5\nalpah = 1e-5\n",
             "tuning file 'T' line 2: unknown key 'alpah'");
  expect_bad("ALPHA = 1e-5\n", "line 1: unknown key 'ALPHA'");
  expect_bad("alpha.x = 1e-5\n", "line 1: 'alpha.x': P must be a number");
  expect_bad("alpha. = 1e-5\n", "line 1: 'alpha.': P must be a number");
  expect_bad("alpha.08 = 1e-5\n", "P must be a number of ranks");
  expect_bad("alpha.-4 = 1e-5\n", "P must be a number of ranks");
  expect_bad("alpha.1 = 1e-5\n", "line 1: 'alpha.1': P must be 2..16777216");
  expect_bad("alpha.16777217 = 1e-5\n", "P must be 2..16777216");
  expect_bad("alpha.99999999999999999999 = 1e-5\n", "P must be 2..");
  expect_bad("# ok\nalpha 1e-5\n", "line 2: expected 'key = value'");
  expect_bad("= 1e-5\n", "line 1: a value without a key");
  expect_bad("beta =\n", "line 1: beta has no value");
  expect_bad("beta = # later\n", "line 1: beta has no value");
  expect_bad("beta = fast\n", "line 1: beta = 'fast' is not a number");
  expect_bad("beta = 1e-9 2e-9\n", "is not a number");
  expect_bad("beta = 1e-9s\n", "is not a number");
  expect_bad("beta = 1,5e-9\n", "is not a number");
  expect_bad("beta = nan\n", "line 1: beta = nan is out of range");
  expect_bad("beta = inf\n", "out of range");
  expect_bad("beta = 1e-999\n", "out of range");
  expect_bad("alpha = 0\n", "alpha = 0 is out of range: alpha must be above 0");
  expect_bad("beta = -1e-9\n", "out of range");
  expect_bad("beta = 1\n", "at most 0.001");
  expect_bad("alpha = 2\n", "at most 1 (seconds per round)");
  expect_bad("gamma = -1e-12\n", "gamma must be at least 0");
  expect_bad("alpha = 1e-5\n\n# x\nalpha = 2e-5\n",
             "line 4: alpha is set twice (first on line 1)");
  expect_bad("alpha.4 = 1e-5\nalpha.8 = 1e-5\nalpha.4 = 2e-5\n",
             "line 3: alpha.4 is set twice (first on line 1)");
  {
    char many[2048] = "";
    size_t used = 0;
    for (int p = 2; p < 2 + CRNET__TUNING_MAX_POINTS + 1; p++)
      used += (size_t)snprintf(many + used, sizeof many - used,
                               "gamma.%d = 1e-10\n", p);
    expect_bad(many, "line 17: more than 16 per-p figures for gamma");
  }
  {
    char longkey[200];
    memset(longkey, 'a', sizeof longkey);
    memcpy(longkey + 150, " = 1\n", 6);
    expect_bad(longkey, "line 1: unknown key");
  }
}
END_TEST

/* NUL bytes need the length, not strlen. */
START_TEST(test_parse_nul_byte) {
  crnet__tuning t;
  const char text[] = "alpha = 1e-5\n\0beta = 1e-9\n";
  ck_assert_int_eq(crnet__tuning_parse(&t, text, sizeof text - 1, "N", err,
                                       sizeof err),
                   CRNET_EINVAL);
  ck_assert_msg(strstr(err, "tuning file 'N' line 2: a NUL byte") != NULL,
                "%s", err);
}
END_TEST

START_TEST(test_value_for_p) {
  crnet__tuning t;
  ck_assert_msg(parse(&t, "alpha = 9e-5\nalpha.4 = 1e-4\nalpha.8 = 3e-4\n"
                          "alpha.16 = 4e-4\nbeta = 2e-9\n") == 0,
                "%s", err);
  /* exact, between (a straight line), beyond the ends (the nearest) */
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_ALPHA, 8) == 3e-4);
  ck_assert(fabs(crnet__tuning_get(&t, CRNET__TUNING_ALPHA, 6) - 2e-4) < 1e-15);
  ck_assert(fabs(crnet__tuning_get(&t, CRNET__TUNING_ALPHA, 12) - 3.5e-4) <
            1e-15);
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_ALPHA, 2) == 1e-4);
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_ALPHA, 1000) == 4e-4);
  /* no per-p figure: the plain key, at every p */
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_BETA, 2) == 2e-9);
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_BETA, 77) == 2e-9);
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_GAMMA, 5) ==
            CRNET__TUNING_DEFAULT_GAMMA);
}
END_TEST

START_TEST(test_load_file) {
  crnet__tuning t;
  char path[256], missing[256];
  char *big;
  snprintf(path, sizeof path, "%s/good", tmpdir);
  snprintf(missing, sizeof missing, "%s/none", tmpdir);
  write_file(path, "alpha = 7e-5\n", 13);
  ck_assert_msg(crnet__tuning_load_file(&t, path, true, err, sizeof err) == 0,
                "%s", err);
  ck_assert(t.base[CRNET__TUNING_ALPHA] == 7e-5);
  ck_assert_str_eq(t.source, path);

  /* missing at the default place: the defaults; named by
   * CRNET_TUNING_FILE: an error naming it */
  ck_assert_int_eq(crnet__tuning_load_file(&t, missing, false, err, sizeof err),
                   0);
  ck_assert(t.base[CRNET__TUNING_ALPHA] == CRNET__TUNING_DEFAULT_ALPHA);
  ck_assert_str_eq(t.source, "built-in defaults");
  ck_assert_int_eq(crnet__tuning_load_file(&t, missing, true, err, sizeof err),
                   CRNET_EINVAL);
  ck_assert_msg(strstr(err, missing) != NULL &&
                    strstr(err, "CRNET_TUNING_FILE") != NULL &&
                    strstr(err, "No such file") != NULL,
                "%s", err);

  /* a malformed file names itself and the line */
  write_file(path, "alpha = 7e-5\nbeta = 7e-5 # ok\ngamma = much\n", 43);
  ck_assert_int_eq(crnet__tuning_load_file(&t, path, false, err, sizeof err),
                   CRNET_EINVAL);
  ck_assert_msg(strstr(err, "line 3: gamma = 'much' is not a number") != NULL &&
                    strstr(err, path) != NULL,
                "%s", err);

  /* a directory cannot be read */
  ck_assert_int_eq(crnet__tuning_load_file(&t, tmpdir, false, err, sizeof err),
                   CRNET_EIO);
  ck_assert_msg(strstr(err, tmpdir) != NULL, "%s", err);

  /* too large to be a tuning file */
  big = malloc(CRNET__TUNING_MAX_FILE_BYTES + 10);
  ck_assert_ptr_nonnull(big);
  memset(big, '#', CRNET__TUNING_MAX_FILE_BYTES + 10);
  write_file(path, big, CRNET__TUNING_MAX_FILE_BYTES + 10);
  free(big);
  ck_assert_int_eq(crnet__tuning_load_file(&t, path, false, err, sizeof err),
                   CRNET_EINVAL);
  ck_assert_msg(strstr(err, "larger than") != NULL, "%s", err);
  unlink(path);
}
END_TEST

START_TEST(test_path_and_init) {
  crnet__tuning t;
  char path[512], file[256];
  snprintf(file, sizeof file, "%s/mine", tmpdir);
  write_file(file, "beta = 4e-9\n", 12);

  setenv("CRNET_TUNING_FILE", file, 1);
  ck_assert_int_eq(crnet__tuning_path(path, sizeof path), 1);
  ck_assert_str_eq(path, file);
  ck_assert_int_eq(crnet__tuning_init(&t, 0, err, sizeof err), 0);
  ck_assert(t.base[CRNET__TUNING_BETA] == 4e-9);
  /* other ranks never read it: they get rank 0's in the rendezvous */
  ck_assert_int_eq(crnet__tuning_init(&t, 3, err, sizeof err), 0);
  ck_assert(t.base[CRNET__TUNING_BETA] == CRNET__TUNING_DEFAULT_BETA);

  setenv("CRNET_TUNING_FILE", "", 1); /* set but empty: no file */
  ck_assert_int_eq(crnet__tuning_path(path, sizeof path), -1);
  ck_assert_int_eq(crnet__tuning_init(&t, 0, err, sizeof err), 0);
  ck_assert_str_eq(t.source, "built-in defaults");

  unsetenv("CRNET_TUNING_FILE");
  setenv("XDG_CONFIG_HOME", "/xdg", 1);
  setenv("HOME", "/home/h", 1);
  ck_assert_int_eq(crnet__tuning_path(path, sizeof path), 0);
  ck_assert_str_eq(path, "/xdg/crnet/tuning");
  setenv("XDG_CONFIG_HOME", "relative", 1); /* not absolute: ignored */
  ck_assert_int_eq(crnet__tuning_path(path, sizeof path), 0);
  ck_assert_str_eq(path, "/home/h/.config/crnet/tuning");
  unsetenv("XDG_CONFIG_HOME");
  ck_assert_int_eq(crnet__tuning_path(path, sizeof path), 0);
  ck_assert_str_eq(path, "/home/h/.config/crnet/tuning");
  /* nothing there: the defaults, no error */
  ck_assert_int_eq(crnet__tuning_init(&t, 0, err, sizeof err), 0);
  unsetenv("HOME");
  ck_assert_int_eq(crnet__tuning_path(path, sizeof path), -1);

  setenv("CRNET_TUNING_FILE", tmpdir, 1); /* named, but a directory */
  ck_assert_int_ne(crnet__tuning_init(&t, 0, err, sizeof err), 0);
  ck_assert_int_eq(crnet__tuning_init(&t, 1, err, sizeof err), 0);
  unsetenv("CRNET_TUNING_FILE");
  unlink(file);
}
END_TEST

/* ------------------------------------------------------------------------
 * The wire encoding
 */

START_TEST(test_wire_round_trip) {
  crnet__tuning t, u;
  uint8_t w[CRNET__TUNING_WIRE_SIZE], w2[CRNET__TUNING_WIRE_SIZE];
  ck_assert_msg(parse(&t, "alpha = 3e-5\nalpha.2 = 1e-5\nalpha.16 = 9e-4\n"
                          "beta = 1.25e-9\ngamma = 0\ngamma.3 = 2e-10\n"
                          "ring_round = 0.7\nring_round.8 = 0.6\n") == 0,
                "%s", err);
  crnet__tuning_encode(&t, w);
  ck_assert_int_eq(crnet__tuning_decode(w, "rank 0", &u), 0);
  ck_assert_str_eq(u.source, "rank 0");
  for (int k = 0; k < CRNET__TUNING_NPARAMS; k++) {
    ck_assert(u.base[k] == t.base[k]);
    ck_assert_uint_eq(u.npoints[k], t.npoints[k]);
    for (uint32_t i = 0; i < t.npoints[k]; i++) {
      ck_assert_int_eq(u.points[k][i].p, t.points[k][i].p);
      ck_assert(u.points[k][i].value == t.points[k][i].value);
    }
  }
  crnet__tuning_encode(&u, w2);
  ck_assert_mem_eq(w, w2, sizeof w);
  crnet__tuning_defaults(&t);
  crnet__tuning_encode(&t, w);
  ck_assert_int_eq(crnet__tuning_decode(w, "x", &u), 0);
}
END_TEST

static void put_f64(uint8_t *p, double v) {
  uint64_t b;
  memcpy(&b, &v, 8);
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(b >> (8 * i));
}

START_TEST(test_wire_rejects) {
  crnet__tuning t, keep;
  uint8_t good[CRNET__TUNING_WIRE_SIZE], w[CRNET__TUNING_WIRE_SIZE];
  const size_t P = CRNET__TUNING_WIRE_PARAM;
  ck_assert_msg(parse(&t, "alpha.2 = 1e-5\nalpha.4 = 2e-5\n") == 0, "%s", err);
  crnet__tuning_encode(&t, good);
  keep = constants(1, 1e-3, 1e-3);
  struct {
    size_t off;
    double v;
    const char *what;
  } bad_values[] = {
      {0, 0, "alpha 0"},
      {0, NAN, "alpha NaN"},
      {P, -1e-9, "beta < 0"},
      {P, INFINITY, "beta inf"},
      {2 * P, -1e-12, "gamma < 0"},
      {3 * P, 0.05, "ring_round < 0.1"},
      {3 * P, 10.5, "ring_round > 10"},
      {16, 0, "alpha.2 = 0"},
      {28, 5, "alpha.4 = 5"},
  };
  for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
    memcpy(w, good, sizeof w);
    put_f64(w + bad_values[i].off, bad_values[i].v);
    t = keep;
    ck_assert_msg(crnet__tuning_decode(w, "x", &t) == CRNET_EIO, "%s accepted",
                  bad_values[i].what);
    ck_assert_msg(t.base[CRNET__TUNING_ALPHA] == 1, "%s: t changed",
                  bad_values[i].what);
  }
  /* too many points; points out of order, repeated, out of range; a
   * non-zero unused slot */
  memcpy(w, good, sizeof w);
  w[8] = CRNET__TUNING_MAX_POINTS + 1;
  ck_assert_int_eq(crnet__tuning_decode(w, "x", &t), CRNET_EIO);
  memcpy(w, good, sizeof w);
  w[24] = 1; /* alpha.4 becomes alpha.1 */
  ck_assert_int_eq(crnet__tuning_decode(w, "x", &t), CRNET_EIO);
  memcpy(w, good, sizeof w);
  w[24] = 2; /* alpha.2 twice */
  ck_assert_int_eq(crnet__tuning_decode(w, "x", &t), CRNET_EIO);
  memcpy(w, good, sizeof w);
  w[24] = 0; /* alpha.0 */
  ck_assert_int_eq(crnet__tuning_decode(w, "x", &t), CRNET_EIO);
  memcpy(w, good, sizeof w);
  w[12 + 12 * 2] = 8; /* slot 2 of alpha is unused */
  ck_assert_int_eq(crnet__tuning_decode(w, "x", &t), CRNET_EIO);
  memcpy(w, good, sizeof w);
  w[P + 12 + 12 * 15 + 11] = 1; /* the last byte of beta's last slot */
  ck_assert_int_eq(crnet__tuning_decode(w, "x", &t), CRNET_EIO);
}
END_TEST

/* Whatever the bytes, decode either refuses them or yields constants the
 * parser would accept (and encode gives the bytes back). */
START_TEST(test_wire_fuzz) {
  uint8_t good[CRNET__TUNING_WIRE_SIZE], w[CRNET__TUNING_WIRE_SIZE],
      again[CRNET__TUNING_WIRE_SIZE];
  crnet__tuning t;
  uint64_t x = 0x243F6A8885A308D3u;
  int accepted = 0;
  ck_assert_msg(parse(&t, "alpha.2 = 1e-5\nbeta.8 = 2e-9\n") == 0, "%s", err);
  crnet__tuning_encode(&t, good);
  for (int round = 0; round < 20000; round++) {
    memcpy(w, good, sizeof w);
    for (int flips = 0; flips < 1 + round % 3; flips++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      w[x % sizeof w] ^= (uint8_t)(1u << ((x >> 32) % 8));
    }
    if (crnet__tuning_decode(w, "f", &t) != 0)
      continue;
    accepted++;
    /* EXPECT (check_main.h): thousands of decoded records. */
    for (int k = 0; k < CRNET__TUNING_NPARAMS; k++) {
      EXPECT(isfinite(t.base[k]) && t.base[k] >= 0,
             "round %d: parameter %d decoded as %g", round, k, t.base[k]);
      EXPECT(t.npoints[k] <= CRNET__TUNING_MAX_POINTS,
             "round %d: parameter %d decoded with %u points, at most %d", round,
             k, (unsigned)t.npoints[k], CRNET__TUNING_MAX_POINTS);
    }
    crnet__tuning_encode(&t, again);
    size_t at = 0;
    while (at < sizeof w && w[at] == again[at])
      at++;
    EXPECT(at == sizeof w,
           "round %d: byte %zu re-encodes as 0x%02x, was 0x%02x", round, at,
           at < sizeof w ? again[at] : 0, at < sizeof w ? w[at] : 0);
  }
  /* flips of a mantissa bit keep a valid value: some must pass */
  ck_assert_int_gt(accepted, 0);
}
END_TEST

/* ------------------------------------------------------------------------
 * auto's choices under given constants
 */

START_TEST(test_auto_latency_bound) {
  /* α dominates: the fewest rounds win */
  crnet__tuning t = constants(1e-3, 1e-12, 1e-13);
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLREDUCE, false, 8, 4096, true, &t),
                   "hypercube"); /* 3 rounds against 6 */
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLREDUCE, false, 6, 4096, true, &t),
                   "star"); /* 3! = 6: 3 rounds, allgather-reduce too */
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLREDUCE, false, 5, 4096, true, &t),
                   "allgather-reduce"); /* ceil(log2 5) = 3 rounds */
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLTOALL, false, 16, 1 << 20, true, &t),
                   "bruck");
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLGATHER, false, 7, 4096, true, &t),
                   "circulant");
  ck_assert_str_eq(auto_pick(CRNET_COLL_BARRIER, false, 13, 0, true, &t),
                   "circulant");
}
END_TEST

START_TEST(test_auto_bandwidth_bound) {
  /* β dominates: optimal volume wins, in the fewest rounds among those */
  crnet__tuning t = constants(1e-9, 1e-6, 1e-7);
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLREDUCE, false, 8, 1 << 20, true, &t),
                   "circulant");
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLREDUCE, false, 7, 1 << 20, true, &t),
                   "circulant");
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLTOALL, false, 16, 1 << 20, true, &t),
                   "pairwise");
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLTOALL, false, 5, 1 << 20, true, &t),
                   "pairwise");
  ck_assert_str_eq(
      auto_pick(CRNET_COLL_REDUCE_SCATTER, false, 12, 1 << 20, true, &t),
      "circulant");
  /* the chain in 1024 pieces moves (1024+7)/1024·m on its busiest rank,
   * the circulant bcast (scatter, then allgather) 2·8/9·m */
  ck_assert_str_eq(auto_pick(CRNET_COLL_BCAST, false, 9, 1 << 20, true, &t),
                   "ring");
  /* the chain moves the vector once per rank (~2m on the path) where the
   * dissemination scan moves it in each of its 4 rounds */
  ck_assert_str_eq(auto_pick(CRNET_COLL_SCAN, false, 9, 1 << 20, true, &t),
                   "ring");
  ck_assert_str_eq(auto_pick(CRNET_COLL_SCAN, true, 9, 1 << 20, true, &t),
                   "ring");
  /* at p = 2 both are one message: the circulant, listed first */
  ck_assert_str_eq(auto_pick(CRNET_COLL_SCAN, false, 2, 1 << 20, true, &t),
                   "circulant");
}
END_TEST

/* Gather and scatter (model.c, terms_rooted): the linear schedule's
 * independent rounds overlap and it relays nothing, so with the default
 * constants it wins at every size up to p = 13; beyond, the tree's fewer
 * rounds win small vectors and linear still wins large ones. */
static const char *rooted_pick(crnet_collective coll, int32_t p, uint64_t m) {
  crnet__tuning t;
  uint64_t counts[64];
  crnet__call c;
  const char *name = NULL;
  crnet__tuning_defaults(&t);
  memset(&c, 0, sizeof c);
  c.coll = coll;
  c.p = p;
  c.esize = 4;
  c.commutative = true;
  c.tuning = &t;
  c.count = m / 4 / (uint64_t)p;
  for (int32_t r = 0; r < p; r++)
    counts[r] = c.count;
  c.counts = counts;
  ck_assert_int_eq(crnet__auto_choose(&c, &name, NULL), 0);
  ck_assert_ptr_nonnull(name);
  return name;
}

START_TEST(test_auto_rooted) {
  static const crnet_collective colls[] = {CRNET_COLL_GATHER,
                                           CRNET_COLL_SCATTER};
  for (size_t i = 0; i < 2; i++) {
    crnet_collective coll = colls[i];
    for (int32_t p = 3; p <= 13; p++) {
      ck_assert_str_eq(rooted_pick(coll, p, 1024 * (uint64_t)p), "linear");
      ck_assert_str_eq(rooted_pick(coll, p, 16u << 20), "linear");
    }
    ck_assert_str_eq(rooted_pick(coll, 16, 16u << 20), "linear");
    ck_assert_str_eq(rooted_pick(coll, 16, 1024), "binomial");
    ck_assert_str_eq(rooted_pick(coll, 64, 4096), "binomial");
    /* the model agrees with itself: linear's price is its formula */
    {
      crnet__call c;
      crnet__model_terms lin, tree;
      uint64_t counts[64];
      memset(&c, 0, sizeof c);
      c.coll = coll;
      c.p = 8;
      c.esize = 1;
      c.count = 8;
      for (int r = 0; r < 8; r++)
        counts[r] = 8;
      c.counts = counts;
      ck_assert(crnet__model_terms_of("linear", &c, &lin));
      ck_assert(crnet__model_terms_of("binomial", &c, &tree));
      ck_assert(lin.rounds == 2.5 && tree.rounds == 3);
      /* 64 bytes: linear moves 7 blocks, the tree 12 (1+1+2+1+2+2+3) */
      ck_assert(lin.moved == 56 && tree.moved == 96);
    }
  }
}
END_TEST

START_TEST(test_auto_crossover_where_the_model_says) {
  /* At p = 8, hypercube costs 3(α + mβ + mγ), circulant 6α + 1.75mβ +
   * 0.875mγ: equal at m* = 3α / (1.25β + 2.125γ). */
  crnet__tuning t = constants(4e-5, 1e-9, 1.5e-10);
  double mstar = 3 * 4e-5 / (1.25e-9 + 2.125 * 1.5e-10);
  uint64_t below = (uint64_t)(mstar / 4) * 4 - 4, above = below + 12;
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLREDUCE, false, 8, below, true, &t),
                   "hypercube");
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLREDUCE, false, 8, above, true, &t),
                   "circulant");
  /* all-to-all at p = 16: bruck 4α + 2mβ, pairwise 15α + (15/16)mβ */
  mstar = 11 * 4e-5 / ((2 - 15.0 / 16) * 1e-9);
  below = (uint64_t)(mstar / 64) * 64 - 64;
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLTOALL, false, 16, below, true, &t),
                   "bruck");
  ck_assert_str_eq(
      auto_pick(CRNET_COLL_ALLTOALL, false, 16, below + 128, true, &t),
      "pairwise");
}
END_TEST

/* ring_round moves crossovers. At p = 8, allreduce: hypercube costs 3α +
 * 3m(β + γ), circulant 6α + 1.75mβ + 0.875mγ, ring 14rα + 1.75mβ +
 * 0.875mγ with r = ring_round. Ring beats circulant once 14r < 6, and then
 * hypercube gives way at m* = (14r - 3)α / (1.25β + 2.125γ): the cheaper a
 * ring round, the earlier. */
START_TEST(test_auto_ring_round_moves_the_crossover) {
  static const double rs[] = {1.0, 0.4, 0.3};
  double a = 2e-4, b = 1.3e-9, g = 3e-10, last = 0;
  for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) {
    crnet__tuning t = constants(a, b, g);
    double rounds = 14 * rs[i] < 6 ? 14 * rs[i] : 6;
    double mstar = (rounds - 3) * a / (1.25 * b + 2.125 * g);
    uint64_t below = (uint64_t)(mstar / 4) * 4 - 4, above = below + 12;
    t.base[CRNET__TUNING_RING_ROUND] = rs[i];
    ck_assert_str_eq(
        auto_pick(CRNET_COLL_ALLREDUCE, false, 8, below, true, &t),
        "hypercube");
    ck_assert_str_eq(
        auto_pick(CRNET_COLL_ALLREDUCE, false, 8, above, true, &t),
        14 * rs[i] < 6 ? "ring" : "circulant");
    if (i > 0)
      ck_assert_msg(mstar < last, "r = %g: m* %g, before %g", rs[i], mstar,
                    last);
    last = mstar;
  }
  /* the same through files: one without ring_round prices as before */
  {
    crnet__tuning old_t, new_t;
    const char *old_f = "alpha.8 = 1e-3\nbeta.8 = 1e-12\ngamma.8 = 1e-13\n";
    char new_f[256];
    snprintf(new_f, sizeof new_f, "%sring_round.8 = 0.3\n", old_f);
    ck_assert_msg(parse(&old_t, old_f) == 0, "%s", err);
    ck_assert_msg(parse(&new_t, new_f) == 0, "%s", err);
    /* reduce-scatter: 7 ring rounds against 3 circulant ones; at 0.3α a
     * ring round wins (2.1 < 3). bcast: the chain in one piece (β is
     * negligible) takes 7 ring rounds, the k-nomial tree 2.5α (radix 3:
     * two levels of two messages in flight, the second at a quarter of
     * α), the binomial tree (hypercube) 3 rounds at α, circulant 6: the
     * k-nomial tree wins at α (7 > 2.5), the chain at 0.3α (2.1 < 2.5). */
    ck_assert_str_eq(
        auto_pick(CRNET_COLL_REDUCE_SCATTER, false, 8, 4096, true, &old_t),
        "circulant");
    ck_assert_str_eq(
        auto_pick(CRNET_COLL_REDUCE_SCATTER, false, 8, 4096, true, &new_t),
        "ring");
    ck_assert_str_eq(auto_pick(CRNET_COLL_BCAST, false, 8, 4096, true, &old_t),
                     "knomial");
    ck_assert_str_eq(auto_pick(CRNET_COLL_BCAST, false, 8, 4096, true, &new_t),
                     "ring");
    /* hypercube and the others are priced at α whatever ring_round says */
    ck_assert_str_eq(
        auto_pick(CRNET_COLL_ALLREDUCE, false, 8, 4096, true, &new_t),
        "hypercube");
  }
}
END_TEST

START_TEST(test_auto_non_commutative) {
  crnet__tuning lat = constants(1e-3, 1e-12, 1e-13),
                bw = constants(1e-9, 1e-6, 1e-7);
  static const char *const ordered[] = {"rabenseifner",     "hypercube",
                                        "star",             "allgather-reduce",
                                        "circulant-linear", "knomial"};
  /* Every pick for a non-commutative operator keeps rank order: one of the
   * order-keeping families, or circulant where crnet__select accepts it
   * (its skips keep order at this p). */
  for (int32_t p = 1; p <= 40; p++) {
    static const crnet_collective colls[] = {CRNET_COLL_ALLREDUCE,
                                             CRNET_COLL_REDUCE_SCATTER,
                                             CRNET_COLL_REDUCE};
    for (size_t c = 0; c < 3; c++) {
      for (int k = 0; k < 2; k++) {
        uint64_t counts[64];
        crnet__call call = make_call(colls[c], false, p, 4 << 10, false,
                                     k ? &bw : &lat, counts);
        const char *name, *chosen;
        uint32_t id;
        bool ok = false;
        ck_assert_int_eq(crnet__auto_choose(&call, &name, NULL), 0);
        for (size_t i = 0; i < sizeof ordered / sizeof ordered[0]; i++)
          ok |= strcmp(name, ordered[i]) == 0;
        if (strcmp(name, "circulant") == 0)
          ok = crnet__select("circulant", &call, &chosen, &id, err,
                             sizeof err) == 0;
        ck_assert_msg(ok, "p = %d coll %d: %s does not keep rank order", p,
                      (int)colls[c], name);
        /* and "auto" resolves to it through crnet__select */
        ck_assert_int_eq(
            crnet__select("auto", &call, &chosen, &id, err, sizeof err), 0);
        ck_assert_str_eq(chosen, name);
      }
    }
  }
  /* p = 5, small: circulant reorders, so reduce-scatter goes to the
   * linear circulant (4 rounds) rather than rabenseifner (5 with the
   * fold); at p = 8 rabenseifner needs 3. */
  ck_assert_str_eq(
      auto_pick(CRNET_COLL_REDUCE_SCATTER, false, 5, 4096, false, &lat),
      "circulant-linear");
  ck_assert_str_eq(
      auto_pick(CRNET_COLL_REDUCE_SCATTER, false, 8, 4096, false, &lat),
      "rabenseifner");
  ck_assert_str_eq(
      auto_pick(CRNET_COLL_REDUCE_SCATTER, false, 8, 4096, true, &lat),
      "circulant");
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLREDUCE, false, 8, 1 << 20, false, &bw),
                   "rabenseifner");
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLREDUCE, false, 5, 1 << 20, false, &bw),
                   "circulant-linear");
}
END_TEST

START_TEST(test_auto_same_on_every_rank) {
  crnet__tuning t = constants(4e-5, 1e-9, 1.5e-10);
  static const crnet_collective colls[] = {
      CRNET_COLL_ALLREDUCE, CRNET_COLL_REDUCE_SCATTER, CRNET_COLL_ALLGATHER,
      CRNET_COLL_BCAST,     CRNET_COLL_REDUCE,         CRNET_COLL_SCAN,
      CRNET_COLL_ALLTOALL,  CRNET_COLL_BARRIER};
  for (int32_t p = 1; p <= 17; p++)
    for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++)
      for (uint64_t m = 0; m <= (1u << 22); m = m ? m * 4 : 4) {
        uint64_t counts[64];
        crnet__call call =
            make_call(colls[c], false, p, m, c % 2 == 0, &t, counts);
        const char *first = NULL, *name;
        for (int32_t r = 0; r < p; r++) {
          call.rank = r;
          call.root = (r * 7) % p;
          call.in_place = r % 2;
          /* EXPECT (check_main.h): some 15000 choices. */
          int rc = crnet__auto_choose(&call, &name, NULL);
          EXPECT(rc == 0, "p = %d coll %d m = %llu: rank %d: auto_choose %d", p,
                 (int)colls[c], (unsigned long long)m, r, rc);
          if (first == NULL)
            first = name;
          EXPECT(strcmp(first, name) == 0,
                 "p = %d coll %d m = %llu: rank %d picks %s, rank 0 %s", p,
                 (int)colls[c], (unsigned long long)m, r, name, first);
        }
      }
}
END_TEST

START_TEST(test_auto_per_p_alpha) {
  /* α that grows with p (more ranks than cores): the same message goes to
   * the fewest rounds at p = 16 but to optimal volume at p = 2. */
  crnet__tuning t;
  ck_assert_msg(parse(&t, "beta = 1e-9\ngamma = 1.5e-10\nalpha.2 = 1e-6\n"
                          "alpha.16 = 1e-2\n") == 0,
                "%s", err);
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLREDUCE, false, 2, 1 << 20, true, &t),
                   "circulant");
  ck_assert_str_eq(
      auto_pick(CRNET_COLL_ALLREDUCE, false, 16, 1 << 20, true, &t),
      "hypercube");
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLTOALL, false, 2, 1 << 20, true, &t),
                   "bruck");
  ck_assert_str_eq(auto_pick(CRNET_COLL_ALLTOALL, false, 16, 1 << 20, true, &t),
                   "bruck");
  /* NULL tuning: the built-in defaults, as a comm without a file */
  uint64_t counts[64];
  crnet__call call =
      make_call(CRNET_COLL_ALLREDUCE, false, 8, 4096, true, NULL, counts);
  const char *name;
  ck_assert_int_eq(crnet__auto_choose(&call, &name, NULL), 0);
  ck_assert_str_eq(name, "hypercube");
}
END_TEST

/* shm_alpha and shm_beta: parsed like the others, carried on the wire,
 * and what prices a call whose links are all shared memory (and nothing
 * else). */
START_TEST(test_shm_constants) {
  crnet__tuning t, u;
  uint8_t w[CRNET__TUNING_WIRE_SIZE];
  uint64_t counts[64];
  crnet__call call;
  const char *name;
  ck_assert_msg(parse(&t, "shm_alpha = 2e-6\nshm_beta.4 = 3e-10\n"
                          "shm_beta.8 = 5e-10\n") == 0,
                "%s", err);
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_SHM_ALPHA, 8) == 2e-6);
  ck_assert(fabs(crnet__tuning_get(&t, CRNET__TUNING_SHM_BETA, 6) - 4e-10) <
            1e-22);
  ck_assert(crnet__tuning_get(&t, CRNET__TUNING_ALPHA, 8) ==
            CRNET__TUNING_DEFAULT_ALPHA);
  crnet__tuning_encode(&t, w);
  ck_assert_int_eq(crnet__tuning_decode(w, "rank 0", &u), 0);
  ck_assert(u.base[CRNET__TUNING_SHM_ALPHA] == 2e-6);
  ck_assert_uint_eq(u.npoints[CRNET__TUNING_SHM_BETA], 2);
  ck_assert_str_eq(crnet__tuning_param_name(CRNET__TUNING_SHM_BETA),
                   "shm_beta");
  expect_bad("shm_alpha = 0\n", "shm_alpha must be");
  /* TCP's rounds dear, shared memory's cheap: a 1 MiB allreduce at p = 16
   * takes the fewest rounds on TCP and optimal volume on shared memory. */
  ck_assert_msg(parse(&t, "alpha = 1e-2\nbeta = 1e-9\nshm_alpha = 1e-7\n"
                          "shm_beta = 1e-9\n") == 0,
                "%s", err);
  call = make_call(CRNET_COLL_ALLREDUCE, false, 16, 1 << 20, true, &t, counts);
  ck_assert_int_eq(crnet__auto_choose(&call, &name, NULL), 0);
  ck_assert_str_eq(name, "hypercube");
  call.shm_links = true;
  ck_assert_int_eq(crnet__auto_choose(&call, &name, NULL), 0);
  ck_assert_str_eq(name, "circulant");
}
END_TEST

/* ------------------------------------------------------------------------
 * The model against the schedules
 */

/* Per round, the busiest rank's rounds, bytes moved and bytes reduced,
 * summed over rounds: crsched --cost's synchronous-round figures with α,
 * β, γ taken one at a time. Also the exact price under one tuning (the
 * busiest rank per round of the combined cost). */
typedef struct exact {
  double rounds, moved, reduced;
  double *round_cost[3]; /* per tuning set, per round: max over ranks */
  uint32_t nrounds;
} exact;

static const crnet__tuning *price_sets[3];

/* Its checks are EXPECTs (check_main.h): it builds every rank's schedule,
 * some 70000 in all over the model's tests. */
static void exact_of(const char *name, const crnet__call *proto, exact *e) {
  uint32_t cap = 0;
  double *rmax[3] = {NULL, NULL, NULL};
  double alphas[3], betas[3], gammas[3];
  memset(e, 0, sizeof *e);
  /* The constants at this p, once, not per rank and round. */
  for (int t = 0; t < 3; t++) {
    alphas[t] = crnet__tuning_get(price_sets[t], CRNET__TUNING_ALPHA, proto->p);
    betas[t] = crnet__tuning_get(price_sets[t], CRNET__TUNING_BETA, proto->p);
    gammas[t] = crnet__tuning_get(price_sets[t], CRNET__TUNING_GAMMA, proto->p);
  }
  for (int32_t r = 0; r < proto->p; r++) {
    crnet__call call = *proto;
    crnet__schedule s;
    call.rank = r;
    int rc = crnet__build(name, &call, &s);
    EXPECT(rc == 0, "%s coll %d p = %d: rank %d's schedule: %d", name,
           (int)call.coll, call.p, r, rc);
    if (s.nrounds > cap) {
      for (int k = 0; k < 3; k++) {
        rmax[k] = realloc(rmax[k], sizeof(double) * s.nrounds * 4);
        EXPECT(rmax[k] != NULL, "out of memory");
        for (uint32_t i = cap * 4; i < s.nrounds * 4; i++)
          rmax[k][i] = 0;
      }
      cap = s.nrounds;
    }
    for (uint32_t k = 0; k < s.nrounds; k++) {
      const crnet__round *ro = &s.rounds[k];
      double comm = ro->send.peer >= 0 || ro->recv.peer >= 0;
      double sent = ro->send.peer >= 0
                        ? (double)crnet__xfer_count(&s, &ro->send) * call.esize
                        : 0;
      double recv = ro->recv.peer >= 0
                        ? (double)crnet__xfer_count(&s, &ro->recv) * call.esize
                        : 0;
      double red = 0, moved = sent > recv ? sent : recv;
      for (uint32_t i = 0; i < ro->nsteps; i++)
        if (s.steps[ro->first_step + i].kind == CRNET__STEP_REDUCE)
          red += (double)s.steps[ro->first_step + i].src.count * call.esize;
      /* slots 0..2: the terms alone; slot 3: unused */
      double terms[3] = {comm, moved, red};
      for (int t = 0; t < 3; t++) {
        double c = alphas[t] * comm + betas[t] * moved + gammas[t] * red;
        if (c > rmax[t][4 * k + 3])
          rmax[t][4 * k + 3] = c;
      }
      for (int j = 0; j < 3; j++)
        if (terms[j] > rmax[0][4 * k + j])
          rmax[0][4 * k + j] = terms[j];
    }
    crnet__sched_free(&s);
  }
  for (uint32_t k = 0; k < cap; k++) {
    e->rounds += rmax[0][4 * k];
    e->moved += rmax[0][4 * k + 1];
    e->reduced += rmax[0][4 * k + 2];
  }
  for (int t = 0; t < 3; t++) {
    e->round_cost[t] = malloc(sizeof(double) * (cap ? cap : 1));
    EXPECT(e->round_cost[t] != NULL, "out of memory");
    for (uint32_t k = 0; k < cap; k++)
      e->round_cost[t][k] = rmax[t][4 * k + 3];
    free(rmax[t]);
  }
  e->nrounds = cap;
}

static double exact_price(const exact *e, int t) {
  double sum = 0;
  for (uint32_t k = 0; k < e->nrounds; k++)
    sum += e->round_cost[t][k];
  return sum;
}

static void exact_free(exact *e) {
  for (int t = 0; t < 3; t++)
    free(e->round_cost[t]);
}

/* |model - exact| within `rel` of exact (or both tiny). */
static bool close_to(double model, double exact_v, double rel) {
  return fabs(model - exact_v) <= rel * exact_v + 1e-9;
}

static const struct {
  crnet_collective coll;
  bool exclusive;
} model_colls[] = {
    {CRNET_COLL_ALLREDUCE, false}, {CRNET_COLL_REDUCE_SCATTER, false},
    {CRNET_COLL_ALLGATHER, false}, {CRNET_COLL_BCAST, false},
    {CRNET_COLL_REDUCE, false},    {CRNET_COLL_SCAN, false},
    {CRNET_COLL_SCAN, true},       {CRNET_COLL_ALLTOALL, false},
    {CRNET_COLL_BARRIER, false},
};

/* The model's rows that model.c states only approximately, and by how
 * much at most; every other row within 1% (block rounding). */
static double tolerance(crnet_collective coll, const char *name, int32_t p) {
  bool pow2 = (p & (p - 1)) == 0;
  if (pow2)
    return 0.01;
  if ((coll == CRNET_COLL_REDUCE_SCATTER && strcmp(name, "rabenseifner") == 0) ||
      (coll == CRNET_COLL_ALLGATHER && strcmp(name, "hypercube") == 0))
    return 0.25;
  return 0.01;
}

static void check_model_at(int32_t p) {
  crnet__tuning lat = constants(1e-4, 1e-10, 1e-11),
                mid = constants(4e-5, 1e-9, 1.5e-10),
                bw = constants(1e-7, 1e-9, 5e-10);
  price_sets[0] = &lat;
  price_sets[1] = &mid;
  price_sets[2] = &bw;
  for (size_t c = 0; c < sizeof model_colls / sizeof model_colls[0]; c++) {
    crnet_collective coll = model_colls[c].coll;
    bool excl = model_colls[c].exclusive;
    /* a vector of 960·p bytes: whole blocks of 4-byte elements */
    uint64_t m = coll == CRNET_COLL_BARRIER ? 0 : (uint64_t)p * 960;
    uint64_t counts[64];
    double best_exact[3] = {0, 0, 0};
    const char *pick[3];
    double pick_exact[3] = {0, 0, 0};
    for (int t = 0; t < 3; t++) {
      crnet__call call = make_call(coll, excl, p, m, true, price_sets[t], counts);
      ck_assert_int_eq(crnet__auto_choose(&call, &pick[t], NULL), 0);
    }
    for (size_t i = 0; crnet__auto_candidate(coll, i) != NULL; i++) {
      const char *name = crnet__auto_candidate(coll, i);
      crnet__call call = make_call(coll, excl, p, m, true, &mid, counts);
      crnet__model_terms mt;
      exact e;
      if (!crnet__model_terms_of(name, &call, &mt))
        continue;
      if (strcmp(name, "allgather-reduce") == 0 && p > 16)
        continue; /* p·m beyond its memory bound: never priced */
      exact_of(name, &call, &e);
      ck_assert_msg(mt.rounds == e.rounds,
                    "p = %d coll %d%s %s: model %g rounds, schedules %g", p,
                    (int)coll, excl ? " (ex)" : "", name, mt.rounds, e.rounds);
      ck_assert_msg(close_to(mt.moved, e.moved,
                             tolerance(coll, name, p)),
                    "p = %d coll %d%s %s: model moves %g B, schedules %g B", p,
                    (int)coll, excl ? " (ex)" : "", name, mt.moved, e.moved);
      ck_assert_msg(close_to(mt.reduced, e.reduced,
                             tolerance(coll, name, p)),
                    "p = %d coll %d%s %s: model reduces %g B, schedules %g B",
                    p, (int)coll, excl ? " (ex)" : "", name, mt.reduced,
                    e.reduced);
      for (int t = 0; t < 3; t++) {
        /* priced as built for that tuning: the chain's pieces (ring's
         * bcast) depend on α and β */
        crnet__call ct = make_call(coll, excl, p, m, true, price_sets[t],
                                   counts);
        exact et;
        double x;
        if (crnet__algorithm_find(name)->price != NULL) {
          /* A row with its own price (knomial) runs rounds that overlap,
           * which the synchronous sum cannot see: its own price stands in
           * (tests/test_sim_knomial.c holds it against the schedules). */
          ck_assert_int_eq(crnet__auto_price(name, &ct, &x), 0);
        } else if (price_sets[t] == &mid) {
          /* ct is call: e holds the very schedules, built once (every
           * rank's schedule, at each p, is most of this test's time) */
          x = exact_price(&e, t);
        } else {
          exact_of(name, &ct, &et);
          x = exact_price(&et, t);
          exact_free(&et);
        }
        if (best_exact[t] == 0 || x < best_exact[t])
          best_exact[t] = x;
        if (strcmp(name, pick[t]) == 0)
          pick_exact[t] = x;
      }
      exact_free(&e);
    }
    /* auto's pick, priced by the schedules themselves, is (nearly) the
     * best there is */
    for (int t = 0; t < 3; t++)
      ck_assert_msg(pick_exact[t] <= best_exact[t] * 1.10 + 1e-12,
                    "p = %d coll %d%s, tuning %d: auto picks %s at %g s, the "
                    "best candidate costs %g s",
                    p, (int)coll, excl ? " (ex)" : "", t, pick[t],
                    pick_exact[t], best_exact[t]);
  }
}

/* The price of `name` across hosts as the schedules themselves give it:
 * per round the busiest rank, a rank's round at TCP's constants if its send
 * or its receive goes to another host, else at shared memory's. */
static double exact_hosts_price(const char *name, const crnet__call *proto,
                                const crnet__tuning *t) {
  double *rmax = NULL, sum = 0;
  uint32_t cap = 0;
  int32_t p = proto->p;
  for (int32_t r = 0; r < p; r++) {
    crnet__call call = *proto;
    crnet__schedule s;
    call.rank = r;
    /* EXPECT (check_main.h): every rank's schedule, thousands in all. */
    int rc = crnet__build(name, &call, &s);
    EXPECT(rc == 0, "%s coll %d p = %d: rank %d's schedule: %d", name,
           (int)call.coll, p, r, rc);
    if (s.nrounds > cap) {
      rmax = realloc(rmax, sizeof *rmax * s.nrounds);
      EXPECT(rmax != NULL, "out of memory");
      for (uint32_t k = cap; k < s.nrounds; k++)
        rmax[k] = 0;
      cap = s.nrounds;
    }
    for (uint32_t k = 0; k < s.nrounds; k++) {
      const crnet__round *ro = &s.rounds[k];
      int32_t to = ro->send.peer, from = ro->recv.peer;
      bool cross = (to >= 0 && proto->host[to] != proto->host[r]) ||
                   (from >= 0 && proto->host[from] != proto->host[r]);
      double sent = to >= 0 ? (double)crnet__xfer_count(&s, &ro->send) *
                                  call.esize
                            : 0;
      double recv = from >= 0 ? (double)crnet__xfer_count(&s, &ro->recv) *
                                    call.esize
                              : 0;
      double red = 0, c;
      for (uint32_t i = 0; i < ro->nsteps; i++)
        if (s.steps[ro->first_step + i].kind == CRNET__STEP_REDUCE)
          red += (double)s.steps[ro->first_step + i].src.count * call.esize;
      c = (to >= 0 || from >= 0
               ? crnet__tuning_get(t, cross ? CRNET__TUNING_ALPHA
                                            : CRNET__TUNING_SHM_ALPHA, p)
               : 0) +
          (sent > recv ? sent : recv) *
              crnet__tuning_get(t, cross ? CRNET__TUNING_BETA
                                         : CRNET__TUNING_SHM_BETA, p) +
          red * crnet__tuning_get(t, CRNET__TUNING_GAMMA, p);
      if (c > rmax[k])
        rmax[k] = c;
    }
    crnet__sched_free(&s);
  }
  for (uint32_t k = 0; k < cap; k++)
    sum += rmax[k];
  free(rmax);
  return sum;
}

/* crnet__model_seconds_hosts against the schedules, at powers of two up to
 * 64, with ranks placed host by host, round robin and shuffled, under
 * constants where TCP's rounds or its bytes dominate; and, with TCP's
 * constants equal to shared memory's, against the terms' own price. */
START_TEST(test_model_across_hosts) {
  static const struct {
    crnet_collective coll;
    const char *name;
  } rows[] = {{CRNET_COLL_ALLREDUCE, "hypercube"},
              {CRNET_COLL_ALLREDUCE, "rabenseifner"},
              {CRNET_COLL_REDUCE_SCATTER, "rabenseifner"},
              {CRNET_COLL_ALLGATHER, "hypercube"}};
  crnet__tuning lat, bw, flat;
  uint64_t counts[64];
  int32_t host[64];
  uint64_t x = 99;
  ck_assert(parse(&lat, "alpha = 1e-4\nbeta = 1e-9\nshm_alpha = 1e-6\n"
                        "shm_beta = 1e-10\ngamma = 1e-11\n") == 0);
  ck_assert(parse(&bw, "alpha = 1e-6\nbeta = 1e-8\nshm_alpha = 1e-6\n"
                       "shm_beta = 1e-10\ngamma = 2e-10\n") == 0);
  ck_assert(parse(&flat, "alpha = 3e-5\nbeta = 1e-9\nshm_alpha = 3e-5\n"
                         "shm_beta = 1e-9\ngamma = 1.5e-10\n") == 0);
  for (int32_t p = 4; p <= 64; p *= 2)
    for (int layout = 0; layout < 5; layout++) {
      int32_t nhosts = layout == 0 ? 2 : layout == 1 ? p / 2 : 4;
      if (nhosts < 2 || p / nhosts < 1 || p % nhosts != 0)
        continue;
      for (int32_t r = 0; r < p; r++)
        host[r] = layout <= 2 ? r / (p / nhosts) /* host by host */
                  : layout == 3 ? r % nhosts      /* round robin */
                                : -1;
      if (layout == 4) { /* shuffled: p / nhosts ranks per host */
        for (int32_t r = 0; r < p; r++)
          host[r] = r % nhosts;
        for (int32_t r = p - 1; r > 0; r--) {
          x = x * 6364136223846793005ull + 1442695040888963407ull;
          int32_t j = (int32_t)((x >> 33) % (uint64_t)(r + 1)), h = host[r];
          host[r] = host[j];
          host[j] = h;
        }
      }
      for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        for (int ti = 0; ti < 3; ti++) {
          const crnet__tuning *t = ti == 0 ? &lat : ti == 1 ? &bw : &flat;
          crnet__call call = make_call(rows[i].coll, false, p,
                                       (uint64_t)p * 960, true, t, counts);
          crnet__model_terms mt;
          double model, exact_v;
          call.host = host;
          call.nhosts = nhosts;
          ck_assert(crnet__model_seconds_hosts(rows[i].name, &call, t,
                                               &model));
          exact_v = exact_hosts_price(rows[i].name, &call, t);
          ck_assert_msg(close_to(model, exact_v, 0.01),
                        "p = %d, %d hosts (layout %d), coll %d %s, tuning "
                        "%d: model %g s, schedules %g s",
                        p, nhosts, layout, (int)rows[i].coll, rows[i].name,
                        ti, model, exact_v);
          if (ti == 2) {
            ck_assert(crnet__model_terms_of(rows[i].name, &call, &mt));
            ck_assert(close_to(model, crnet__model_seconds_on(&mt, t, p, false),
                               1e-9));
          }
        }
    }
}
END_TEST

/* Auto across hosts, ranks host by host: at powers of two rabenseifner's
 * crossing rounds carry its smallest pieces, so it costs what two-level
 * does (which it had lost to when every flat round was priced on TCP).
 * Not at 6 ranks, where the round-by-round price does not apply. */
START_TEST(test_auto_across_hosts) {
  uint64_t counts[64];
  int32_t host[64];
  const char *name;
  for (int32_t r = 0; r < 8; r++)
    host[r] = r / 4;
  crnet__call call =
      make_call(CRNET_COLL_ALLREDUCE, false, 8, 65536, true, NULL, counts);
  call.host = host;
  call.nhosts = 2;
  ck_assert_int_eq(crnet__auto_choose(&call, &name, NULL), 0);
  ck_assert_str_eq(name, "rabenseifner");
  for (int32_t r = 0; r < 6; r++)
    host[r] = r / 2;
  call = make_call(CRNET_COLL_ALLREDUCE, false, 6, 65536, true, NULL, counts);
  call.host = host;
  call.nhosts = 3;
  ck_assert_int_eq(crnet__auto_choose(&call, &name, NULL), 0);
  ck_assert_str_eq(name, "two-level");
  ck_assert(!crnet__model_seconds_hosts("rabenseifner", &call, NULL, NULL));
}
END_TEST

START_TEST(test_model_matches_schedules) {
  check_model_at((int32_t)_i);
}
END_TEST

static Suite *tuning_suite(void) {
  Suite *s = suite_create("tuning");
  TCase *tc = tcase_create("file");
  tcase_add_test(tc, test_parse_good);
  tcase_add_test(tc, test_parse_ring_round);
  tcase_add_test(tc, test_parse_every_kind_of_bad_line);
  tcase_add_test(tc, test_parse_nul_byte);
  tcase_add_test(tc, test_value_for_p);
  tcase_add_test(tc, test_load_file);
  tcase_add_test(tc, test_path_and_init);
  suite_add_tcase(s, tc);
  tc = tcase_create("wire");
  tcase_add_test(tc, test_wire_round_trip);
  tcase_add_test(tc, test_wire_rejects);
  tcase_add_test(tc, test_wire_fuzz);
  suite_add_tcase(s, tc);
  tc = tcase_create("auto");
  tcase_add_test(tc, test_auto_latency_bound);
  tcase_add_test(tc, test_auto_bandwidth_bound);
  tcase_add_test(tc, test_auto_crossover_where_the_model_says);
  tcase_add_test(tc, test_auto_ring_round_moves_the_crossover);
  tcase_add_test(tc, test_auto_non_commutative);
  tcase_add_test(tc, test_auto_same_on_every_rank);
  tcase_add_test(tc, test_auto_per_p_alpha);
  tcase_add_test(tc, test_shm_constants);
  tcase_add_test(tc, test_auto_across_hosts);
  tcase_add_test(tc, test_auto_rooted);
  suite_add_tcase(s, tc);
  tc = tcase_create("model");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_model_matches_schedules, 2, 25);
  tcase_add_loop_test(tc, test_model_matches_schedules, 31, 34);
  tcase_add_loop_test(tc, test_model_matches_schedules, 48, 49);
  tcase_add_loop_test(tc, test_model_matches_schedules, 64, 65);
  tcase_add_test(tc, test_model_across_hosts);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr;
  int failed;
  if (mkdtemp(tmpdir) == NULL) {
    perror("mkdtemp");
    return EXIT_FAILURE;
  }
  sr = srunner_create(tuning_suite());
  srunner_run_all(sr, CK_NORMAL);
  failed = check_failures(sr);
  srunner_free(sr);
  rmdir(tmpdir);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
