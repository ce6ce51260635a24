/* Unit tests of crlaunch's pure pieces for multi-host jobs: host lists and
 * host files (hosts.c), rank placement, the agent configuration block, ssh
 * command words and shell quoting (remote.c). The SSH launch itself runs
 * end to end in tests/multihost.sh. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "hosts.h"
#include "remote.h"

static char why[512];

/* ---- host lists ------------------------------------------------------- */

START_TEST(test_list_slots_and_ipv6) {
  crnet__hostlist hl = {0};
  ck_assert_int_eq(crnet__hosts_parse_list(&hl, "h1:8,node-2.example:2,"
                                                "[fd77::4]:3,fd77::5,"
                                                "user@h3,10.0.0.1:1",
                                           why, sizeof why),
                   0);
  ck_assert_int_eq(hl.n, 6);
  ck_assert_str_eq(hl.hosts[0].name, "h1");
  ck_assert_int_eq(hl.hosts[0].slots, 8);
  ck_assert_str_eq(hl.hosts[1].name, "node-2.example");
  ck_assert_int_eq(hl.hosts[1].slots, 2);
  ck_assert_str_eq(hl.hosts[2].name, "fd77::4");
  ck_assert_int_eq(hl.hosts[2].slots, 3);
  /* A bare IPv6 address has no slot count: its last group is not one. */
  ck_assert_str_eq(hl.hosts[3].name, "fd77::5");
  ck_assert_int_eq(hl.hosts[3].slots, 1);
  ck_assert_str_eq(hl.hosts[4].name, "user@h3");
  ck_assert_int_eq(hl.hosts[4].slots, 1);
  ck_assert_int_eq(hl.slots, 8 + 2 + 3 + 1 + 1 + 1);
  crnet__hosts_free(&hl);
}
END_TEST

/* mpirun's --host a,a,b: a host named again adds its slots. */
START_TEST(test_list_repeats_add_slots) {
  crnet__hostlist hl = {0};
  ck_assert_int_eq(crnet__hosts_parse_list(&hl, "a,a,b,a:3,[fd77::4],"
                                                "[fd77::4]:2",
                                           why, sizeof why),
                   0);
  ck_assert_int_eq(hl.n, 3);
  ck_assert_str_eq(hl.hosts[0].name, "a");
  ck_assert_int_eq(hl.hosts[0].slots, 5);
  ck_assert_str_eq(hl.hosts[1].name, "b");
  ck_assert_int_eq(hl.hosts[1].slots, 1);
  ck_assert_str_eq(hl.hosts[2].name, "fd77::4");
  ck_assert_int_eq(hl.hosts[2].slots, 3);
  ck_assert_int_eq(hl.slots, 9);
  crnet__hosts_free(&hl);
  ck_assert_int_ne(crnet__hosts_parse_list(&hl, "a:65536,a", why, sizeof why),
                   0);
  ck_assert_ptr_nonnull(strstr(why, "65536"));
  crnet__hosts_free(&hl);
}
END_TEST

START_TEST(test_list_errors) {
  static const struct {
    const char *spec;
    const char *says;
  } bad[] = {
      {"", "empty"},
      {"h1,,h2", "empty item"},
      {"h1,", "empty item"},
      {"h1:0", "slot count"},
      {"h1:x", "slot count"},
      {"h1:99999999", "slot count"},
      {"[fd77::4", "closing"},
      {"[fd77::4]x", "':N'"},
      {"x;rm -rf", "not a host name"},
      {"-oProxyCommand=evil", "not a host name"},
      {"a$(b)", "not a host name"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    crnet__hostlist hl = {0};
    why[0] = '\0';
    ck_assert_msg(crnet__hosts_parse_list(&hl, bad[i].spec, why,
                                          sizeof why) == -1,
                  "'%s' accepted", bad[i].spec);
    ck_assert_msg(strstr(why, bad[i].says) != NULL,
                  "'%s': message '%s' lacks '%s'", bad[i].spec, why,
                  bad[i].says);
    crnet__hosts_free(&hl);
  }
}
END_TEST

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert(f != NULL);
  fputs(text, f);
  fclose(f);
}

START_TEST(test_hostfile) {
  char path[] = "/tmp/crnet-hostfile-XXXXXX";
  int fd = mkstemp(path);
  ck_assert(fd >= 0);
  close(fd);
  write_text(path, "# the cluster\n"
                   "node1 slots=4\n"
                   "\n"
                   "   node2\t slots=2   # two GPUs\n"
                   "[fd77::9] slots=3\n"
                   "node3\n");
  crnet__hostlist hl = {0};
  ck_assert_int_eq(crnet__hosts_parse_file(&hl, path, why, sizeof why), 0);
  ck_assert_int_eq(hl.n, 4);
  ck_assert_str_eq(hl.hosts[0].name, "node1");
  ck_assert_int_eq(hl.hosts[0].slots, 4);
  ck_assert_str_eq(hl.hosts[1].name, "node2");
  ck_assert_int_eq(hl.hosts[1].slots, 2);
  ck_assert_str_eq(hl.hosts[2].name, "fd77::9");
  ck_assert_int_eq(hl.hosts[2].slots, 3);
  ck_assert_int_eq(hl.hosts[3].slots, 1);
  ck_assert_int_eq(hl.slots, 10);
  crnet__hosts_free(&hl);

  write_text(path, "node1 slots=4\nnode2 cpus=2\n");
  ck_assert_int_eq(crnet__hosts_parse_file(&hl, path, why, sizeof why), -1);
  ck_assert_msg(strstr(why, ":2: 'cpus=2': expected slots=N") != NULL, "%s",
                why);
  crnet__hosts_free(&hl);

  write_text(path, "# nothing here\n\n");
  ck_assert_int_eq(crnet__hosts_parse_file(&hl, path, why, sizeof why), -1);
  ck_assert_msg(strstr(why, "no hosts") != NULL, "%s", why);
  crnet__hosts_free(&hl);

  unlink(path);
  ck_assert_int_eq(crnet__hosts_parse_file(&hl, path, why, sizeof why), -1);
  ck_assert_msg(strstr(why, "No such file") != NULL, "%s", why);
  crnet__hosts_free(&hl);
}
END_TEST

/* Slurm's compressed node lists and task counts, as SLURM_JOB_NODELIST and
 * SLURM_TASKS_PER_NODE give them. */
START_TEST(test_slurm_allocation) {
  crnet__hostlist hl = {0};
  char why[256];
  ck_assert_int_eq(crnet__hosts_parse_slurm(&hl,
                                            "node[01-03,7],gpu-a,r[1-2]x[8-9]",
                                            "2(x3),1,4,1(x4)", why, sizeof why),
                   0);
  static const char *const names[] = {"node01", "node02", "node03",
                                      "node7",  "gpu-a",  "r1x8",
                                      "r1x9",   "r2x8",   "r2x9"};
  static const int slots[] = {2, 2, 2, 1, 4, 1, 1, 1, 1};
  ck_assert_int_eq(hl.n, 9);
  for (int i = 0; i < 9; i++) {
    ck_assert_str_eq(hl.hosts[i].name, names[i]);
    ck_assert_int_eq(hl.hosts[i].slots, slots[i]);
  }
  ck_assert_int_eq(hl.slots, 15);
  crnet__hosts_free(&hl);

  ck_assert_int_eq(crnet__hosts_parse_slurm(&hl, "vm", "16", why, sizeof why),
                   0);
  ck_assert_int_eq(hl.n, 1);
  ck_assert_int_eq(hl.slots, 16);
  crnet__hosts_free(&hl);

  static const struct {
    const char *nodes, *tasks, *says;
  } bad[] = {
      {"n[1-3]", "1(x2)", "has 3 nodes"},
      {"n[1-2]", "1(x3)", "has 2 nodes"},
      {"n[1-2", "1", "no closing"},
      {"n[]", "1", "empty range"},
      {"n[3-1]", "1", "not a range"},
      {"n[a-b]", "1", "not a range"},
      {"n1,,n2", "1(x2)", "empty item"},
      {"", "1", "empty"},
      {"n1", "0", "not a list of counts"},
      {"n1", "1(x", "not a list of counts"},
      {"n1", "x", "not a list of counts"},
      {"n1", "1,", "not a list of counts"},
      {"-oProxyCommand=x", "1", "not a host name"},
      {"n[0-99999]", "1", "more than"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    why[0] = '\0';
    ck_assert_int_eq(crnet__hosts_parse_slurm(&hl, bad[i].nodes, bad[i].tasks,
                                              why, sizeof why),
                     -1);
    ck_assert_msg(strstr(why, bad[i].says) != NULL, "%s / %s: %s", bad[i].nodes,
                  bad[i].tasks, why);
    crnet__hosts_free(&hl);
  }
}
END_TEST

START_TEST(test_placement) {
  crnet__hostlist hl = {0};
  ck_assert_int_eq(
      crnet__hosts_parse_list(&hl, "a:3,localhost:2,me:4,b:1", why, sizeof why),
      0);
  ck_assert_int_eq(crnet__hosts_place(&hl, 6, "me", why, sizeof why), 0);
  /* By block, in order: 0-2 on a, 3-4 here, 5 on "me" (this host too),
   * nothing on b. */
  int first[] = {0, 3, 5, 6}, count[] = {3, 2, 1, 0}, local[] = {0, 1, 1, 0};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(hl.hosts[i].first, first[i]);
    ck_assert_int_eq(hl.hosts[i].count, count[i]);
    ck_assert_int_eq(hl.hosts[i].local, local[i]);
  }
  ck_assert_int_eq(crnet__hosts_place(&hl, 10, "me", why, sizeof why), 0);
  ck_assert_int_eq(hl.hosts[3].count, 1);
  ck_assert_int_eq(crnet__hosts_place(&hl, 11, NULL, why, sizeof why), -1);
  ck_assert_msg(strstr(why, "11 ranks do not fit in the 10 slots") != NULL,
                "%s", why);
  crnet__hosts_free(&hl);
}
END_TEST

/* ---- the agent configuration ------------------------------------------ */

static char *argv_[] = {"./app", "--flag", "two words", NULL};
static char *env_[] = {"CRNET_DEBUG=1", "FOO=line one\nline two=x", NULL};

static crnet__agent_config sample(void) {
  crnet__agent_config c;
  memset(&c, 0, sizeof c);
  for (int i = 0; i < CRNET__KEY_BYTES; i++)
    c.key[i] = (uint8_t)(i * 7 + 1);
  c.cwd = "/home/me/run dir";
  c.rendezvous = "[fd77::1]:5000";
  c.init_timeout = "60";
  c.grace_ms = 2500;
  c.size = 16;
  c.first = 8;
  c.count = 8;
  c.tag_output = 1;
  c.bind_none = 1;
  c.report_bindings = 1;
  c.report = "0123456789abcdef";
  c.env = env_;
  c.nenv = 2;
  c.argv = argv_;
  c.argc = 3;
  return c;
}

START_TEST(test_config_round_trip) {
  crnet__agent_config c = sample(), d;
  char *block;
  size_t len;
  ck_assert_int_eq(crnet__agent_config_encode(&c, &block, &len), 0);
  ck_assert_int_eq(crnet__agent_config_decode(block, len, &d, why, sizeof why),
                   0);
  ck_assert_mem_eq(d.key, c.key, CRNET__KEY_BYTES);
  ck_assert_str_eq(d.cwd, c.cwd);
  ck_assert_str_eq(d.rendezvous, c.rendezvous);
  ck_assert_str_eq(d.init_timeout, "60");
  ck_assert_int_eq(d.grace_ms, 2500);
  ck_assert_str_eq(d.report, c.report);
  ck_assert_int_eq(d.size, 16);
  ck_assert_int_eq(d.first, 8);
  ck_assert_int_eq(d.count, 8);
  ck_assert_int_eq(d.tag_output, 1);
  ck_assert_int_eq(d.bind_none, 1);
  ck_assert_int_eq(d.report_bindings, 1);
  ck_assert_int_eq(d.nenv, 2);
  ck_assert_str_eq(d.env[1], env_[1]);
  ck_assert_int_eq(d.argc, 3);
  ck_assert_str_eq(d.argv[2], "two words");
  ck_assert_ptr_null(d.argv[3]);
  crnet__agent_config_free(&d);
  free(block);
}
END_TEST

/* Edits one item of a valid block ("name=" prefix) and expects decode to
 * refuse it saying `says`. */
static void expect_refused(const char *item, const char *replacement,
                           const char *says) {
  crnet__agent_config c = sample(), d;
  char *block;
  size_t len;
  ck_assert_int_eq(crnet__agent_config_encode(&c, &block, &len), 0);
  char *out = malloc(len + 256);
  size_t o = 0;
  for (size_t at = 0; at < len;) {
    size_t n = strlen(block + at) + 1;
    if (n > 1 && strncmp(block + at, item, strlen(item)) == 0) {
      if (replacement != NULL) {
        memcpy(out + o, replacement, strlen(replacement) + 1);
        o += strlen(replacement) + 1;
      }
    } else {
      memcpy(out + o, block + at, n);
      o += n;
    }
    at += n;
  }
  why[0] = '\0';
  ck_assert_msg(crnet__agent_config_decode(out, o, &d, why, sizeof why) == -1,
                "%s -> %s accepted", item, replacement);
  ck_assert_msg(strstr(why, says) != NULL, "%s: '%s' lacks '%s'", item, why,
                says);
  free(out);
  free(block);
}

START_TEST(test_config_refused) {
  expect_refused("v=", "v=1", "another version");
  expect_refused("v=", "v=2", "another version");
  expect_refused("v=", "v=4", "another version");
  expect_refused("key=", "key=abc", "malformed key");
  expect_refused("key=", NULL, "misses an item");
  expect_refused("cwd=", NULL, "misses an item");
  expect_refused("report=", NULL, "misses an item");
  expect_refused("grace_ms=", NULL, "misses an item");
  expect_refused("grace_ms=", "grace_ms=0", "misses an item");
  expect_refused("grace_ms=", "grace_ms=soon", "not a number");
  expect_refused("arg=", NULL, "misses an item");
  expect_refused("first=", "first=12", "do not fit a job of 16");
  expect_refused("count=", "count=0", "do not fit");
  expect_refused("size=", "size=-3", "not a number");
  expect_refused("env=", "env==x", "without a name");
  expect_refused("tag=", "colour=red", "unknown item 'colour'");
  expect_refused("tag=", "nonsense", "without '='");

  /* Cut short anywhere: refused, never read past the end. */
  crnet__agent_config c = sample(), d;
  char *block;
  size_t len;
  ck_assert_int_eq(crnet__agent_config_encode(&c, &block, &len), 0);
  for (size_t cut = 0; cut < len - 1; cut++) {
    char *copy = malloc(cut > 0 ? cut : 1);
    memcpy(copy, block, cut);
    ck_assert_msg(crnet__agent_config_decode(copy, cut, &d, why,
                                             sizeof why) == -1,
                  "a block cut at %zu of %zu was accepted", cut, len);
    free(copy);
  }
  free(block);
}
END_TEST

/* The block is read from a pipe and the commands behind it stay unread. */
START_TEST(test_config_read_leaves_commands) {
  crnet__agent_config c = sample(), d;
  char *block;
  size_t len;
  ck_assert_int_eq(crnet__agent_config_encode(&c, &block, &len), 0);
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  ck_assert_int_eq(write(fds[1], block, len), (ssize_t)len);
  ck_assert_int_eq(write(fds[1], "RS\x0f", 3), 3);
  ck_assert_int_eq(crnet__agent_config_read(fds[0], &d, why, sizeof why), 0);
  ck_assert_str_eq(d.cwd, c.cwd);
  char rest[4] = {0};
  ck_assert_int_eq(read(fds[0], rest, sizeof rest), 3);
  ck_assert_mem_eq(rest, "RS\x0f", 3);
  crnet__agent_config_free(&d);

  /* End of file before the block ends: a clear error, no hang. */
  ck_assert_int_eq(write(fds[1], block, len / 2), (ssize_t)(len / 2));
  close(fds[1]);
  ck_assert_int_eq(crnet__agent_config_read(fds[0], &d, why, sizeof why), -1);
  ck_assert_msg(strstr(why, "ended before the configuration") != NULL, "%s",
                why);
  close(fds[0]);
  free(block);
}
END_TEST

/* ---- words and quoting ------------------------------------------------ */

START_TEST(test_split_words) {
  char **w;
  int n;
  ck_assert_int_eq(crnet__split_words("  ssh -p 2222\t-i 'my key' "
                                      "-o \"User=a \\\"b\\\"\" x\\ y",
                                      &w, &n, why, sizeof why),
                   0);
  ck_assert_int_eq(n, 8);
  const char *want[] = {"ssh", "-p",          "2222", "-i",
                        "my key", "-o", "User=a \"b\"", "x y"};
  for (int i = 0; i < 8; i++)
    ck_assert_str_eq(w[i], want[i]);
  ck_assert_ptr_null(w[8]);
  crnet__free_words(w);
  ck_assert_int_eq(crnet__split_words("ssh 'open", &w, &n, why, sizeof why),
                   -1);
  ck_assert_msg(strstr(why, "unbalanced single quote") != NULL, "%s", why);
  ck_assert_int_eq(crnet__split_words("ssh \"open", &w, &n, why, sizeof why),
                   -1);
  ck_assert_msg(strstr(why, "unbalanced double quote") != NULL, "%s", why);
  ck_assert_int_eq(crnet__split_words("   ", &w, &n, why, sizeof why), -1);
  ck_assert_msg(strstr(why, "empty") != NULL, "%s", why);
}
END_TEST

START_TEST(test_shell_quote_survives_sh) {
  const char *nasty[] = {"/opt/crnet/bin/crlaunch", "it's", "a b$(x)`y`\\",
                         "'", ""};
  for (size_t i = 0; i < sizeof nasty / sizeof nasty[0]; i++) {
    char *q = crnet__shell_quote(nasty[i]);
    ck_assert_ptr_nonnull(q);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "printf %%s %s", q);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char got[256] = "";
    size_t n = fread(got, 1, sizeof got - 1, p);
    got[n] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(strcmp(got, nasty[i]) == 0, "sh turned %s into '%s'", q,
                  got);
    free(q);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("hosts");
  TCase *tc = tcase_create("hosts");
  tcase_add_test(tc, test_list_slots_and_ipv6);
  tcase_add_test(tc, test_list_repeats_add_slots);
  tcase_add_test(tc, test_list_errors);
  tcase_add_test(tc, test_hostfile);
  tcase_add_test(tc, test_slurm_allocation);
  tcase_add_test(tc, test_placement);
  tcase_add_test(tc, test_config_round_trip);
  tcase_add_test(tc, test_config_refused);
  tcase_add_test(tc, test_config_read_leaves_commands);
  tcase_add_test(tc, test_split_words);
  tcase_add_test(tc, test_shell_quote_survives_sh);
  suite_add_tcase(s, tc);
  return check_run(s);
}
