/* The trace writer (trace.h): file names per rank, and files that are
 * complete JSON arrays with one event per call and round. The events'
 * content across real ranks is checked by tests/observe.sh. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "trace.h"

static const struct {
  const char *path;
  int rank;
  const char *want;
} paths[] = {
    {"trace.json", 3, "trace.3.json"},
    {"/tmp/run/trace.json", 12, "/tmp/run/trace.12.json"},
    {"trace", 0, "trace.0"},
    {"/tmp/a.b/trace", 5, "/tmp/a.b/trace.5"},
    {"/tmp/.trace", 1, "/tmp/.trace.1"},
    {"out/%r/t.json", 7, "out/7/t.json"},
    {"t-%r-%r.json", 2, "t-2-2.json"},
    {"a.tar.gz", 4, "a.tar.4.gz"},
};

START_TEST(path_gets_the_rank) {
  char out[64];
  ck_assert_int_eq(crnet__trace_path(paths[_i].path, paths[_i].rank, out,
                                     sizeof out),
                   0);
  ck_assert_str_eq(out, paths[_i].want);
}
END_TEST

START_TEST(path_too_long_is_refused) {
  char out[12];
  ck_assert_int_eq(crnet__trace_path("trace.json", 1234, out, sizeof out), -1);
  ck_assert_int_eq(crnet__trace_path("%r%r%r%r%r%r", 12, out, sizeof out), -1);
  ck_assert_int_eq(crnet__trace_path("t.json", 1, out, sizeof out), 0);
}
END_TEST

START_TEST(open_fails_cleanly) {
  crnet__trace *t = (crnet__trace *)1;
  ck_assert_int_eq(crnet__trace_open(&t, "/nonexistent-dir/x.json", 0, 1, ""),
                   ENOENT);
  ck_assert_ptr_null(t);
}
END_TEST

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  static char buf[1 << 16];
  size_t n;
  ck_assert_ptr_nonnull(f);
  n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = strstr(s, needle); p != NULL; p = strstr(p + 1, needle))
    n++;
  return n;
}

START_TEST(events_make_one_array) {
  char path[] = "/tmp/crnet-trace-XXXXXX";
  int fd = mkstemp(path);
  crnet__trace *t;
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_int_eq(crnet__trace_open(&t, path, 2, 4, "host \"q\"\n"), 0);
  crnet__trace_round r = {.k = 0, .to = 3, .from = 1, .bytes_sent = 8,
                          .bytes_received = 8};
  crnet__trace_round_done(t, 1000, 3000, &r);
  r.k = 1;
  r.lane = 2; /* an independent round: a lane of its own */
  crnet__trace_round_done(t, 3000, 4000, &r);
  crnet__trace_call call = {.name = "allreduce", .seq = 1,
                            .what = "allreduce #1 (1 x int32, sum)",
                            .rounds = 2, .result = "ok"};
  crnet__trace_collective(t, 1000, 5000, &call);
  crnet__trace_close(t);
  const char *s = slurp(path);
  unlink(path);
  ck_assert_msg(s[0] == '[' && strcmp(s + strlen(s) - 4, "}\n]\n") == 0,
                "not one array:\n%s", s);
  ck_assert_int_eq(count(s, "\"ph\":\"X\""), 3);
  ck_assert_int_eq(count(s, "\"cat\":\"round\""), 2);
  ck_assert_int_eq(count(s, "\"name\":\"allreduce #1\""), 1);
  ck_assert_int_eq(count(s, "\"dur\":2.000"), 1);
  ck_assert_int_eq(count(s, "\"tid\":3"), 2); /* lane 2: name and event */
  /* The host name is escaped, not pasted. */
  ck_assert_int_eq(count(s, "host \\\"q\\\"\\u000a"), 1);
  ck_assert_msg(strstr(s, ",\n]") == NULL, "a trailing comma:\n%s", s);
}
END_TEST

START_TEST(sub_comms_get_threads_of_their_own) {
  char path[] = "/tmp/crnet-trace-XXXXXX";
  int fd = mkstemp(path);
  crnet__trace *t;
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_int_eq(crnet__trace_open(&t, path, 4, 6, ""), 0);
  crnet__trace_round r = {.k = 0, .to = 5, .from = 3, .ctx = 2};
  crnet__trace_round_done(t, 1000, 2000, &r);
  r.k = 1;
  crnet__trace_round_done(t, 2000, 3000, &r);
  r.lane = 1; /* an independent round of comm 2 */
  crnet__trace_round_done(t, 2000, 3000, &r);
  crnet__trace_call call = {.name = "allreduce", .seq = 7,
                            .what = "allreduce #7 (1 x int32, sum)",
                            .rounds = 2, .result = "ok", .ctx = 2,
                            .comm_rank = 1, .comm_size = 3};
  crnet__trace_collective(t, 1000, 3000, &call);
  call.ctx = 0; /* the world's call #7, beside it */
  call.seq = 7;
  crnet__trace_collective(t, 1000, 3000, &call);
  crnet__trace_close(t);
  const char *s = slurp(path);
  unlink(path);
  /* comm 2: calls on thread 128, rounds on 129 and lane 1 on 130, each
   * named once */
  ck_assert_int_eq(count(s, "\"name\":\"allreduce #7 (comm 2)\""), 1);
  ck_assert_int_eq(count(s, "\"name\":\"allreduce #7\""), 1);
  ck_assert_int_eq(count(s, "\"comm 2: collectives\""), 1);
  ck_assert_int_eq(count(s, "\"comm 2: rounds\""), 1);
  ck_assert_int_eq(count(s, "\"comm 2: rounds (lane 2)\""), 1);
  ck_assert_int_eq(count(s, "\"tid\":128"), 2);
  ck_assert_int_eq(count(s, "\"tid\":129"), 3);
  ck_assert_int_eq(count(s, "\"tid\":130"), 2);
  ck_assert_int_eq(count(s, "\"comm\":2,\"comm_rank\":1,\"comm_size\":3"), 1);
  ck_assert_int_eq(count(s, "\"to\":5"), 3);
}
END_TEST

int main(void) {
  Suite *s = suite_create("trace");
  TCase *tc = tcase_create("trace");
  tcase_add_loop_test(tc, path_gets_the_rank, 0,
                      (int)(sizeof paths / sizeof paths[0]));
  tcase_add_test(tc, path_too_long_is_refused);
  tcase_add_test(tc, open_fails_cleanly);
  tcase_add_test(tc, events_make_one_array);
  tcase_add_test(tc, sub_comms_get_threads_of_their_own);
  suite_add_tcase(s, tc);
  return check_run(s);
}
