/* Directories (directory.h): PMIx's key-value store, where this build has
 * PMIx, and the program's own (crnet_config.directory).
 *
 * PMIx is used for the start only: PMIx_Init gives the rank and the job
 * size, rank 0 puts the rendezvous and the key, every rank fences (the
 * server gathers what was put) and gets them, and the bootstrap's end lets
 * go with PMIx_Finalize. A rank that exits later exits as a finalized PMIx
 * client, which is what mpirun and srun expect of a process that joined
 * them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "directory.h"
#include "settings.h"

#ifdef CRNET_HAVE_PMIX
#include <pmix.h>
#endif

bool crnet__pmix_started(void) {
  return getenv("PMIX_RANK") != NULL && getenv("PMIX_NAMESPACE") != NULL;
}

#ifdef CRNET_HAVE_PMIX

bool crnet__pmix_built(void) { return true; }

/* The one PMIx client of this process. */
static pmix_proc_t pmix_me;
static bool pmix_open;

static int pmix_publish(void *ctx, const char *key, const char *value,
                        char *why, size_t why_len) {
  pmix_value_t v;
  pmix_status_t rc;
  (void)ctx;
  PMIX_VALUE_LOAD(&v, value, PMIX_STRING);
  rc = PMIx_Put(PMIX_GLOBAL, key, &v);
  PMIX_VALUE_DESTRUCT(&v);
  if (rc == PMIX_SUCCESS)
    rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) {
    snprintf(why, why_len, "PMIx cannot store %s: %s", key,
             PMIx_Error_string(rc));
    return CRNET_EIO;
  }
  return 0;
}

static int pmix_fence(void *ctx, double timeout_s, char *why, size_t why_len) {
  pmix_info_t info[2];
  bool collect = true;
  int seconds = timeout_s < 1 ? 1 : timeout_s > 1e6 ? 1000000 : (int)timeout_s;
  pmix_status_t rc;
  (void)ctx;
  PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
  /* NULL procs: every process of this process's namespace, the job. */
  rc = PMIx_Fence(NULL, 0, info, 2);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (rc != PMIX_SUCCESS) {
    snprintf(why, why_len,
             "PMIx's fence, where every rank waits for rank 0's "
             "rendezvous, failed: %s%s",
             PMIx_Error_string(rc),
             rc == PMIX_ERR_TIMEOUT ? " (a rank never came)" : "");
    return rc == PMIX_ERR_TIMEOUT ? CRNET_ETIMEDOUT : CRNET_EIO;
  }
  return 0;
}

static int pmix_lookup(void *ctx, const char *key, char *value, size_t cap,
                       double timeout_s, char *why, size_t why_len) {
  pmix_proc_t rank0;
  pmix_value_t *v = NULL;
  pmix_status_t rc;
  int code = 0;
  (void)ctx;
  (void)timeout_s; /* after the fence the value is here or never */
  PMIX_LOAD_PROCID(&rank0, pmix_me.nspace, 0);
  rc = PMIx_Get(&rank0, key, NULL, 0, &v);
  if (rc != PMIX_SUCCESS || v == NULL || v->type != PMIX_STRING ||
      v->data.string == NULL) {
    snprintf(why, why_len, "PMIx has no %s from rank 0: %s", key,
             rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "not a string");
    code = CRNET_EIO;
  } else if (strlen(v->data.string) >= cap) {
    snprintf(why, why_len, "PMIx's %s from rank 0 is too long", key);
    code = CRNET_EIO;
  } else {
    memcpy(value, v->data.string, strlen(v->data.string) + 1);
  }
  if (v != NULL)
    PMIX_VALUE_RELEASE(v);
  return code;
}

static void pmix_close(void *ctx) {
  (void)ctx;
  if (pmix_open) {
    PMIx_Finalize(NULL, 0);
    pmix_open = false;
  }
}

int crnet__pmix_open(int *rank, int *size, crnet__directory *dir, char *why,
                     size_t why_len) {
  pmix_proc_t job;
  pmix_value_t *v = NULL;
  pmix_status_t rc;
  if (pmix_open) {
    snprintf(why, why_len, "this process has joined its PMIx job already");
    return CRNET_EINVAL;
  }
  rc = PMIx_Init(&pmix_me, NULL, 0);
  if (rc != PMIX_SUCCESS) {
    snprintf(why, why_len,
             "a PMIx server started this process (PMIX_RANK is set), but "
             "PMIx_Init failed: %s",
             PMIx_Error_string(rc));
    return CRNET_EIO;
  }
  pmix_open = true;
  PMIX_LOAD_PROCID(&job, pmix_me.nspace, PMIX_RANK_WILDCARD);
  rc = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
  if (rc != PMIX_SUCCESS || v == NULL || v->type != PMIX_UINT32 ||
      v->data.uint32 < 1 || v->data.uint32 > CRNET__MAX_JOB_SIZE ||
      pmix_me.rank >= v->data.uint32) {
    snprintf(why, why_len, "PMIx gives no usable job size: %s",
             rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "out of range");
    if (v != NULL)
      PMIX_VALUE_RELEASE(v);
    pmix_close(NULL);
    return CRNET_EIO;
  }
  *rank = (int)pmix_me.rank;
  *size = (int)v->data.uint32;
  PMIX_VALUE_RELEASE(v);
  dir->name = "PMIx";
  dir->publish = pmix_publish;
  dir->fence = pmix_fence;
  dir->lookup = pmix_lookup;
  dir->close = pmix_close;
  dir->ctx = NULL;
  return 0;
}

#else /* no PMIx in this build */

bool crnet__pmix_built(void) { return false; }

int crnet__pmix_open(int *rank, int *size, crnet__directory *dir, char *why,
                     size_t why_len) {
  (void)rank;
  (void)size;
  (void)dir;
  snprintf(why, why_len,
           "a PMIx server started this process (PMIX_RANK is set), but this "
           "crnet was built without PMIx (install libpmix-dev and build "
           "again), so it cannot join: start the job with crlaunch -n N");
  return CRNET_EINVAL;
}

#endif

/* --- the program's directory ------------------------------------------- */

static int program_publish(void *ctx, const char *key, const char *value,
                           char *why, size_t why_len) {
  const crnet_directory *d = ctx;
  if (d->publish(d->arg, key, value) != 0) {
    snprintf(why, why_len, "the program's directory cannot store %s", key);
    return CRNET_EIO;
  }
  return 0;
}

static int program_lookup(void *ctx, const char *key, char *value, size_t cap,
                          double timeout_s, char *why, size_t why_len) {
  const crnet_directory *d = ctx;
  int rc;
  value[0] = '\0';
  rc = d->lookup(d->arg, key, value, cap, timeout_s);
  if (rc == CRNET_EIO) {
    /* A store that has gone away (rank 0's, with rank 0) fails at once:
     * "within 60 s" would send its user looking for a slow rank 0. */
    snprintf(why, why_len,
             "the program's directory failed while looking up %s from "
             "rank 0",
             key);
    return CRNET_EIO;
  }
  if (rc != 0 || memchr(value, '\0', cap) == NULL) {
    snprintf(why, why_len,
             "the program's directory has no %s from rank 0 within %g s", key,
             timeout_s);
    return CRNET_ETIMEDOUT;
  }
  return 0;
}

void crnet__directory_from_config(const crnet_directory *d,
                                  crnet__directory *out) {
  out->name = "the program's directory";
  out->publish = program_publish;
  out->fence = NULL;
  out->lookup = program_lookup;
  out->close = NULL;
  out->ctx = (void *)d;
}
