/* Secret memory: slabs of MADV_DONTDUMP pages. See secret.h. */
#include "secret.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc.h"
#include "handshake.h"
#include "log.h"

#define SLOTS 64 /* per slab: one bit each in `used` */
#define SLAB_BYTES ((size_t)SLOTS * CRNET__SECRET_MAX)

/* The bookkeeping is not secret and lives in the ordinary heap. */
typedef struct slab {
  struct slab *next;
  uint8_t *base;
  uint64_t used; /* bit i: slot i is taken */
} slab;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static slab *slabs;

static slab *new_slab(void) {
  slab *s = crnet__calloc(1, sizeof *s);
  if (s == NULL)
    return NULL;
  void *p = mmap(NULL, SLAB_BYTES, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    free(s);
    return NULL;
  }
  /* Without MADV_DONTDUMP (a kernel before 3.4) the memory still works;
   * only the core-file protection is lost, which is worth a line. */
  if (madvise(p, SLAB_BYTES, MADV_DONTDUMP) != 0)
    crnet__debug("cannot keep secrets out of core files (madvise)");
  s->base = p;
  s->next = slabs;
  slabs = s;
  return s;
}

void *crnet__secret_alloc(size_t n) {
  void *p = NULL;
  assert(n <= CRNET__SECRET_MAX);
  if (n > CRNET__SECRET_MAX || crnet__alloc_fails())
    return NULL;
  pthread_mutex_lock(&lock);
  slab *s = slabs;
  while (s != NULL && s->used == UINT64_MAX)
    s = s->next;
  if (s == NULL)
    s = new_slab();
  if (s != NULL) {
    int i = __builtin_ctzll(~s->used);
    s->used |= UINT64_C(1) << i;
    p = s->base + (size_t)i * CRNET__SECRET_MAX;
  }
  pthread_mutex_unlock(&lock);
  /* Fresh pages are zero and freed slots are wiped, so p is zeroed. */
  return p;
}

void crnet__secret_free(void *p) {
  if (p == NULL)
    return;
  pthread_mutex_lock(&lock);
  slab *s = slabs;
  while (s != NULL && !((uint8_t *)p >= s->base &&
                        (uint8_t *)p < s->base + SLAB_BYTES))
    s = s->next;
  assert(s != NULL);
  if (s != NULL) {
    size_t i = (size_t)((uint8_t *)p - s->base) / CRNET__SECRET_MAX;
    crnet__wipe(s->base + i * CRNET__SECRET_MAX, CRNET__SECRET_MAX);
    s->used &= ~(UINT64_C(1) << i);
  }
  pthread_mutex_unlock(&lock);
}

bool crnet__secret_is_undumped(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512];
  bool inside = false, dd = false;
  uintptr_t a = (uintptr_t)p;
  if (f == NULL)
    return false;
  while (fgets(line, sizeof line, f) != NULL) {
    uintptr_t lo, hi;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2) {
      if (inside)
        break; /* past our mapping without a VmFlags line */
      inside = a >= lo && a < hi;
    } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
      dd = strstr(line, " dd") != NULL;
      break;
    }
  }
  fclose(f);
  return dd;
}
