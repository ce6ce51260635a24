/* The rendezvous server and the address-table encoding. See rendezvous.h.
 *
 * Expected workload: p connections, each sending one small frame, then one
 * table of p entries going back to each: O(p^2) bytes in all, which is fine
 * to p = 10^4 on one host. Every connection is a link (link.h), so the
 * handshake and framing are exactly those of the mesh. */
#include "rendezvous.h"
#include "secret.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "crnet.h"
#include "frame.h"
#include "link.h"
#include "log.h"
#include "netaddr.h"

#define LINGER_MS 2000

typedef struct rdv_conn {
  crnet__link link;
  struct rdv_conn *next, *prev;
  crnet__rendezvous_server *srv;
  int rank; /* registered rank, or -1 */
} rdv_conn;

struct crnet__rendezvous_server {
  uv_loop_t *loop;
  uv_tcp_t listener;
  uv_timer_t timer;
  uint8_t *key; /* CRNET__KEY_BYTES, in secret memory */
  int size;
  double timeout_s;
  uint64_t handshake_ms; /* a connection's time to authenticate */
  int nregistered;
  crnet__rendezvous_entry *entries;
  crnet__tuning tuning; /* rank 0's, once it has registered */
  crnet__rendezvous_options options; /* rank 0's, likewise */
  rdv_conn **by_rank;
  rdv_conn *conns; /* every open connection */
  /* Joins (crnet__rendezvous_server_allow_joins): entries has size +
   * restarts slots; joined of them are taken, slot size + k by a restart
   * of job index joined_as[k]. */
  int restarts, joined;
  int *joined_as;
  crnet__rendezvous_done_cb cb;
  void *arg;
  bool finished; /* table or error sent, callback made */
  bool closing;
  int open_handles; /* listener + timer + connections */
};

void crnet__rendezvous_entry_encode(const crnet__rendezvous_entry *e,
                                    uint8_t *out) {
  memset(out, 0, CRNET__RENDEZVOUS_ENTRY_SIZE);
  out[0] = e->family;
  out[1] = e->gone ? 1 : 0;
  crnet__put_le16(out + 2, e->port);
  memcpy(out + 4, e->addr, 16);
  crnet__put_le32(out + 20, e->pid);
  memcpy(out + 24, e->host, strnlen(e->host, CRNET__RENDEZVOUS_HOST_BYTES - 1));
  memcpy(out + 24 + CRNET__RENDEZVOUS_HOST_BYTES, e->node,
         CRNET__RENDEZVOUS_NODE_BYTES);
}

int crnet__rendezvous_entry_decode(const uint8_t *in,
                                   crnet__rendezvous_entry *e) {
  memset(e, 0, sizeof *e);
  e->family = in[0];
  if ((e->family != 4 && e->family != 6) || in[1] > 1)
    return CRNET_EIO;
  e->gone = in[1] == 1;
  e->port = crnet__get_le16(in + 2);
  if (e->port == 0)
    return CRNET_EIO;
  memcpy(e->addr, in + 4, 16);
  e->pid = crnet__get_le32(in + 20);
  memcpy(e->host, in + 24, CRNET__RENDEZVOUS_HOST_BYTES - 1);
  e->host[CRNET__RENDEZVOUS_HOST_BYTES - 1] = '\0';
  memcpy(e->node, in + 24 + CRNET__RENDEZVOUS_HOST_BYTES,
         CRNET__RENDEZVOUS_NODE_BYTES);
  return 0;
}

/* The 16 bytes of a boot id's text ("xxxxxxxx-xxxx-...", 32 hex digits
 * and dashes); false if it is not one. */
static bool parse_boot_id(const char *text, uint8_t out[16]) {
  int n = 0;
  for (const char *p = text; *p != '\0' && *p != '\n'; p++) {
    int v;
    if (*p == '-')
      continue;
    if (*p >= '0' && *p <= '9')
      v = *p - '0';
    else if (*p >= 'a' && *p <= 'f')
      v = *p - 'a' + 10;
    else if (*p >= 'A' && *p <= 'F')
      v = *p - 'A' + 10;
    else
      return false;
    if (n >= 32)
      return false;
    if (n % 2 == 0)
      out[n / 2] = (uint8_t)(v << 4);
    else
      out[n / 2] |= (uint8_t)v;
    n++;
  }
  return n == 32;
}

void crnet__rendezvous_node_id(uint8_t out[CRNET__RENDEZVOUS_NODE_BYTES]) {
  char text[64] = "";
  struct stat st;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  bool ok = f != NULL && fgets(text, sizeof text, f) != NULL &&
            parse_boot_id(text, out) && stat("/proc/self/ns/net", &st) == 0;
  if (f != NULL)
    fclose(f);
  if (!ok) {
    memset(out, 0, CRNET__RENDEZVOUS_NODE_BYTES);
    return;
  }
  crnet__put_le64(out + 16, (uint64_t)st.st_ino);
}

bool crnet__rendezvous_same_node(const crnet__rendezvous_entry *a,
                                 const crnet__rendezvous_entry *b) {
  static const uint8_t unknown[CRNET__RENDEZVOUS_NODE_BYTES];
  return memcmp(a->node, unknown, sizeof unknown) != 0 &&
         memcmp(a->node, b->node, sizeof unknown) == 0;
}

bool crnet__rendezvous_same_kernel(const crnet__rendezvous_entry *a,
                                   const crnet__rendezvous_entry *b) {
  static const uint8_t unknown[16];
  return memcmp(a->node, unknown, sizeof unknown) != 0 &&
         memcmp(a->node, b->node, sizeof unknown) == 0;
}

void crnet__rendezvous_options_encode(const crnet__rendezvous_options *o,
                                      uint8_t *out) {
  crnet__put_le16(out, (uint16_t)o->streams);
  crnet__put_le16(out + 2,
                  (uint16_t)((o->lazy != 0 ? 1 : 0) | (o->tcp != 0 ? 2 : 0) |
                             (o->board & 15) << 2));
  crnet__put_le32(out + 4, o->stream_min);
}

int crnet__rendezvous_options_decode(const uint8_t *in,
                                     crnet__rendezvous_options *o) {
  uint16_t flags = crnet__get_le16(in + 2);
  o->streams = crnet__get_le16(in);
  o->stream_min = crnet__get_le32(in + 4);
  o->lazy = flags & 1;
  o->tcp = flags >> 1 & 1;
  o->board = flags >> 2 & 15;
  if (o->streams < 1 || o->streams > CRNET__MAX_STREAMS || o->stream_min < 1 ||
      (flags & ~0x3fu) != 0 || o->board > CRNET__RENDEZVOUS_BOARD_MAX)
    return CRNET_EIO;
  return 0;
}

int crnet__rendezvous_table_decode(const uint8_t *in, uint64_t len,
                                   int32_t size, const char *source,
                                   crnet__rendezvous_entry *entries,
                                   crnet__tuning *tuning,
                                   crnet__rendezvous_options *options,
                                   const char **why) {
  crnet__rendezvous_options o;
  if (size < 1 ||
      len != CRNET__RENDEZVOUS_TABLE_HEAD +
                 (uint64_t)size * CRNET__RENDEZVOUS_ENTRY_SIZE ||
      crnet__get_le32(in) != (uint32_t)size) {
    *why = "a table for another job size";
    return CRNET_EIO;
  }
  for (int32_t r = 0; r < size; r++) {
    if (crnet__rendezvous_entry_decode(in + CRNET__RENDEZVOUS_TABLE_HEAD +
                                           (size_t)r *
                                               CRNET__RENDEZVOUS_ENTRY_SIZE,
                                       &entries[r]) != 0) {
      *why = "a malformed table";
      return CRNET_EIO;
    }
  }
  if (crnet__rendezvous_options_decode(in + 4 + CRNET__TUNING_WIRE_SIZE, &o) !=
      0) {
    *why = "malformed options";
    return CRNET_EIO;
  }
  if (crnet__tuning_decode(in + 4, source, tuning) != 0) {
    *why = "malformed tuning constants";
    return CRNET_EIO;
  }
  *options = o;
  return 0;
}

void crnet__rendezvous_entry_format(const crnet__rendezvous_entry *e, char *buf,
                                    size_t n) {
  char ip[64] = "?";
  if (e->family == 4)
    uv_inet_ntop(AF_INET, e->addr, ip, sizeof ip);
  else if (e->family == 6)
    uv_inet_ntop(AF_INET6, e->addr, ip, sizeof ip);
  snprintf(buf, n, e->family == 6 ? "%s ([%s]:%u)" : "%s (%s:%u)",
           e->host[0] ? e->host : "?", ip, (unsigned)e->port);
}

/* --- lifetime ------------------------------------------------------------- */

static void server_release(crnet__rendezvous_server *srv) {
  if (--srv->open_handles > 0)
    return;
  crnet__secret_free(srv->key);
  srv->key = NULL;
  free(srv->entries);
  free(srv->by_rank);
  free(srv->joined_as);
  free(srv);
}

static void server_handle_closed(uv_handle_t *h) { server_release(h->data); }

static void conn_closed(crnet__link *l) {
  rdv_conn *c = (rdv_conn *)l;
  crnet__rendezvous_server *srv = c->srv;
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next != NULL)
    c->next->prev = c->prev;
  if (c->rank >= 0 && srv->by_rank[c->rank] == c)
    srv->by_rank[c->rank] = NULL;
  free(c);
  server_release(srv);
}

static void drop(rdv_conn *c, const char *why) {
  crnet__log("rendezvous: dropped connection from %s: %s", c->link.addr, why);
  if (c->rank >= 0 && c->srv->by_rank[c->rank] == c)
    c->srv->by_rank[c->rank] = NULL;
  crnet__link_close(&c->link);
}

/* --- the protocol ---------------------------------------------------------- */

static void finish(crnet__rendezvous_server *srv, int status,
                   const int *missing, int nmissing) {
  srv->finished = true;
  uv_timer_stop(&srv->timer);
  srv->cb(srv, status, missing, nmissing, srv->arg);
}

/* The table of the first n slots at out (TABLE_HEAD + n entries). */
static void encode_table(const crnet__rendezvous_server *srv, int n,
                         uint8_t *out) {
  crnet__put_le32(out, (uint32_t)n);
  crnet__tuning_encode(&srv->tuning, out + 4);
  crnet__rendezvous_options_encode(&srv->options,
                                   out + 4 + CRNET__TUNING_WIRE_SIZE);
  for (int r = 0; r < n; r++)
    crnet__rendezvous_entry_encode(
        &srv->entries[r], out + CRNET__RENDEZVOUS_TABLE_HEAD +
                              (size_t)r * CRNET__RENDEZVOUS_ENTRY_SIZE);
}

static void send_table(crnet__rendezvous_server *srv) {
  size_t len = CRNET__RENDEZVOUS_TABLE_HEAD +
               (size_t)srv->size * CRNET__RENDEZVOUS_ENTRY_SIZE;
  uint8_t *table = crnet__malloc(len);
  int missing_none = 0;
  if (table == NULL) {
    finish(srv, CRNET_ENOMEM, &missing_none, 0);
    return;
  }
  encode_table(srv, srv->size, table);
  for (int r = 0; r < srv->size; r++) {
    rdv_conn *c = srv->by_rank[r];
    if (c == NULL)
      continue;
    crnet__link_send_control(&c->link, CRNET__FRAME_RENDEZVOUS_TABLE, table,
                             len);
    /* The rank closes once it has the table; closing gently on our side too
     * flushes the table before FIN. */
    crnet__link_close_gently(&c->link, LINGER_MS);
  }
  free(table);
  finish(srv, 0, NULL, 0);
}

static void refuse(rdv_conn *c, const char *text) {
  crnet__log("rendezvous: refused connection from %s: %s", c->link.addr, text);
  crnet__link_send_control(&c->link, CRNET__FRAME_RENDEZVOUS_ERROR, text,
                           strlen(text));
  crnet__link_close_gently(&c->link, LINGER_MS);
}

/* A restarted rank of job index `index` joins with entry e (see
 * crnet__rendezvous_server_allow_joins). */
static void take_join(rdv_conn *c, uint32_t index,
                      const crnet__rendezvous_entry *e) {
  crnet__rendezvous_server *srv = c->srv;
  char why[160];
  int slot;
  size_t len;
  uint8_t *msg;
  if (!srv->finished || srv->entries[0].family == 0) {
    refuse(c, "a restarted rank came before every rank had started");
    return;
  }
  if (srv->joined >= srv->restarts) {
    snprintf(why, sizeof why,
             "rank %u restarted, but the job's %d restart%s %s been used",
             (unsigned)index, srv->restarts, srv->restarts == 1 ? "" : "s",
             srv->restarts == 1 ? "has" : "have");
    refuse(c, why);
    return;
  }
  slot = srv->size + srv->joined;
  len = 4 + CRNET__RENDEZVOUS_TABLE_HEAD +
        (size_t)(slot + 1) * CRNET__RENDEZVOUS_ENTRY_SIZE;
  msg = crnet__malloc(len);
  if (msg == NULL) {
    drop(c, "out of memory");
    return;
  }
  srv->joined_as[srv->joined++] = (int)index;
  srv->entries[slot] = *e;
  srv->entries[slot].gone = false;
  crnet__put_le32(msg, (uint32_t)slot);
  encode_table(srv, slot + 1, msg + 4);
  crnet__debug("rendezvous: rank %u restarted, joins as job rank %d",
               (unsigned)index, slot);
  crnet__link_send_control(&c->link, CRNET__FRAME_RENDEZVOUS_JOINED, msg, len);
  crnet__link_close_gently(&c->link, LINGER_MS);
  free(msg);
}

static void on_conn_control(crnet__link *l, const crnet__frame_header *h,
                            const uint8_t *payload) {
  rdv_conn *c = (rdv_conn *)l;
  crnet__rendezvous_server *srv = c->srv;
  crnet__rendezvous_entry e;
  crnet__tuning tuning;
  crnet__rendezvous_options options;
  char why[128];
  uint32_t rank, size;
  if (h->kind != CRNET__FRAME_RENDEZVOUS_REGISTER &&
      (h->kind != CRNET__FRAME_RENDEZVOUS_JOIN || srv->restarts == 0)) {
    drop(c, "unexpected frame");
    return;
  }
  if (h->length != CRNET__RENDEZVOUS_REGISTER_SIZE) {
    /* Most likely a rank built from another version of crnet. */
    snprintf(why, sizeof why,
             "a registration of %llu bytes, not %d (another crnet version?)",
             (unsigned long long)h->length, CRNET__RENDEZVOUS_REGISTER_SIZE);
    drop(c, why);
    return;
  }
  rank = crnet__get_le32(payload);
  size = crnet__get_le32(payload + 4);
  if (crnet__rendezvous_entry_decode(payload + 8, &e) != 0 ||
      crnet__tuning_decode(payload + 8 + CRNET__RENDEZVOUS_ENTRY_SIZE, "rank 0",
                           &tuning) != 0 ||
      crnet__rendezvous_options_decode(
          payload + 8 + CRNET__RENDEZVOUS_ENTRY_SIZE + CRNET__TUNING_WIRE_SIZE,
          &options) != 0) {
    drop(c, "malformed registration");
    return;
  }
  if (rank != (uint32_t)l->peer || size != (uint32_t)srv->size) {
    drop(c, "registration disagrees with the handshake");
    return;
  }
  if (h->kind == CRNET__FRAME_RENDEZVOUS_JOIN) {
    take_join(c, rank, &e);
    return;
  }
  if (srv->finished) {
    drop(c, "registration after the rendezvous ended");
    return;
  }
  /* A rank whose connection has gone since it registered still counts as
   * registered (its entry stays, and so does its place in nregistered), so
   * it cannot register again either. */
  if (srv->by_rank[rank] != NULL || c->rank >= 0 ||
      srv->entries[rank].family != 0) {
    snprintf(why, sizeof why, "rank %u registered twice", (unsigned)rank);
    drop(c, why);
    return;
  }
  c->rank = (int)rank;
  srv->by_rank[rank] = c;
  srv->entries[rank] = e;
  if (rank == 0) {
    srv->tuning = tuning;
    srv->options = options;
  }
  srv->nregistered++;
  crnet__debug("rendezvous: rank %u registered from %s (%d of %d)",
               (unsigned)rank, l->addr, srv->nregistered, srv->size);
  if (srv->nregistered == srv->size)
    send_table(srv);
}

static void on_conn_ready(crnet__link *l, int status) {
  rdv_conn *c = (rdv_conn *)l;
  if (status != 0) {
    drop(c, l->why);
    return;
  }
  if (l->purpose != CRNET__HS_RENDEZVOUS)
    drop(c, "not a rendezvous connection");
}

static void on_conn_error(crnet__link *l, int status, const char *why) {
  rdv_conn *c = (rdv_conn *)l;
  (void)status;
  /* A registered rank that goes away before the table is out has died or
   * given up; it will not get the table, which its launcher reports. */
  if (c->rank >= 0 && !c->srv->finished)
    crnet__log("rendezvous: rank %d left before the rendezvous completed: %s",
               c->rank, why);
  if (c->rank >= 0 && c->srv->by_rank[c->rank] == c)
    c->srv->by_rank[c->rank] = NULL;
  crnet__link_close(l);
}

static const crnet__link_callbacks conn_callbacks = {
    .on_ready = on_conn_ready,
    .on_control = on_conn_control,
    .on_error = on_conn_error,
    .on_closed = conn_closed,
};

static void on_connection(uv_stream_t *server, int status) {
  crnet__rendezvous_server *srv = server->data;
  rdv_conn *c;
  if (status < 0 || srv->closing)
    return;
  c = crnet__calloc(1, sizeof *c);
  if (c == NULL)
    return;
  c->srv = srv;
  c->rank = -1;
  c->next = srv->conns;
  if (srv->conns != NULL)
    srv->conns->prev = c;
  srv->conns = c;
  srv->open_handles++;
  /* On failure the link closes itself and conn_closed frees c. */
  crnet__link_accept(&c->link, srv->loop, server, &conn_callbacks, srv,
                     srv->key, CRNET__RANK_RENDEZVOUS, srv->size,
                     srv->handshake_ms);
  /* Each rank's connection is encrypted if that rank asks for it: the
   * server (in crlaunch, say) need not know the job's CRNET_ENCRYPT, and
   * ranks that disagree are refused on the mesh. */
  crnet__link_set_encrypt(&c->link, CRNET__HS_FOLLOW);
}

static void on_timeout(uv_timer_t *t) {
  crnet__rendezvous_server *srv = t->data;
  int *missing = crnet__malloc(sizeof(int) * (size_t)srv->size);
  int nmissing = 0;
  char msg[512];
  size_t used;
  if (srv->finished || missing == NULL) {
    free(missing);
    return;
  }
  for (int r = 0; r < srv->size; r++)
    if (srv->entries[r].family == 0)
      missing[nmissing++] = r;
  used = (size_t)snprintf(msg, sizeof msg, "rank%s", nmissing > 1 ? "s" : "");
  for (int i = 0; i < nmissing && used < sizeof msg - 32; i++)
    used += (size_t)snprintf(msg + used, sizeof msg - used, "%s %d",
                             i > 0 ? "," : "", missing[i]);
  if (used >= sizeof msg - 32)
    used += (size_t)snprintf(msg + used, sizeof msg - used, " ...");
  snprintf(msg + used, sizeof msg - used,
           " never reached the rendezvous within %g s", srv->timeout_s);
  for (int r = 0; r < srv->size; r++) {
    rdv_conn *c = srv->by_rank[r];
    if (c == NULL)
      continue;
    crnet__link_send_control(&c->link, CRNET__FRAME_RENDEZVOUS_ERROR, msg,
                             strlen(msg));
    crnet__link_close_gently(&c->link, LINGER_MS);
  }
  finish(srv, CRNET_ETIMEDOUT, missing, nmissing);
  free(missing);
}

static int parse_bind(const char *host, int port, struct sockaddr_storage *ss) {
  if (host == NULL)
    host = "127.0.0.1";
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)ss) == 0)
    return 0;
  if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss) == 0)
    return 0;
  return CRNET_EINVAL;
}

int crnet__rendezvous_server_start(crnet__rendezvous_server **out,
                                   uv_loop_t *loop,
                                   const uint8_t key[CRNET__KEY_BYTES],
                                   int size, const char *bind_host, int port,
                                   double timeout_s, double handshake_s,
                                   crnet__rendezvous_done_cb cb, void *arg) {
  struct sockaddr_storage ss;
  char why[128];
  int rc;
  *out = NULL;
  if (port < 0 || port > 65535 || parse_bind(bind_host, port, &ss) != 0)
    return CRNET_EINVAL;
  rc = crnet__rendezvous_server_listen(out, loop, key, size,
                                       (struct sockaddr *)&ss, timeout_s,
                                       handshake_s, cb, arg, why, sizeof why);
  if (rc == CRNET_EIO)
    crnet__log("rendezvous: cannot listen on %s:%d: %s",
               bind_host ? bind_host : "127.0.0.1", port, why);
  return rc;
}

int crnet__rendezvous_server_listen(crnet__rendezvous_server **out,
                                    uv_loop_t *loop,
                                    const uint8_t key[CRNET__KEY_BYTES],
                                    int size, const struct sockaddr *addr,
                                    double timeout_s, double handshake_s,
                                    crnet__rendezvous_done_cb cb, void *arg,
                                    char *why, size_t why_len) {
  crnet__rendezvous_server *srv;
  int rc;
  *out = NULL;
  if (size < 1 || timeout_s <= 0 || !(handshake_s > 0) || cb == NULL ||
      addr == NULL ||
      (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
    return CRNET_EINVAL;
  srv = crnet__calloc(1, sizeof *srv);
  if (srv == NULL)
    return CRNET_ENOMEM;
  srv->entries = crnet__calloc((size_t)size, sizeof *srv->entries);
  srv->by_rank = crnet__calloc((size_t)size, sizeof *srv->by_rank);
  srv->key = crnet__secret_alloc(CRNET__KEY_BYTES);
  if (srv->entries == NULL || srv->by_rank == NULL || srv->key == NULL) {
    crnet__secret_free(srv->key);
    free(srv->entries);
    free(srv->by_rank);
    free(srv);
    return CRNET_ENOMEM;
  }
  srv->loop = loop;
  memcpy(srv->key, key, CRNET__KEY_BYTES);
  srv->size = size;
  srv->timeout_s = timeout_s;
  srv->handshake_ms = (uint64_t)(handshake_s * 1000.0 + 0.5);
  srv->cb = cb;
  srv->arg = arg;
  uv_tcp_init(loop, &srv->listener);
  uv_timer_init(loop, &srv->timer);
  srv->listener.data = srv;
  srv->timer.data = srv;
  srv->open_handles = 2;
  /* Without UV_TCP_IPV6ONLY libuv clears IPV6_V6ONLY, so :: is dual stack. */
  rc = uv_tcp_bind(&srv->listener, addr, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection);
  if (rc != 0) {
    if (why != NULL)
      snprintf(why, why_len, "%s", uv_strerror(rc));
    srv->closing = true;
    uv_close((uv_handle_t *)&srv->listener, server_handle_closed);
    uv_close((uv_handle_t *)&srv->timer, server_handle_closed);
    return CRNET_EIO;
  }
  uv_timer_start(&srv->timer, on_timeout, (uint64_t)(timeout_s * 1000.0), 0);
  *out = srv;
  return 0;
}

int crnet__rendezvous_server_allow_joins(crnet__rendezvous_server *srv,
                                         int restarts) {
  crnet__rendezvous_entry *entries;
  int *as;
  if (restarts <= 0 || srv->restarts > 0)
    return 0;
  entries = crnet__realloc(srv->entries,
                           sizeof *entries * (size_t)(srv->size + restarts));
  if (entries == NULL)
    return CRNET_ENOMEM;
  srv->entries = entries;
  memset(entries + srv->size, 0, sizeof *entries * (size_t)restarts);
  as = crnet__calloc((size_t)restarts, sizeof *as);
  if (as == NULL)
    return CRNET_ENOMEM;
  srv->joined_as = as;
  srv->restarts = restarts;
  return 0;
}

void crnet__rendezvous_server_lost(crnet__rendezvous_server *srv, int index,
                                   uint32_t pid) {
  if (srv == NULL || index < 0 || index >= srv->size)
    return;
  if (pid == 0 || srv->entries[index].pid == pid)
    srv->entries[index].gone = true;
  for (int k = 0; k < srv->joined; k++)
    if (srv->joined_as[k] == index &&
        (pid == 0 || srv->entries[srv->size + k].pid == pid))
      srv->entries[srv->size + k].gone = true;
}

int crnet__rendezvous_server_port(const crnet__rendezvous_server *srv) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  if (uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len) != 0)
    return -1;
  return crnet__addr_port((struct sockaddr *)&ss);
}

void crnet__rendezvous_server_close(crnet__rendezvous_server *srv) {
  if (srv == NULL || srv->closing)
    return;
  srv->closing = true;
  uv_close((uv_handle_t *)&srv->listener, server_handle_closed);
  uv_close((uv_handle_t *)&srv->timer, server_handle_closed);
  for (rdv_conn *c = srv->conns; c != NULL; c = c->next)
    crnet__link_close_gently(&c->link, LINGER_MS);
}
