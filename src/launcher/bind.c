/* Binding the ranks of one host to its CPUs. See bind.h. */
#include "bind.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Compact order: package, core, then the core's threads together. */
static int by_place(const void *a, const void *b) {
  const crnet__cpu *x = a, *y = b;
  if (x->package != y->package)
    return x->package < y->package ? -1 : 1;
  if (x->core != y->core)
    return x->core < y->core ? -1 : 1;
  return (x->cpu > y->cpu) - (x->cpu < y->cpu);
}

/* One-per-core order: every core's first thread, then every core's
 * second, ... (thread: the CPU's place among its core's, compact order). */
typedef struct spread_cpu {
  crnet__cpu c;
  int thread;
} spread_cpu;

static int by_spread(const void *a, const void *b) {
  const spread_cpu *x = a, *y = b;
  if (x->thread != y->thread)
    return x->thread < y->thread ? -1 : 1;
  return by_place(&x->c, &y->c);
}

static int by_number(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int crnet__bind_assign(const crnet__cpu *cpus, int n, int nlocal, int local,
                       int *out) {
  spread_cpu *s;
  int k, rem, first, count;
  if (n <= 0 || nlocal <= 0 || local < 0 || local >= nlocal)
    return 0;
  s = malloc(sizeof *s * (size_t)n);
  if (s == NULL)
    return 0;
  for (int i = 0; i < n; i++)
    s[i].c = cpus[i];
  qsort(s, (size_t)n, sizeof *s, by_place);
  for (int i = 0; i < n; i++)
    s[i].thread = i > 0 && s[i].c.package == s[i - 1].c.package &&
                          s[i].c.core == s[i - 1].c.core
                      ? s[i - 1].thread + 1
                      : 0;
  k = n / nlocal;
  if (k >= 2) {
    /* Blocks in compact order; the first n % nlocal one CPU larger. */
    rem = n % nlocal;
    first = local * k + (local < rem ? local : rem);
    count = k + (local < rem);
  } else {
    /* One CPU each (round robin beyond n ranks), one per core first. */
    qsort(s, (size_t)n, sizeof *s, by_spread);
    first = local % n;
    count = 1;
  }
  for (int i = 0; i < count; i++)
    out[i] = s[first + i].c.cpu;
  free(s);
  qsort(out, (size_t)count, sizeof *out, by_number);
  return count;
}

/* An integer from a sysfs file, or `otherwise`. */
static int read_topology(int cpu, const char *what, int otherwise) {
  char path[128];
  FILE *f;
  int v;
  snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s",
           cpu, what);
  f = fopen(path, "r");
  if (f == NULL)
    return otherwise;
  if (fscanf(f, "%d", &v) != 1)
    v = otherwise;
  fclose(f);
  return v;
}

int crnet__bind_plan_init(crnet__bind_plan *p, crnet__bind_mode mode,
                          int nlocal, char *why, size_t whylen) {
  cpu_set_t set;
  int n = 0;
  memset(p, 0, sizeof *p);
  p->mode = mode;
  p->nlocal = nlocal;
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    snprintf(why, whylen, "cannot read this process's CPUs: %s",
             strerror(errno));
    return -1;
  }
  p->ncpus = CPU_COUNT(&set);
  p->cpus = calloc((size_t)(p->ncpus > 0 ? p->ncpus : 1), sizeof *p->cpus);
  if (p->cpus == NULL) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  for (int cpu = 0; cpu < CPU_SETSIZE && n < p->ncpus; cpu++) {
    if (!CPU_ISSET(cpu, &set))
      continue;
    p->cpus[n].cpu = cpu;
    p->cpus[n].package = read_topology(cpu, "physical_package_id", 0);
    p->cpus[n].core = read_topology(cpu, "core_id", cpu);
    n++;
  }
  p->ncpus = n;
  return 0;
}

void crnet__bind_plan_free(crnet__bind_plan *p) {
  free(p->cpus);
  p->cpus = NULL;
}

int crnet__bind_enter(const crnet__bind_plan *p, int local, cpu_set_t *saved,
                      char *desc, size_t desclen) {
  cpu_set_t set;
  int *mine, n, rc;
  if (desclen > 0)
    desc[0] = '\0';
  if (p == NULL || p->cpus == NULL || p->mode == CRNET__BIND_NONE)
    return 1;
  mine = malloc(sizeof *mine * (size_t)(p->ncpus > 0 ? p->ncpus : 1));
  if (mine == NULL) {
    errno = ENOMEM;
    return -1;
  }
  n = crnet__bind_assign(p->cpus, p->ncpus, p->nlocal, local, mine);
  if (n == 0) {
    free(mine);
    return 1;
  }
  CPU_ZERO(&set);
  for (int i = 0; i < n; i++)
    CPU_SET(mine[i], &set);
  crnet__cpu_list_format(mine, n, desc, desclen);
  free(mine);
  /* The thread's own mask: libuv's pool threads keep theirs. */
  rc = pthread_getaffinity_np(pthread_self(), sizeof *saved, saved);
  if (rc == 0)
    rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  return 0;
}

void crnet__bind_leave(const cpu_set_t *saved) {
  pthread_setaffinity_np(pthread_self(), sizeof *saved, saved);
}

void crnet__cpu_list_format(const int *cpus, int n, char *buf, size_t len) {
  size_t at = 0;
  if (len == 0)
    return;
  buf[0] = '\0';
  for (int i = 0; i < n && at < len; i++) {
    int j = i;
    while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
      j++;
    int w = j > i ? snprintf(buf + at, len - at, "%s%d-%d", i ? "," : "",
                             cpus[i], cpus[j])
                  : snprintf(buf + at, len - at, "%s%d", i ? "," : "",
                             cpus[i]);
    if (w < 0)
      break;
    at += (size_t)w;
    i = j;
  }
}
