/* Unit tests of the rendezvous codecs (src/runtime/rendezvous.c): entries,
 * options and the table a rank decodes with crnet__rendezvous_table_decode.
 *
 * Tables are built the way the server builds them (size, rank 0's tuning
 * and options, then every entry) for several job sizes and decoded back;
 * then each part is broken in turn, and the decoder must name it and leave
 * the rank's tuning and options alone. One case is the table the server
 * used to send when a rank registered twice (an empty entry for a rank that
 * never came; tests/fuzz/regress/rendezvous).
 */
#include <check.h>
#include <math.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "crnet.h"
#include "frame.h"
#include "rendezvous.h"
#include "tuning.h"

#define MAX_P 13

static crnet__rendezvous_entry entry_of(int r) {
  crnet__rendezvous_entry e;
  memset(&e, 0, sizeof e);
  e.family = r % 2 ? 6 : 4;
  e.port = (uint16_t)(30000 + r);
  for (int i = 0; i < 16; i++)
    e.addr[i] = (uint8_t)(r * 16 + i);
  e.pid = 1000u + (uint32_t)r;
  snprintf(e.host, sizeof e.host, "node-%d", r);
  for (int i = 0; i < CRNET__RENDEZVOUS_NODE_BYTES; i++)
    e.node[i] = (uint8_t)(r / 2 + i); /* ranks 2k and 2k+1 share a node */
  return e;
}

/* The table of a job of p ranks, as send_table writes it; returns its
 * length. */
static size_t build_table(uint8_t *out, int p, const crnet__tuning *t,
                          const crnet__rendezvous_options *o) {
  crnet__put_le32(out, (uint32_t)p);
  crnet__tuning_encode(t, out + 4);
  crnet__rendezvous_options_encode(o, out + 4 + CRNET__TUNING_WIRE_SIZE);
  for (int r = 0; r < p; r++) {
    crnet__rendezvous_entry e = entry_of(r);
    crnet__rendezvous_entry_encode(&e, out + CRNET__RENDEZVOUS_TABLE_HEAD +
                                           (size_t)r *
                                               CRNET__RENDEZVOUS_ENTRY_SIZE);
  }
  return CRNET__RENDEZVOUS_TABLE_HEAD +
         (size_t)p * CRNET__RENDEZVOUS_ENTRY_SIZE;
}

static uint8_t
    table[CRNET__RENDEZVOUS_TABLE_HEAD + MAX_P * CRNET__RENDEZVOUS_ENTRY_SIZE];

static void defaults(crnet__tuning *t, crnet__rendezvous_options *o) {
  crnet__tuning_defaults(t);
  t->base[CRNET__TUNING_ALPHA] = 7e-6;
  o->streams = 3;
  o->stream_min = 65536;
  o->lazy = 1;
  o->tcp = 1;
  o->board = 13; /* 4096 bytes */
}

START_TEST(test_table_round_trip) {
  static const int sizes[] = {1, 2, 3, 5, 13};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    int p = sizes[k];
    crnet__tuning t, got_t;
    crnet__rendezvous_options o, got_o = {0, 0, 0, 0, 0};
    crnet__rendezvous_entry entries[MAX_P];
    const char *why = NULL;
    size_t len;
    defaults(&t, &o);
    len = build_table(table, p, &t, &o);
    ck_assert_int_eq(crnet__rendezvous_table_decode(table, len, p, "rank 0",
                                                    entries, &got_t, &got_o,
                                                    &why),
                     0);
    ck_assert_ptr_null(why);
    ck_assert_uint_eq(got_o.streams, 3);
    ck_assert_uint_eq(got_o.stream_min, 65536);
    ck_assert_uint_eq(got_o.lazy, 1);
    ck_assert_uint_eq(got_o.tcp, 1);
    ck_assert_uint_eq(got_o.board, 13);
    ck_assert(got_t.base[CRNET__TUNING_ALPHA] == 7e-6);
    ck_assert_str_eq(got_t.source, "rank 0");
    for (int r = 0; r < p; r++)
      ck_assert(!entries[r].gone);
    /* A rank marked gone (rendezvous.h: the tables restarted ranks get)
     * keeps its address, marked. */
    table[CRNET__RENDEZVOUS_TABLE_HEAD + 1] = 1;
    ck_assert_int_eq(crnet__rendezvous_table_decode(table, len, p, "rank 0",
                                                    entries, &got_t, &got_o,
                                                    &why),
                     0);
    ck_assert(entries[0].gone);
    ck_assert_uint_eq(entries[0].port, entry_of(0).port);
    for (int r = 0; r < p; r++) {
      crnet__rendezvous_entry e = entry_of(r);
      ck_assert_uint_eq(entries[r].family, e.family);
      ck_assert_uint_eq(entries[r].port, e.port);
      ck_assert_mem_eq(entries[r].addr, e.addr, 16);
      ck_assert_uint_eq(entries[r].pid, e.pid);
      ck_assert_str_eq(entries[r].host, e.host);
    }
  }
}
END_TEST

/* Breaks a table of 3 ranks with `breakage` and checks the refusal: the
 * reason, and the tuning and options untouched. */
static void expect_refused(void (*breakage)(uint8_t *, size_t *, int *),
                           const char *want_why) {
  crnet__tuning t, got_t;
  crnet__rendezvous_options o, got_o = {12345, 678, 0, 0, 0};
  crnet__rendezvous_entry entries[MAX_P];
  const char *why = NULL;
  size_t len;
  int p = 3;
  defaults(&t, &o);
  len = build_table(table, p, &t, &o);
  breakage(table, &len, &p);
  crnet__tuning_defaults(&got_t);
  snprintf(got_t.source, sizeof got_t.source, "untouched");
  ck_assert_int_eq(crnet__rendezvous_table_decode(
                       table, len, p, "rank 0", entries, &got_t, &got_o, &why),
                   CRNET_EIO);
  ck_assert_ptr_nonnull(why);
  ck_assert_str_eq(why, want_why);
  ck_assert_str_eq(got_t.source, "untouched");
  ck_assert_uint_eq(got_o.streams, 12345);
  ck_assert_uint_eq(got_o.stream_min, 678);
}

static void one_byte_short(uint8_t *tb, size_t *len, int *p) {
  (void)tb;
  (void)p;
  (*len)--;
}
static void one_byte_long(uint8_t *tb, size_t *len, int *p) {
  (void)tb;
  (void)p;
  (*len)++;
}
static void other_job_size(uint8_t *tb, size_t *len, int *p) {
  (void)len;
  (void)p;
  crnet__put_le32(tb, 4);
}
static void rank_expects_more(uint8_t *tb, size_t *len, int *p) {
  (void)tb;
  (void)len;
  *p = 4;
}
/* What the server sent when a rank registered twice: rank 2 never came,
 * its entry is all zero. */
static void empty_entry(uint8_t *tb, size_t *len, int *p) {
  (void)len;
  (void)p;
  memset(tb + CRNET__RENDEZVOUS_TABLE_HEAD + 2 * CRNET__RENDEZVOUS_ENTRY_SIZE,
         0, CRNET__RENDEZVOUS_ENTRY_SIZE);
}
static void entry_port_zero(uint8_t *tb, size_t *len, int *p) {
  (void)len;
  (void)p;
  crnet__put_le16(tb + CRNET__RENDEZVOUS_TABLE_HEAD + 2, 0);
}
/* The byte after the family: 1 marks a rank gone (a table for a
 * restarted rank), anything above is not an entry. */
static void entry_reserved_set(uint8_t *tb, size_t *len, int *p) {
  (void)len;
  (void)p;
  tb[CRNET__RENDEZVOUS_TABLE_HEAD + CRNET__RENDEZVOUS_ENTRY_SIZE + 1] = 2;
}
static void no_streams(uint8_t *tb, size_t *len, int *p) {
  (void)len;
  (void)p;
  crnet__put_le32(tb + 4 + CRNET__TUNING_WIRE_SIZE, 0);
}
static void too_many_streams(uint8_t *tb, size_t *len, int *p) {
  (void)len;
  (void)p;
  crnet__put_le32(tb + 4 + CRNET__TUNING_WIRE_SIZE, CRNET__MAX_STREAMS + 1);
}
static void stream_min_zero(uint8_t *tb, size_t *len, int *p) {
  (void)len;
  (void)p;
  crnet__put_le32(tb + 4 + CRNET__TUNING_WIRE_SIZE + 4, 0);
}
static void alpha_nan(uint8_t *tb, size_t *len, int *p) {
  double nan = NAN;
  uint64_t bits;
  (void)len;
  (void)p;
  memcpy(&bits, &nan, sizeof bits);
  crnet__put_le64(tb + 4, bits);
}

START_TEST(test_table_refusals) {
  expect_refused(one_byte_short, "a table for another job size");
  expect_refused(one_byte_long, "a table for another job size");
  expect_refused(other_job_size, "a table for another job size");
  expect_refused(rank_expects_more, "a table for another job size");
  expect_refused(empty_entry, "a malformed table");
  expect_refused(entry_port_zero, "a malformed table");
  expect_refused(entry_reserved_set, "a malformed table");
  expect_refused(no_streams, "malformed options");
  expect_refused(too_many_streams, "malformed options");
  expect_refused(stream_min_zero, "malformed options");
  expect_refused(alpha_nan, "malformed tuning constants");
}
END_TEST

START_TEST(test_entry_codec) {
  crnet__rendezvous_entry e = entry_of(1), back;
  uint8_t buf[CRNET__RENDEZVOUS_ENTRY_SIZE];
  char text[128];
  /* A host name filling its field loses its last byte to the NUL. */
  memset(e.host, 'h', sizeof e.host - 1);
  e.host[sizeof e.host - 1] = '\0';
  crnet__rendezvous_entry_encode(&e, buf);
  ck_assert_int_eq(crnet__rendezvous_entry_decode(buf, &back), 0);
  ck_assert_str_eq(back.host, e.host);
  memset(buf + 24, 'x', CRNET__RENDEZVOUS_HOST_BYTES);
  ck_assert_int_eq(crnet__rendezvous_entry_decode(buf, &back), 0);
  ck_assert_uint_eq(strlen(back.host), CRNET__RENDEZVOUS_HOST_BYTES - 1);
  crnet__rendezvous_entry_format(&back, text, sizeof text);
  ck_assert_ptr_nonnull(strstr(text, "]:30001)"));
  for (unsigned f = 0; f < 256; f++) {
    buf[0] = (uint8_t)f;
    ck_assert_int_eq(crnet__rendezvous_entry_decode(buf, &back) == 0,
                     f == 4 || f == 6);
  }
}
END_TEST

START_TEST(test_node_codec) {
  crnet__rendezvous_entry a = entry_of(2), b = entry_of(3), c = entry_of(4),
                          back;
  uint8_t buf[CRNET__RENDEZVOUS_ENTRY_SIZE];
  crnet__rendezvous_entry_encode(&a, buf);
  ck_assert_int_eq(crnet__rendezvous_entry_decode(buf, &back), 0);
  ck_assert_mem_eq(back.node, a.node, CRNET__RENDEZVOUS_NODE_BYTES);
  ck_assert_str_eq(back.host, a.host);
  ck_assert_uint_eq(back.pid, a.pid);
  ck_assert(crnet__rendezvous_same_node(&a, &b));
  ck_assert(crnet__rendezvous_same_node(&back, &b));
  ck_assert(!crnet__rendezvous_same_node(&a, &c));
  /* One byte apart, in the boot id or in the namespace: another node. */
  b.node[0] ^= 1;
  ck_assert(!crnet__rendezvous_same_node(&a, &b));
  b.node[0] ^= 1;
  b.node[CRNET__RENDEZVOUS_NODE_BYTES - 1] ^= 0x80;
  ck_assert(!crnet__rendezvous_same_node(&a, &b));
  /* Unknown (zeros) is no node at all, not even its own. */
  memset(a.node, 0, sizeof a.node);
  memset(b.node, 0, sizeof b.node);
  ck_assert(!crnet__rendezvous_same_node(&a, &b));
  ck_assert(!crnet__rendezvous_same_node(&a, &a));
}
END_TEST

/* This process's node: the boot id of the kernel and the inode of its
 * network namespace, as /proc says them. */
START_TEST(test_node_id) {
  uint8_t id[CRNET__RENDEZVOUS_NODE_BYTES], again[CRNET__RENDEZVOUS_NODE_BYTES];
  uint8_t zeros[CRNET__RENDEZVOUS_NODE_BYTES] = {0};
  char text[64];
  struct stat st;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  ck_assert_ptr_nonnull(f);
  ck_assert_ptr_nonnull(fgets(text, sizeof text, f));
  fclose(f);
  ck_assert_int_eq(stat("/proc/self/ns/net", &st), 0);
  crnet__rendezvous_node_id(id);
  crnet__rendezvous_node_id(again);
  ck_assert_mem_eq(id, again, sizeof id);
  ck_assert(memcmp(id, zeros, sizeof id) != 0);
  char hex[3];
  snprintf(hex, sizeof hex, "%02x", id[0]);
  ck_assert_int_eq(strncmp(text, hex, 2), 0);
  snprintf(hex, sizeof hex, "%02x", id[15]);
  ck_assert_int_eq(strncmp(text + 34, hex, 2), 0); /* ...-xxxxxxxxxxXX */
  ck_assert_uint_eq(crnet__get_le64(id + 16), (uint64_t)st.st_ino);
  /* Everything that appears in the table gets an entry with this node. */
  crnet__rendezvous_entry e = entry_of(1), back;
  uint8_t buf[CRNET__RENDEZVOUS_ENTRY_SIZE];
  memcpy(e.node, id, sizeof id);
  crnet__rendezvous_entry_encode(&e, buf);
  ck_assert_int_eq(crnet__rendezvous_entry_decode(buf, &back), 0);
  ck_assert(crnet__rendezvous_same_node(&e, &back));
}
END_TEST

/* A process in a network namespace of its own is another node on the same
 * kernel (the multi-host test bed's hosts): same boot id, another
 * namespace. Making a namespace needs root (CAP_SYS_ADMIN). */
START_TEST(test_node_id_other_namespace) {
  uint8_t mine[CRNET__RENDEZVOUS_NODE_BYTES],
      theirs[CRNET__RENDEZVOUS_NODE_BYTES];
  int fds[2];
  if (geteuid() != 0) {
    printf("test_node_id_other_namespace: not root, cannot make a network "
           "namespace: not run\n");
    return;
  }
  crnet__rendezvous_node_id(mine);
  ck_assert_int_eq(pipe(fds), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    uint8_t id[CRNET__RENDEZVOUS_NODE_BYTES] = {0};
    if (unshare(CLONE_NEWNET) == 0)
      crnet__rendezvous_node_id(id);
    _exit(write(fds[1], id, sizeof id) == (ssize_t)sizeof id ? 0 : 1);
  }
  close(fds[1]);
  ck_assert_int_eq(read(fds[0], theirs, sizeof theirs), (ssize_t)sizeof theirs);
  close(fds[0]);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ck_assert_mem_eq(mine, theirs, 16);
  ck_assert(memcmp(mine + 16, theirs + 16, 8) != 0);
  crnet__rendezvous_entry a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  memcpy(a.node, mine, sizeof mine);
  memcpy(b.node, theirs, sizeof theirs);
  ck_assert(!crnet__rendezvous_same_node(&a, &b));
}
END_TEST

START_TEST(test_options_codec) {
  uint8_t buf[CRNET__RENDEZVOUS_OPTIONS_SIZE];
  crnet__rendezvous_options o = {0}, back;
  for (uint32_t s = 0; s <= CRNET__MAX_STREAMS + 1; s++) {
    o.streams = s;
    o.stream_min = 1;
    crnet__rendezvous_options_encode(&o, buf);
    ck_assert_int_eq(crnet__rendezvous_options_decode(buf, &back) == 0,
                     s >= 1 && s <= CRNET__MAX_STREAMS);
  }
  o.streams = 1;
  o.stream_min = UINT32_MAX;
  crnet__rendezvous_options_encode(&o, buf);
  ck_assert_int_eq(crnet__rendezvous_options_decode(buf, &back), 0);
  ck_assert_uint_eq(back.stream_min, UINT32_MAX);
  ck_assert_uint_eq(back.lazy, 0);
  /* Lazy links travel as a flag; a flag this build does not know is
   * refused rather than ignored. */
  o.lazy = 1;
  crnet__rendezvous_options_encode(&o, buf);
  ck_assert_int_eq(crnet__rendezvous_options_decode(buf, &back), 0);
  ck_assert_uint_eq(back.lazy, 1);
  ck_assert_uint_eq(back.tcp, 0);
  ck_assert_uint_eq(back.streams, 1);
  /* rank 0's TCP-only links, the second flag, on their own */
  o.lazy = 0;
  o.tcp = 1;
  crnet__rendezvous_options_encode(&o, buf);
  ck_assert_int_eq(crnet__rendezvous_options_decode(buf, &back), 0);
  ck_assert_uint_eq(back.tcp, 1);
  ck_assert_uint_eq(back.lazy, 0);
  /* Rank 0's board bytes, log2 + 1 in bits 2-5: up to 4096 bytes (13),
   * and nothing beyond. */
  o.tcp = 0;
  for (uint32_t k = 0; k <= 15; k++) {
    o.board = k;
    crnet__rendezvous_options_encode(&o, buf);
    ck_assert_int_eq(crnet__rendezvous_options_decode(buf, &back) == 0,
                     k <= CRNET__RENDEZVOUS_BOARD_MAX);
    if (k <= CRNET__RENDEZVOUS_BOARD_MAX)
      ck_assert_uint_eq(back.board, k);
  }
  o.board = 0;
  crnet__rendezvous_options_encode(&o, buf);
  buf[2] |= 0x40;
  ck_assert_int_ne(crnet__rendezvous_options_decode(buf, &back), 0);
  buf[2] &= (uint8_t)~0x40;
  buf[3] = 0x80;
  ck_assert_int_ne(crnet__rendezvous_options_decode(buf, &back), 0);
}
END_TEST

static Suite *rendezvous_suite(void) {
  Suite *s = suite_create("rendezvous");
  TCase *tc = tcase_create("codecs");
  tcase_add_test(tc, test_table_round_trip);
  tcase_add_test(tc, test_table_refusals);
  tcase_add_test(tc, test_entry_codec);
  tcase_add_test(tc, test_node_codec);
  tcase_add_test(tc, test_node_id);
  tcase_add_test(tc, test_node_id_other_namespace);
  tcase_add_test(tc, test_options_codec);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return check_run(rendezvous_suite()); }
