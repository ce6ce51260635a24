/* settings: the table of CRNET_* variables (src/runtime/settings.c).
 *
 *   rows      every row is complete, names are unique, every default
 *             parses, the schedule rows follow crnet_collective
 *   types     each type's parser: good values, bad values, the edges of
 *             the range, and the exact error the library gives
 *   read      where a value comes from: crnet_config, the environment
 *             (empty as unset or as a value), the default, a missing one
 *   docs      docs/SETTINGS.md's table names every variable of the table,
 *             and nothing else (path in $CRNET_SETTINGS_DOC)
 *
 * The environment is a fake one (a lookup over a list), so the tests
 * neither read nor change the process's own.
 */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "crnet.h"
#include "settings.h"

#define TABLE crnet__settings_table

static char err[512];

/* The id of the row named `name`. */
static int id_of(const char *name) {
  for (int id = 0; id < CRNET__SETTING_COUNT; id++)
    if (strcmp(TABLE[id].name, name) == 0)
      return id;
  ck_abort_msg("no setting %s", name);
  return -1;
}

/* --- rows ----------------------------------------------------------------- */

START_TEST(rows_are_complete) {
  for (int id = 0; id < CRNET__SETTING_COUNT; id++) {
    const crnet__setting *row = &TABLE[id];
    crnet__setting_value v;
    ck_assert_msg(row->name != NULL, "row %d is missing", id);
    ck_assert_msg(strncmp(row->name, "CRNET_", 6) == 0, "%s", row->name);
    ck_assert_msg(row->doc != NULL && row->doc[0] != '\0', "%s", row->name);
    ck_assert_msg(row->read_by != NULL && row->read_by[0] != '\0', "%s",
                  row->name);
    for (int other = 0; other < id; other++)
      ck_assert_msg(strcmp(TABLE[other].name, row->name) != 0,
                    "%s twice", row->name);
    /* Unset means the default, an error, or what `unset` says. */
    ck_assert_msg((row->default_value != NULL) + (row->missing != NULL) +
                          (row->unset != NULL) ==
                      1,
                  "%s: give one of default_value, missing, unset",
                  row->name);
    if (row->default_value != NULL)
      ck_assert_msg(crnet__setting_parse(id, row->name, row->default_value,
                                         &v, err, sizeof err) == 0,
                    "%s's default: %s", row->name, err);
    if (row->config != CRNET__CONFIG_NONE)
      ck_assert_msg(row->config_field != NULL, "%s", row->name);
    if (row->type == CRNET__SETTING_WORD)
      ck_assert_msg(row->words[0].word != NULL, "%s", row->name);
    if (row->type == CRNET__SETTING_INTEGER && row->what == NULL)
      ck_assert_msg(row->unit != NULL, "%s", row->name);
  }
}
END_TEST

START_TEST(schedule_rows_follow_the_collectives) {
  for (int k = 0; k < CRNET_COLL_COUNT; k++) {
    char want[64];
    size_t n = (size_t)snprintf(want, sizeof want, "CRNET_%s_SCHEDULE",
                                crnet_collective_name((crnet_collective)k));
    for (size_t i = 0; i < n; i++)
      want[i] = (char)toupper((unsigned char)want[i]);
    ck_assert_str_eq(TABLE[CRNET__SET_SCHEDULE + k].name, want);
  }
}
END_TEST

/* --- types ---------------------------------------------------------------- */

/* `text` parses as setting `name`'s value, giving `number` (or seconds). */
static void good(const char *name, const char *text, double number) {
  int id = id_of(name);
  crnet__setting_value v;
  memset(&v, 0, sizeof v);
  ck_assert_msg(crnet__setting_parse(id, name, text, &v, err, sizeof err) ==
                    0,
                "%s='%s' refused: %s", name, text, err);
  if (TABLE[id].type == CRNET__SETTING_SECONDS)
    ck_assert_msg(v.seconds == number, "%s='%s' gave %g", name, text,
                  v.seconds);
  else
    ck_assert_msg(v.number == (long)number, "%s='%s' gave %ld", name, text,
                  v.number);
  ck_assert_ptr_eq(v.text, text);
}

/* `text` is refused with exactly `message`. */
static void bad(const char *name, const char *text, const char *message) {
  crnet__setting_value v;
  ck_assert_msg(crnet__setting_parse(id_of(name), name, text, &v, err,
                                     sizeof err) == CRNET_EINVAL,
                "%s='%s' accepted", name, text);
  ck_assert_str_eq(err, message);
}

START_TEST(integers) {
  good("CRNET_STREAMS", "1", 1);
  good("CRNET_STREAMS", "8", 8);
  good("CRNET_STREAMS", "+3", 3); /* strtol's own syntax, as before */
  bad("CRNET_STREAMS", "0",
      "CRNET_STREAMS='0' is not a number of TCP streams per peer (1 to 8)");
  bad("CRNET_STREAMS", "9",
      "CRNET_STREAMS='9' is not a number of TCP streams per peer (1 to 8)");
  good("CRNET_STREAM_PIECE", "0", 0);
  good("CRNET_STREAM_PIECE", "1073741824", 1 << 30);
  bad("CRNET_STREAM_PIECE", "1073741825",
      "CRNET_STREAM_PIECE='1073741825' is not a number of bytes (0 to 2^30)");
  bad("CRNET_STREAM_PIECE", "64k",
      "CRNET_STREAM_PIECE='64k' is not a number of bytes (0 to 2^30)");
  bad("CRNET_STREAMS_MIN_BYTES", "0",
      "CRNET_STREAMS_MIN_BYTES='0' is not a number of bytes (1 to 2^30)");
  bad("CRNET_SOCKET_BUFFER", "-1",
      "CRNET_SOCKET_BUFFER='-1' is not a number of bytes (0 to 2^30)");
  good("CRNET_SPIN_US", "1000000", 1000000);
  bad("CRNET_SPIN_US", "1000001",
      "CRNET_SPIN_US='1000001' is not a number of microseconds (0 to "
      "1000000)");
  bad("CRNET_SPIN_US", "99999999999999999999999",
      "CRNET_SPIN_US='99999999999999999999999' is not a number of "
      "microseconds (0 to 1000000)");
  bad("CRNET_SPIN_US", "", "CRNET_SPIN_US='' is not a number of "
                           "microseconds (0 to 1000000)");
  good("CRNET_ROUNDS_IN_FLIGHT", "32", 32);
  bad("CRNET_ROUNDS_IN_FLIGHT", "33",
      "CRNET_ROUNDS_IN_FLIGHT='33' is not a number of rounds (1 to 32)");
  bad("CRNET_HOST_CPUS", "0",
      "CRNET_HOST_CPUS='0' is not a number of CPUs (1 to 1024)");
  good("CRNET_RANK", "0", 0);
  good("CRNET_RANK", "2147483647", 2147483647);
  bad("CRNET_RANK", "-1", "CRNET_RANK='-1' is not a rank");
  bad("CRNET_RANK", "x", "CRNET_RANK='x' is not a rank");
  good("CRNET_SIZE", "16777216", 1 << 24);
  bad("CRNET_SIZE", "16777217", "CRNET_SIZE='16777217' is not a job size");
  bad("CRNET_SIZE", "0", "CRNET_SIZE='0' is not a job size");
  /* The name an error gives is the caller's: Slurm's, here. */
  crnet__setting_value v;
  ck_assert_int_eq(crnet__setting_parse(CRNET__SET_SIZE, "SLURM_NTASKS", "y",
                                        &v, err, sizeof err),
                   CRNET_EINVAL);
  ck_assert_str_eq(err, "SLURM_NTASKS='y' is not a job size");
  /* Powers of two only. */
  good("CRNET_SHM_RING_BYTES", "4096", 4096);
  good("CRNET_SHM_RING_BYTES", "67108864", 64 << 20);
  bad("CRNET_SHM_RING_BYTES", "2048",
      "CRNET_SHM_RING_BYTES='2048' is not a power of two from 4096 to "
      "67108864");
  bad("CRNET_SHM_RING_BYTES", "12288",
      "CRNET_SHM_RING_BYTES='12288' is not a power of two from 4096 to "
      "67108864");
  bad("CRNET_SHM_RING_BYTES", "134217728",
      "CRNET_SHM_RING_BYTES='134217728' is not a power of two from 4096 to "
      "67108864");
}
END_TEST

START_TEST(seconds) {
  good("CRNET_INIT_TIMEOUT", "0.5", 0.5);
  good("CRNET_INIT_TIMEOUT", "1e6", 1e6);
  bad("CRNET_INIT_TIMEOUT", "0",
      "CRNET_INIT_TIMEOUT='0' is not a number of seconds");
  bad("CRNET_INIT_TIMEOUT", "1000000.5",
      "CRNET_INIT_TIMEOUT='1000000.5' is not a number of seconds");
  bad("CRNET_INIT_TIMEOUT", "",
      "CRNET_INIT_TIMEOUT='' is not a number of seconds");
  bad("CRNET_INIT_TIMEOUT", "nan",
      "CRNET_INIT_TIMEOUT='nan' is not a number of seconds");
  bad("CRNET_INIT_TIMEOUT", "inf",
      "CRNET_INIT_TIMEOUT='inf' is not a number of seconds");
  bad("CRNET_INIT_TIMEOUT", "5s",
      "CRNET_INIT_TIMEOUT='5s' is not a number of seconds");
  good("CRNET_TIMEOUT", "0", 0);
  good("CRNET_TIMEOUT", "0.001", 0.001);
  bad("CRNET_TIMEOUT", "-1",
      "CRNET_TIMEOUT='-1' is not a number of seconds (0: none)");
  good("CRNET_LIVENESS_TIMEOUT", "0", 0);
  good("CRNET_LIVENESS_TIMEOUT", "1", 1);
  bad("CRNET_LIVENESS_TIMEOUT", "0.5",
      "CRNET_LIVENESS_TIMEOUT='0.5' is not a number of seconds (1 or more; "
      "0: the kernel's TCP timeouts)");
  /* Positive and bounded: 0 would drop every connection at once. */
  good("CRNET_HANDSHAKE_TIMEOUT", "0.1", 0.1);
  good("CRNET_HANDSHAKE_TIMEOUT", "2.5", 2.5);
  good("CRNET_HANDSHAKE_TIMEOUT", "3600", 3600);
  static const char *const bad_handshake[] = {"0",    "-1",  "abc", "0.05",
                                              "3601", "1e9", "nan", "2s"};
  for (size_t i = 0; i < sizeof bad_handshake / sizeof bad_handshake[0]; i++) {
    char want[160];
    snprintf(want, sizeof want,
             "CRNET_HANDSHAKE_TIMEOUT='%s' is not a number of seconds from "
             "0.1 to 3600",
             bad_handshake[i]);
    bad("CRNET_HANDSHAKE_TIMEOUT", bad_handshake[i], want);
  }
}
END_TEST

START_TEST(words) {
  good("CRNET_PROGRESS_THREAD", "0", CRNET_PROGRESS_THREAD_OFF);
  good("CRNET_PROGRESS_THREAD", "1", CRNET_PROGRESS_THREAD_ON);
  good("CRNET_PROGRESS_THREAD", "auto", CRNET_PROGRESS_THREAD_AUTO);
  bad("CRNET_PROGRESS_THREAD", "2",
      "CRNET_PROGRESS_THREAD='2' is not 0, 1 or auto");
  bad("CRNET_LAZY_LINKS", "yes", "CRNET_LAZY_LINKS='yes' is not 0, 1 or auto");
  bad("CRNET_LAZY_LINKS", "AUTO", "CRNET_LAZY_LINKS='AUTO' is not 0, 1 or "
                                  "auto");
  good("CRNET_SHM_SINGLE_COPY", "auto", -1);
  bad("CRNET_SHM_SINGLE_COPY", "2",
      "CRNET_SHM_SINGLE_COPY='2' is not 0, 1 or auto");
  good("CRNET_ENCRYPT", "1", 1);
  bad("CRNET_ENCRYPT", "01", "CRNET_ENCRYPT='01' is not 0 or 1");
  bad("CRNET_ENCRYPT", " 1", "CRNET_ENCRYPT=' 1' is not 0 or 1");
  bad("CRNET_STATS", "yes", "CRNET_STATS='yes' is not 0 or 1");
  good("CRNET_TRANSPORT", "shm", 2);
  bad("CRNET_TRANSPORT", "udp", "CRNET_TRANSPORT='udp' is not auto, tcp or "
                                "shm");
}
END_TEST

START_TEST(texts_addresses_keys) {
  char name[64];
  memset(name, 'a', sizeof name);
  name[31] = '\0';
  good("CRNET_ALLREDUCE_SCHEDULE", name, 0);
  name[31] = 'a';
  name[32] = '\0';
  char want[160];
  snprintf(want, sizeof want, "CRNET_ALLREDUCE_SCHEDULE='%s' is not a "
                              "schedule", name);
  bad("CRNET_ALLREDUCE_SCHEDULE", name, want);
  char iface[200];
  memset(iface, 'e', sizeof iface);
  iface[127] = '\0';
  good("CRNET_IFACE", iface, 0);
  iface[127] = 'e';
  iface[128] = '\0';
  bad("CRNET_IFACE", iface,
      "CRNET_IFACE='eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee...' is too long");

  good("CRNET_RENDEZVOUS", "h:1", 1);
  good("CRNET_RENDEZVOUS", "[::1]:65535", 65535);
  good("CRNET_RENDEZVOUS", "fd77::5:9", 9); /* the last colon's port */
  static const char *const bad_rendezvous[] = {
      "nohostport", "h:0", "h:65536", ":5", "[::1]x", "[]:5", "[::1]:", ""};
  for (size_t i = 0; i < sizeof bad_rendezvous / sizeof bad_rendezvous[0];
       i++) {
    snprintf(want, sizeof want, "CRNET_RENDEZVOUS='%s' is not host:port",
             bad_rendezvous[i]);
    bad("CRNET_RENDEZVOUS", bad_rendezvous[i], want);
  }
  char host[256];
  int port = 0;
  ck_assert_int_eq(crnet__settings_host_port("[fd77::1]:80", host, sizeof host,
                                             &port),
                   0);
  ck_assert_str_eq(host, "fd77::1");
  ck_assert_int_eq(port, 80);

  crnet__setting_value v;
  ck_assert_int_eq(crnet__setting_parse(CRNET__SET_PORT_RANGE,
                                        "CRNET_PORT_RANGE", "1-65535", &v, err,
                                        sizeof err),
                   0);
  ck_assert(v.number == 1 && v.high == 65535);
  good("CRNET_PORT_RANGE", "7-7", 7);
  bad("CRNET_PORT_RANGE", "x", "CRNET_PORT_RANGE='x' is not lo-hi");
  bad("CRNET_PORT_RANGE", "-5", "CRNET_PORT_RANGE='-5' is not lo-hi");
  bad("CRNET_PORT_RANGE", "9-3",
      "CRNET_PORT_RANGE='9-3' is not lo-hi with 1 <= lo <= hi <= 65535");
  bad("CRNET_PORT_RANGE", "0-5",
      "CRNET_PORT_RANGE='0-5' is not lo-hi with 1 <= lo <= hi <= 65535");
  bad("CRNET_PORT_RANGE", "5-",
      "CRNET_PORT_RANGE='5-' is not lo-hi with 1 <= lo <= hi <= 65535");

  /* A key is never echoed. */
  good("CRNET_JOB_KEY",
       "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", 0);
  bad("CRNET_JOB_KEY", "00ff", "CRNET_JOB_KEY is not 64 hex digits");
  good("CRNET_LAUNCHER", "", 0);
}
END_TEST

/* --- read ----------------------------------------------------------------- */

/* A fake environment: "NAME=value" entries, NULL-ended. */
static const char *fake_lookup(const char *name, void *arg) {
  const char *const *env = arg;
  size_t len = strlen(name);
  for (; *env != NULL; env++)
    if (strncmp(*env, name, len) == 0 && (*env)[len] == '=')
      return *env + len + 1;
  return NULL;
}

START_TEST(read_sources) {
  static const char *const env[] = {
      "CRNET_TIMEOUT=bad",    "CRNET_STREAMS=3",     "CRNET_SPIN_US=",
      "CRNET_PROGRESS_THREAD=yes", "CRNET_PORT_RANGE=9-3",
      "CRNET_INIT_TIMEOUT=", "CRNET_TRANSPORT=",    NULL};
  crnet_config cfg;
  crnet__setting_value v;
  crnet_config_init(&cfg);
  void *arg = (void *)env;

  /* The environment, where the config leaves the field unset. */
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_STREAMS, &cfg, fake_lookup,
                                       arg, &v, err, sizeof err),
                   0);
  ck_assert(v.source == CRNET__FROM_ENVIRONMENT && v.number == 3);
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_TIMEOUT, &cfg, fake_lookup,
                                       arg, &v, err, sizeof err),
                   CRNET_EINVAL);
  ck_assert_str_eq(err, "CRNET_TIMEOUT='bad' is not a number of seconds "
                        "(0: none)");
  /* A config field that is set wins, and the variable is not looked at. */
  cfg.timeout = 2.5;
  cfg.progress_thread = CRNET_PROGRESS_THREAD_ON;
  cfg.port_range = "";
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_TIMEOUT, &cfg, fake_lookup,
                                       arg, &v, err, sizeof err),
                   0);
  ck_assert(v.source == CRNET__FROM_CONFIG && v.seconds == 2.5);
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_PROGRESS_THREAD, &cfg,
                                       fake_lookup, arg, &v, err, sizeof err),
                   0);
  ck_assert(v.source == CRNET__FROM_CONFIG &&
            v.number == CRNET_PROGRESS_THREAD_ON);
  /* A config string of "" is unset, and hides the variable. */
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_PORT_RANGE, &cfg,
                                       fake_lookup, arg, &v, err, sizeof err),
                   0);
  ck_assert(v.source == CRNET__FROM_NONE);
  cfg.port_range = "1-2";
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_PORT_RANGE, &cfg,
                                       fake_lookup, arg, &v, err, sizeof err),
                   0);
  ck_assert(v.source == CRNET__FROM_CONFIG && v.number == 1 && v.high == 2);
  /* Without a config, the variables. */
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_PORT_RANGE, NULL,
                                       fake_lookup, arg, &v, err, sizeof err),
                   CRNET_EINVAL);
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_PROGRESS_THREAD, NULL,
                                       fake_lookup, arg, &v, err, sizeof err),
                   CRNET_EINVAL);
  ck_assert_str_eq(err, "CRNET_PROGRESS_THREAD='yes' is not 0, 1 or auto");
  /* Empty: unset for most, a (bad) value for the init timeout. */
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_SPIN_US, NULL, fake_lookup,
                                       arg, &v, err, sizeof err),
                   0);
  ck_assert(v.source == CRNET__FROM_NONE);
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_TRANSPORT, NULL,
                                       fake_lookup, arg, &v, err, sizeof err),
                   0);
  ck_assert(v.source == CRNET__FROM_DEFAULT && v.number == 0);
  ck_assert_str_eq(v.text, "auto");
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_INIT_TIMEOUT, NULL,
                                       fake_lookup, arg, &v, err, sizeof err),
                   CRNET_EINVAL);
  /* Unset: the default, or the row's error. */
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_LIVENESS_TIMEOUT, NULL,
                                       fake_lookup, arg, &v, err, sizeof err),
                   0);
  ck_assert(v.source == CRNET__FROM_DEFAULT && v.seconds == 10);
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_HANDSHAKE_TIMEOUT, NULL,
                                       fake_lookup, arg, &v, err, sizeof err),
                   0);
  ck_assert(v.source == CRNET__FROM_DEFAULT && v.seconds == 10);
  ck_assert_int_eq(crnet__setting_read(CRNET__SET_RENDEZVOUS, NULL,
                                       fake_lookup, arg, &v, err, sizeof err),
                   CRNET_EINVAL);
  ck_assert_str_eq(err, "no rendezvous address: set CRNET_RENDEZVOUS="
                        "host:port (crlaunch does this for you)");
  /* A group stops at its first error, in table order. */
  crnet__setting_value all[CRNET__SETTING_COUNT];
  ck_assert_int_eq(crnet__settings_read(CRNET__READ_INIT, NULL, fake_lookup,
                                        arg, all, err, sizeof err),
                   CRNET_EINVAL);
  ck_assert_str_eq(err, "CRNET_PROGRESS_THREAD='yes' is not 0, 1 or auto");
  static const char *const none[] = {NULL};
  ck_assert_int_eq(crnet__settings_read(CRNET__READ_INIT, NULL, fake_lookup,
                                        (void *)none, all, err, sizeof err),
                   0);
  ck_assert_int_eq(all[CRNET__SET_STREAMS].number, 1);
  ck_assert_str_eq(all[CRNET__SET_SCHEDULE + CRNET_COLL_BCAST].text, "auto");
  /* Every init reads the handshake timeout, and a bad one fails it. */
  static const char *const bad_hs[] = {"CRNET_HANDSHAKE_TIMEOUT=-1", NULL};
  ck_assert_int_eq(crnet__settings_read(CRNET__READ_INIT, NULL, fake_lookup,
                                        (void *)bad_hs, all, err, sizeof err),
                   CRNET_EINVAL);
  ck_assert_str_eq(err, "CRNET_HANDSHAKE_TIMEOUT='-1' is not a number of "
                        "seconds from 0.1 to 3600");
  static const char *const good_hs[] = {"CRNET_HANDSHAKE_TIMEOUT=0.5", NULL};
  ck_assert_int_eq(crnet__settings_read(CRNET__READ_INIT, NULL, fake_lookup,
                                        (void *)good_hs, all, err, sizeof err),
                   0);
  ck_assert(all[CRNET__SET_HANDSHAKE_TIMEOUT].source ==
                CRNET__FROM_ENVIRONMENT &&
            all[CRNET__SET_HANDSHAKE_TIMEOUT].seconds == 0.5);
}
END_TEST

/* --- docs ----------------------------------------------------------------- */

/* Whether `name` is among the table's rows; CRNET_<COLLECTIVE>_SCHEDULE
 * stands for every schedule row. */
static int in_table(const char *name) {
  if (strcmp(name, "CRNET_<COLLECTIVE>_SCHEDULE") == 0)
    return 1;
  for (int id = 0; id < CRNET__SETTING_COUNT; id++)
    if (strcmp(TABLE[id].name, name) == 0)
      return 1;
  return 0;
}

START_TEST(docs_table_matches) {
  const char *path = getenv("CRNET_SETTINGS_DOC");
  ck_assert_msg(path != NULL, "set CRNET_SETTINGS_DOC (meson test does)");
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  static int documented[CRNET__SETTING_COUNT];
  int schedules = 0, rows = 0;
  char line[4096];
  while (fgets(line, sizeof line, f) != NULL) {
    if (line[0] != '|')
      continue;
    /* The first cell names the variables of a row of the table. */
    char *end = strchr(line + 1, '|');
    if (end == NULL)
      continue;
    *end = '\0';
    for (char *p = strstr(line, "CRNET_"); p != NULL;
         p = strstr(p + 1, "CRNET_")) {
      char name[128];
      size_t n = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_<>");
      ck_assert(n < sizeof name);
      memcpy(name, p, n);
      name[n] = '\0';
      ck_assert_msg(in_table(name),
                    "docs/SETTINGS.md names %s, which the table of "
                    "src/runtime/settings.c does not have",
                    name);
      if (strcmp(name, "CRNET_<COLLECTIVE>_SCHEDULE") == 0)
        schedules = 1;
      for (int id = 0; id < CRNET__SETTING_COUNT; id++)
        if (strcmp(TABLE[id].name, name) == 0)
          documented[id] = 1;
      rows++;
    }
  }
  fclose(f);
  ck_assert_msg(rows > 0, "no table in %s", path);
  for (int k = 0; k < CRNET_COLL_COUNT; k++)
    documented[CRNET__SET_SCHEDULE + k] |= schedules;
  for (int id = 0; id < CRNET__SETTING_COUNT; id++)
    ck_assert_msg(documented[id], "%s is not in docs/SETTINGS.md's table",
                  TABLE[id].name);
}
END_TEST

static Suite *settings_suite(void) {
  Suite *s = suite_create("settings");
  TCase *tc = tcase_create("rows");
  tcase_add_test(tc, rows_are_complete);
  tcase_add_test(tc, schedule_rows_follow_the_collectives);
  suite_add_tcase(s, tc);
  tc = tcase_create("types");
  tcase_add_test(tc, integers);
  tcase_add_test(tc, seconds);
  tcase_add_test(tc, words);
  tcase_add_test(tc, texts_addresses_keys);
  suite_add_tcase(s, tc);
  tc = tcase_create("read");
  tcase_add_test(tc, read_sources);
  suite_add_tcase(s, tc);
  tc = tcase_create("docs");
  tcase_add_test(tc, docs_table_matches);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return check_run(settings_suite()); }
