/* Info objects: the (key, value) strings a program passes as hints.
 *
 * An info is a handle into a table of lists of pairs, in the order the keys
 * were first set (MPI_Info_get_nthkey counts in that order). The calls that
 * take an info (MPI_Comm_split_type, MPI_Alloc_mem, MPI_Comm_dup_with_info,
 * MPI_Comm_set_info) accept any valid one and use none of its hints, which
 * MPI allows; MPI_Comm_get_info gives a new, empty info, since no hint is in
 * use.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

#define INFOS_MAX                                                              \
  1024 /* a power of two: a handle is slot | gen << SLOT_BITS                  \
        */
#define SLOT_BITS 10
#define GEN_MAX ((1u << (31 - SLOT_BITS)) - 1)

typedef struct pair {
  struct pair *next;
  char *key, *value;
} pair;

typedef struct info_obj {
  bool live;
  uint32_t gen; /* raised by every new info in the slot (as types.c's) */
  pair *pairs;  /* in the order the keys were first set */
} info_obj;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static info_obj infos[INFOS_MAX]; /* [0]: MPI_INFO_NULL, never live */

static uint32_t next_slot = 1; /* a freed slot is the last used again */

/* The slot of handle h, or -1 if it names no live info (a freed handle
 * never names a later info of its slot). Under lock. */
static int slot_of(MPI_Info h) {
  uint32_t s = (uint32_t)h & (INFOS_MAX - 1);
  if (h <= 0 || s == 0)
    return -1;
  return infos[s].live && infos[s].gen == (uint32_t)h >> SLOT_BITS ? (int)s
                                                                   : -1;
}

static int fail(const char *fn, int cls, const char *what) {
  return crnet_mpi_fail(MPI_COMM_NULL, fn, cls, "%s", what);
}

/* The info behind h with the lock taken; or NULL, the lock not held and
 * MPI_ERR_INFO raised in *rc. */
static info_obj *locked(MPI_Info h, const char *fn, int *rc) {
  pthread_mutex_lock(&lock);
  int s = slot_of(h);
  if (s >= 0)
    return &infos[s];
  pthread_mutex_unlock(&lock);
  *rc = fail(fn, MPI_ERR_INFO, "no such info object");
  return NULL;
}

bool crnet_mpi_info_valid(MPI_Info h) {
  bool ok;
  if (h == MPI_INFO_NULL)
    return true;
  pthread_mutex_lock(&lock);
  ok = slot_of(h) >= 0;
  pthread_mutex_unlock(&lock);
  return ok;
}

/* A key MPI accepts: 1 to MPI_MAX_INFO_KEY - 1 characters. */
static int check_key(const char *fn, const char *key) {
  size_t n;
  if (key == NULL)
    return fail(fn, MPI_ERR_ARG, "key is NULL");
  n = strlen(key);
  if (n == 0 || n >= MPI_MAX_INFO_KEY)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_INFO_KEY,
                          "a key of %zu characters (1 to %d)", n,
                          MPI_MAX_INFO_KEY - 1);
  return MPI_SUCCESS;
}

static pair *find(const info_obj *in, const char *key) {
  for (pair *q = in->pairs; q != NULL; q = q->next)
    if (strcmp(q->key, key) == 0)
      return q;
  return NULL;
}

static void free_pairs(pair *q) {
  while (q != NULL) {
    pair *next = q->next;
    free(q->key);
    free(q->value);
    free(q);
    q = next;
  }
}

/* A free handle, marked live: MPI_SUCCESS or MPI_ERR_NO_MEM. Under lock. */
static int take_handle(MPI_Info *out) {
  for (uint32_t k = 0; k < INFOS_MAX - 1; k++) {
    uint32_t i = 1 + (next_slot - 1 + k) % (INFOS_MAX - 1);
    if (infos[i].live)
      continue;
    infos[i].live = true;
    infos[i].pairs = NULL;
    infos[i].gen = infos[i].gen == GEN_MAX ? 1 : infos[i].gen + 1;
    next_slot = i + 1 < INFOS_MAX ? i + 1 : 1;
    *out = (MPI_Info)(i | infos[i].gen << SLOT_BITS);
    return MPI_SUCCESS;
  }
  return MPI_ERR_NO_MEM;
}

int MPI_Info_create(MPI_Info *info) {
  int rc;
  if (info == NULL)
    return fail("MPI_Info_create", MPI_ERR_ARG, "info is NULL");
  pthread_mutex_lock(&lock);
  rc = take_handle(info);
  pthread_mutex_unlock(&lock);
  if (rc != MPI_SUCCESS)
    return fail("MPI_Info_create", rc, "too many info objects alive");
  return MPI_SUCCESS;
}

int MPI_Info_set(MPI_Info info, const char *key, const char *value) {
  info_obj *in;
  static const char fn[] = "MPI_Info_set";
  pair *q;
  char *v;
  int rc = check_key(fn, key);
  if (rc != MPI_SUCCESS)
    return rc;
  if (value == NULL)
    return fail(fn, MPI_ERR_ARG, "value is NULL");
  if (strlen(value) == 0 || strlen(value) >= MPI_MAX_INFO_VAL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_INFO_VALUE,
                          "a value of %zu characters (1 to %d)", strlen(value),
                          MPI_MAX_INFO_VAL - 1);
  if ((v = strdup(value)) == NULL)
    return fail(fn, MPI_ERR_NO_MEM, "the value");
  if ((in = locked(info, fn, &rc)) == NULL) {
    free(v);
    return rc;
  }
  if ((q = find(in, key)) != NULL) {
    free(q->value);
    q->value = v;
    pthread_mutex_unlock(&lock);
    return MPI_SUCCESS;
  }
  q = calloc(1, sizeof *q);
  if (q == NULL || (q->key = strdup(key)) == NULL) {
    pthread_mutex_unlock(&lock);
    free(q);
    free(v);
    return fail(fn, MPI_ERR_NO_MEM, "the key");
  }
  q->value = v;
  pair **tail = &in->pairs;
  while (*tail != NULL)
    tail = &(*tail)->next;
  *tail = q;
  pthread_mutex_unlock(&lock);
  return MPI_SUCCESS;
}

int MPI_Info_get(MPI_Info info, const char *key, int valuelen, char *value,
                 int *flag) {
  info_obj *in;
  static const char fn[] = "MPI_Info_get";
  pair *q;
  int rc = check_key(fn, key);
  if (rc != MPI_SUCCESS)
    return rc;
  if (flag == NULL || (value == NULL && valuelen > 0) || valuelen < 0)
    return fail(fn, MPI_ERR_ARG, "value, valuelen or flag");
  if ((in = locked(info, fn, &rc)) == NULL)
    return rc;
  q = find(in, key);
  *flag = q != NULL;
  /* At most valuelen characters and the terminating NUL, as MPI says. */
  if (q != NULL && value != NULL) {
    size_t n = strlen(q->value);
    if (n > (size_t)valuelen)
      n = (size_t)valuelen;
    memcpy(value, q->value, n);
    value[n] = '\0';
  }
  pthread_mutex_unlock(&lock);
  return MPI_SUCCESS;
}

int MPI_Info_get_valuelen(MPI_Info info, const char *key, int *valuelen,
                          int *flag) {
  info_obj *in;
  static const char fn[] = "MPI_Info_get_valuelen";
  pair *q;
  int rc = check_key(fn, key);
  if (rc != MPI_SUCCESS)
    return rc;
  if (valuelen == NULL || flag == NULL)
    return fail(fn, MPI_ERR_ARG, "valuelen or flag is NULL");
  if ((in = locked(info, fn, &rc)) == NULL)
    return rc;
  q = find(in, key);
  *flag = q != NULL;
  if (q != NULL)
    *valuelen = (int)strlen(q->value);
  pthread_mutex_unlock(&lock);
  return MPI_SUCCESS;
}

int MPI_Info_delete(MPI_Info info, const char *key) {
  info_obj *in;
  static const char fn[] = "MPI_Info_delete";
  int rc = check_key(fn, key);
  if (rc != MPI_SUCCESS)
    return rc;
  if ((in = locked(info, fn, &rc)) == NULL)
    return rc;
  for (pair **q = &in->pairs; *q != NULL; q = &(*q)->next)
    if (strcmp((*q)->key, key) == 0) {
      pair *gone = *q;
      *q = gone->next;
      gone->next = NULL;
      pthread_mutex_unlock(&lock);
      free_pairs(gone);
      return MPI_SUCCESS;
    }
  pthread_mutex_unlock(&lock);
  return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_INFO_NOKEY, "no key \"%s\"",
                        key);
}

int MPI_Info_get_nkeys(MPI_Info info, int *nkeys) {
  info_obj *in;
  int rc;
  int n = 0;
  if (nkeys == NULL)
    return fail("MPI_Info_get_nkeys", MPI_ERR_ARG, "nkeys is NULL");
  if ((in = locked(info, "MPI_Info_get_nkeys", &rc)) == NULL)
    return rc;
  for (pair *q = in->pairs; q != NULL; q = q->next)
    n++;
  pthread_mutex_unlock(&lock);
  *nkeys = n;
  return MPI_SUCCESS;
}

int MPI_Info_get_nthkey(MPI_Info info, int n, char *key) {
  info_obj *in;
  int rc;
  static const char fn[] = "MPI_Info_get_nthkey";
  pair *q;
  if (key == NULL)
    return fail(fn, MPI_ERR_ARG, "key is NULL");
  if ((in = locked(info, fn, &rc)) == NULL)
    return rc;
  q = in->pairs;
  for (int i = 0; q != NULL && i < n; i++)
    q = q->next;
  if (n < 0 || q == NULL) {
    pthread_mutex_unlock(&lock);
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                          "key %d of fewer keys", n);
  }
  strcpy(key, q->key); /* shorter than MPI_MAX_INFO_KEY: MPI_Info_set */
  pthread_mutex_unlock(&lock);
  return MPI_SUCCESS;
}

int MPI_Info_dup(MPI_Info info, MPI_Info *newinfo) {
  info_obj *in;
  static const char fn[] = "MPI_Info_dup";
  pair *copy = NULL, **tail = &copy;
  int rc;
  if (newinfo == NULL)
    return fail(fn, MPI_ERR_ARG, "newinfo is NULL");
  if ((in = locked(info, fn, &rc)) == NULL)
    return rc;
  for (pair *q = in->pairs; q != NULL; q = q->next) {
    pair *c = calloc(1, sizeof *c);
    if (c == NULL || (c->key = strdup(q->key)) == NULL ||
        (c->value = strdup(q->value)) == NULL) {
      pthread_mutex_unlock(&lock);
      free_pairs(c);
      free_pairs(copy);
      return fail(fn, MPI_ERR_NO_MEM, "the copy");
    }
    *tail = c;
    tail = &c->next;
  }
  rc = take_handle(newinfo);
  if (rc == MPI_SUCCESS)
    infos[*newinfo & (INFOS_MAX - 1)].pairs = copy;
  pthread_mutex_unlock(&lock);
  if (rc != MPI_SUCCESS) {
    free_pairs(copy);
    return fail(fn, rc, "too many info objects alive");
  }
  return MPI_SUCCESS;
}

int MPI_Info_free(MPI_Info *info) {
  info_obj *in;
  int rc;
  pair *gone;
  if (info == NULL)
    return fail("MPI_Info_free", MPI_ERR_ARG, "info is NULL");
  if ((in = locked(*info, "MPI_Info_free", &rc)) == NULL)
    return rc;
  gone = in->pairs;
  in->pairs = NULL;
  in->live = false;
  pthread_mutex_unlock(&lock);
  free_pairs(gone);
  *info = MPI_INFO_NULL;
  return MPI_SUCCESS;
}

void crnet_mpi_info_fini(void) {
  pthread_mutex_lock(&lock);
  for (int i = 1; i < INFOS_MAX; i++)
    if (infos[i].live) {
      free_pairs(infos[i].pairs);
      infos[i].pairs = NULL;
      infos[i].live = false;
    }
  pthread_mutex_unlock(&lock);
}

/* --- the communicator's hints --- */

int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  int rc = crnet_mpi_check_comm(&comm, "MPI_Comm_set_info");
  if (rc != MPI_SUCCESS)
    return rc;
  if (info == MPI_INFO_NULL || !crnet_mpi_info_valid(info))
    return crnet_mpi_fail(comm, "MPI_Comm_set_info", MPI_ERR_INFO,
                          "no such info object");
  return MPI_SUCCESS; /* no hint is used */
}

int MPI_Comm_get_info(MPI_Comm comm, MPI_Info *info_used) {
  int rc = crnet_mpi_check_comm(&comm, "MPI_Comm_get_info");
  if (rc != MPI_SUCCESS)
    return rc;
  if (info_used == NULL)
    return crnet_mpi_fail(comm, "MPI_Comm_get_info", MPI_ERR_ARG,
                          "info_used is NULL");
  return MPI_Info_create(info_used);
}

/* A dup, after which the ranks agree in one allreduce on the new comm that
 * every one passed a valid info: otherwise all free it and fail alike. */
int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
  static const char fn[] = "MPI_Comm_dup_with_info";
  MPI_Comm c = comm, dup = MPI_COMM_NULL;
  int rc = crnet_mpi_check_comm(&c, fn);
  if (rc != MPI_SUCCESS)
    return rc;
  rc = MPI_Comm_dup(comm, newcomm != NULL ? &dup : NULL);
  if (rc != MPI_SUCCESS)
    return rc;
  int32_t valid = crnet_mpi_info_valid(info) ? 1 : 0;
  rc = crnet_allreduce(dup->c, CRNET_IN_PLACE, &valid, 1, CRNET_INT32,
                       CRNET_MIN);
  if (rc != 0 || valid == 0) {
    int frc = MPI_Comm_free(&dup);
    if (rc != 0)
      return crnet_mpi_from_crnet(c, fn, rc);
    if (frc != MPI_SUCCESS)
      return frc;
    return crnet_mpi_fail(c, fn, MPI_ERR_INFO, "%s",
                          crnet_mpi_info_valid(info)
                              ? "another rank passed an info that does not "
                                "exist"
                              : "no such info object");
  }
  *newcomm = dup;
  return MPI_SUCCESS;
}
