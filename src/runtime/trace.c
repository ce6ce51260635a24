/* The trace of one rank. See trace.h. */
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "alloc.h"

/* The file's stdio buffer: events of a few thousand calls before a write. */
#define TRACE_BUFFER (256 * 1024)

struct crnet__trace {
  FILE *f;
  int rank;
  double base_us;   /* real time at open, microseconds */
  uint64_t base_ns; /* uv_hrtime at open */
  char *buf;
  uint64_t events;  /* written so far */
  uint32_t lanes;   /* bit l: lane l's thread is named (the world comm) */
  uint32_t *named;  /* threads of sub-comms named so far, and how many */
  size_t nnamed, named_cap;
};

/* Threads per comm: its calls, then its lanes of rounds. */
#define TIDS_PER_COMM 64

/* Events are separated, not terminated, by commas, so that the closing
 * bracket makes valid JSON. */
static void begin_event(crnet__trace *t) {
  fputs(t->events++ == 0 ? "[\n" : ",\n", t->f);
}

int crnet__trace_path(const char *path, int rank, char *out, size_t n) {
  char num[16];
  size_t len = 0, numlen;
  const char *slash, *dot;
  snprintf(num, sizeof num, "%d", rank);
  numlen = strlen(num);
#define PUT(p, k)                                                              \
  do {                                                                         \
    if (len + (k) >= n)                                                        \
      return -1;                                                               \
    memcpy(out + len, (p), (k));                                               \
    len += (k);                                                                \
  } while (0)
  if (strstr(path, "%r") != NULL) {
    for (const char *p = path; *p != '\0'; p++) {
      if (p[0] == '%' && p[1] == 'r') {
        PUT(num, numlen);
        p++;
      } else {
        PUT(p, 1);
      }
    }
  } else {
    /* The last dot of the file name, not of a directory, and not a
     * leading one (".trace" has no extension). */
    slash = strrchr(path, '/');
    dot = strrchr(slash != NULL ? slash + 1 : path, '.');
    if (dot == (slash != NULL ? slash + 1 : path))
      dot = NULL;
    if (dot == NULL)
      dot = path + strlen(path);
    PUT(path, (size_t)(dot - path));
    PUT(".", 1);
    PUT(num, numlen);
    PUT(dot, strlen(dot));
  }
#undef PUT
  out[len] = '\0';
  return 0;
}

/* s as a JSON string. */
static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s != '\0'; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

static void put_meta(crnet__trace *t, const char *what, int tid,
                     const char *name) {
  begin_event(t);
  fprintf(t->f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"name\":",
          what, t->rank, tid);
  put_string(t->f, name);
  fputs("}}", t->f);
}

int crnet__trace_open(crnet__trace **out, const char *path, int rank,
                      int size, const char *where) {
  crnet__trace *t = crnet__calloc(1, sizeof *t);
  struct timespec now;
  char name[320];
  *out = NULL;
  if (t == NULL)
    return ENOMEM;
  t->f = fopen(path, "w");
  if (t->f == NULL) {
    int e = errno;
    free(t);
    return e;
  }
  t->buf = crnet__malloc(TRACE_BUFFER);
  if (t->buf != NULL)
    setvbuf(t->f, t->buf, _IOFBF, TRACE_BUFFER);
  t->rank = rank;
  clock_gettime(CLOCK_REALTIME, &now);
  t->base_ns = uv_hrtime();
  t->base_us = (double)now.tv_sec * 1e6 + (double)now.tv_nsec / 1e3;
  snprintf(name, sizeof name, "rank %d of %d%s%s", rank, size,
           where[0] != '\0' ? " on " : "", where);
  put_meta(t, "process_name", 0, name);
  begin_event(t);
  fprintf(t->f, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,"
                "\"tid\":0,\"args\":{\"sort_index\":%d}}",
          rank, rank);
  put_meta(t, "thread_name", 0, "collectives");
  /* A rank that dies before its first failed call still leaves a file
   * that names it. */
  fflush(t->f);
  *out = t;
  return 0;
}

static double us_at(const crnet__trace *t, uint64_t ns) {
  return t->base_us + (double)(int64_t)(ns - t->base_ns) / 1e3;
}

/* The thread of comm ctx's calls (lane < 0) or of its rounds on `lane`,
 * named the first time it is used. */
static int64_t thread_of(crnet__trace *t, uint32_t ctx, int64_t lane) {
  int64_t slot = lane < 0 ? 0 : 1 + lane % (TIDS_PER_COMM - 1);
  int64_t tid = (int64_t)ctx * TIDS_PER_COMM + slot;
  char name[64];
  if (ctx == 0) {
    /* The world comm's threads: 0 is named at open, lanes as they come. */
    if (lane < 0 || lane >= 32 || (t->lanes & (1u << lane)))
      return lane < 0 ? 0 : 1 + lane;
    t->lanes |= 1u << lane;
    snprintf(name, sizeof name,
             lane == 0 ? "rounds" : "rounds (lane %u)", (unsigned)lane + 1);
    put_meta(t, "thread_name", (int)(1 + lane), name);
    return 1 + lane;
  }
  for (size_t i = 0; i < t->nnamed; i++)
    if (t->named[i] == (uint32_t)tid)
      return tid;
  if (t->nnamed == t->named_cap) {
    size_t cap = t->named_cap == 0 ? 16 : 2 * t->named_cap;
    uint32_t *v = crnet__realloc(t->named, cap * sizeof *v);
    if (v == NULL)
      return tid; /* unnamed: the events are still right */
    t->named = v;
    t->named_cap = cap;
  }
  t->named[t->nnamed++] = (uint32_t)tid;
  if (slot == 0)
    snprintf(name, sizeof name, "comm %" PRIu32 ": collectives", ctx);
  else if (slot == 1)
    snprintf(name, sizeof name, "comm %" PRIu32 ": rounds", ctx);
  else
    snprintf(name, sizeof name, "comm %" PRIu32 ": rounds (lane %" PRId64 ")",
             ctx, slot);
  put_meta(t, "thread_name", (int)tid, name);
  return tid;
}

void crnet__trace_collective(crnet__trace *t, uint64_t t0, uint64_t t1,
                             const crnet__trace_call *call) {
  int64_t tid = thread_of(t, call->ctx, -1);
  char comm[48] = "";
  if (call->ctx != 0)
    snprintf(comm, sizeof comm, " (comm %" PRIu32 ")", call->ctx);
  begin_event(t);
  fprintf(t->f, "{\"ph\":\"X\",\"cat\":\"collective\",\"name\":\"%s #%" PRIu64
                "%s\",\"pid\":%d,\"tid\":%" PRId64 ",\"ts\":%.3f,"
                "\"dur\":%.3f,\"args\":{\"call\":",
          call->name, call->seq, comm, t->rank, tid, us_at(t, t0),
          (double)(t1 - t0) / 1e3);
  put_string(t->f, call->what);
  if (call->ctx != 0)
    fprintf(t->f, ",\"comm\":%" PRIu32 ",\"comm_rank\":%d,\"comm_size\":%d",
            call->ctx, call->comm_rank, call->comm_size);
  fprintf(t->f, ",\"rounds\":%" PRIu32 ",\"bytes_sent\":%" PRIu64
                ",\"bytes_received\":%" PRIu64 ",\"wait_us\":%.3f,"
                "\"reduce_us\":%.3f,\"result\":\"%s\"}}",
          call->rounds, call->bytes_sent, call->bytes_received,
          (double)call->wait_ns / 1e3, (double)call->reduce_ns / 1e3,
          call->result);
}

void crnet__trace_round_done(crnet__trace *t, uint64_t t0, uint64_t t1,
                             const crnet__trace_round *r) {
  int64_t tid = thread_of(t, r->ctx, r->lane);
  begin_event(t);
  fprintf(t->f, "{\"ph\":\"X\",\"cat\":\"round\",\"name\":\"round %" PRIu32
                "\",\"pid\":%d,\"tid\":%" PRId64 ",\"ts\":%.3f,\"dur\":%.3f,"
                "\"args\":{\"to\":%d,\"bytes_sent\":%" PRIu64
                ",\"from\":%d,\"bytes_received\":%" PRIu64
                ",\"wait_us\":%.3f,\"reduce_us\":%.3f}}",
          r->k, t->rank, tid, us_at(t, t0), (double)(t1 - t0) / 1e3,
          r->to, r->bytes_sent, r->from, r->bytes_received,
          (double)r->wait_ns / 1e3, (double)r->reduce_ns / 1e3);
}

void crnet__trace_flush(crnet__trace *t) {
  fflush(t->f);
}

void crnet__trace_close(crnet__trace *t) {
  if (t == NULL)
    return;
  fputs("\n]\n", t->f);
  fclose(t->f);
  free(t->buf);
  free(t->named);
  free(t);
}
