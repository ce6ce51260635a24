/* Completing requests: wait, waitall, waitany, test, testall.
 *
 * A crnet request is freed by the wait or test that completes it; the MPI
 * request around it keeps its result (done, rc, and for a receive the
 * status crnet filled) until the MPI call that reports it, since MPI_Testall
 * may see some requests complete and must leave them all pending when the
 * rest are not. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

static void bsend_release(size_t bytes);

/* r's own memory and its share of the buffer (not its comm's count). */
static void request_memory_free(struct crnet_mpi_request *r) {
  /* A receive or collective that ended well leaves its packed data in the
   * program's buffer before the program hears of it. */
  crnet_mpi_stage_end(&r->stage,
                      r->done && r->rc == 0 && !r->cancelled &&
                          r->refused_by < 0 &&
                          (r->kind == REQ_RECV || r->kind == REQ_COLL),
                      r->kind == REQ_RECV ? r->st.bytes : SIZE_MAX);
  if (r->bsend_bytes > 0)
    bsend_release(r->bsend_bytes);
  free(r->arrays);
  free(r->temp);
  free(r->parts);
  free(r->part_st);
  free(r);
}

void crnet_mpi_request_free(struct crnet_mpi_request *r) {
  atomic_fetch_sub(&r->comm->requests, 1);
  request_memory_free(r);
}

static void reap_if_any(void);

int crnet_mpi_request_new(MPI_Comm comm, const char *fn, enum request_kind kind,
                          MPI_Request *request,
                          struct crnet_mpi_request **out) {
  reap_if_any();
  if (request == NULL)
    return crnet_mpi_fail(comm, fn, MPI_ERR_ARG, "request is NULL");
  *out = calloc(1, sizeof **out);
  if (*out == NULL)
    return crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM, "a request");
  (*out)->kind = kind;
  (*out)->comm = comm;
  (*out)->refused_by = -1;
  atomic_fetch_add(&comm->requests, 1);
  return MPI_SUCCESS;
}

int crnet_mpi_request_started(MPI_Comm comm, const char *fn, int rc,
                              struct crnet_mpi_request *r,
                              MPI_Request *request) {
  if (rc != 0) {
    crnet_mpi_request_free(r);
    *request = MPI_REQUEST_NULL;
    return crnet_mpi_from_crnet(comm, fn, rc);
  }
  *request = r;
  return MPI_SUCCESS;
}

void crnet_mpi_status(MPI_Status *status, int source, int tag, int rc,
                      size_t bytes) {
  if (status == MPI_STATUS_IGNORE)
    return;
  status->MPI_SOURCE = source;
  status->MPI_TAG = tag;
  status->MPI_ERROR = crnet_mpi_class_of(rc);
  status->crnet_bytes_ = bytes;
  status->crnet_cancelled_ = 0;
}

#define REFUSED_MSG                                                            \
  "rank %d refused its arguments to this gatherv or scatterv (its own "        \
  "error says why)"

static void empty_status(MPI_Status *status) {
  crnet_mpi_status(status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, 0);
}

static void fill_status(const struct crnet_mpi_request *r, MPI_Status *status) {
  if (r->cancelled) {
    empty_status(status);
    if (status != MPI_STATUS_IGNORE)
      status->crnet_cancelled_ = 1;
  } else if (r->kind == REQ_RECV)
    crnet_mpi_status(status, r->st.source, r->st.tag, r->rc, r->st.bytes);
  else
    crnet_mpi_status(status,
                     r->kind == REQ_NULL_PEER ? MPI_PROC_NULL : MPI_ANY_SOURCE,
                     MPI_ANY_TAG, r->rc, 0);
}

/* r (not REQ_PARTS) completed in crnet with rc. A receive that MPI_Cancel
 * ended is a success whose status says so. */
static void set_done(struct crnet_mpi_request *r, int rc) {
  r->cancelled = rc == CRNET_ECANCELED;
  r->rc = r->cancelled ? 0 : rc;
  r->done = true;
}

/* A part of a REQ_PARTS request completed with rc: the first failure is
 * the request's; complete once every part is. */
static void part_done(struct crnet_mpi_request *r, int k, int rc) {
  r->parts[k] = NULL;
  if (rc == 0 && r->part_st != NULL &&
      r->part_st[k].tag == CRNET_MPI_TAG_REFUSED) {
    /* Reported as MPI_ERR_OTHER, with its own message (report). */
    rc = CRNET_EMISMATCH;
    if (r->refused_by < 0)
      r->refused_by = r->part_st[k].source;
  }
  if (rc != 0 && r->rc == 0)
    r->rc = rc;
  for (int i = 0; i < r->nparts; i++)
    if (r->parts[i] != NULL)
      return;
  r->done = true;
}

/* Waits for r unless a test completed it already. */
static void finish(struct crnet_mpi_request *r) {
  if (r->done)
    return;
  if (r->kind == REQ_PARTS) {
    for (int k = 0; k < r->nparts; k++)
      if (r->parts[k] != NULL)
        part_done(r, k, crnet_wait(&r->parts[k]));
    r->done = true; /* also with no parts at all */
    return;
  }
  set_done(r, crnet_wait(&r->req));
}

/* Tests r; whether it is complete. */
static bool poll_one(struct crnet_mpi_request *r) {
  int done = 0, rc;
  if (r->done)
    return true;
  if (r->kind == REQ_PARTS) {
    for (int k = 0; k < r->nparts; k++)
      if (r->parts[k] != NULL) {
        done = 0;
        rc = crnet_test(&r->parts[k], &done);
        if (done)
          part_done(r, k, rc);
      }
    return r->done;
  }
  rc = crnet_test(&r->req, &done);
  if (done)
    set_done(r, rc);
  return r->done;
}

/* Reports the complete request *request (its status, its error through
 * its comm's handler) and frees it. */
static int report(MPI_Request *request, MPI_Status *status, const char *fn) {
  struct crnet_mpi_request *r = *request;
  MPI_Comm comm = r->comm;
  int rc = r->rc, refused_by = r->refused_by;
  fill_status(r, status);
  crnet_mpi_request_free(r);
  *request = MPI_REQUEST_NULL;
  if (refused_by >= 0)
    return crnet_mpi_fail(comm, fn, MPI_ERR_OTHER, REFUSED_MSG, refused_by);
  return crnet_mpi_from_crnet(comm, fn, rc);
}

int MPI_Wait(MPI_Request *request, MPI_Status *status) {
  if (request == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Wait", MPI_ERR_REQUEST,
                          "request is NULL");
  if (*request == MPI_REQUEST_NULL) {
    empty_status(status);
    return MPI_SUCCESS;
  }
  finish(*request);
  return report(request, status, "MPI_Wait");
}

int MPI_Cancel(MPI_Request *request) {
  struct crnet_mpi_request *r;
  if (request == NULL || *request == MPI_REQUEST_NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Cancel", MPI_ERR_REQUEST,
                          "the request is %s",
                          request == NULL ? "NULL" : "MPI_REQUEST_NULL");
  r = *request;
  if (r->kind == REQ_COLL || r->kind == REQ_PARTS)
    return crnet_mpi_fail(r->comm, "MPI_Cancel", MPI_ERR_REQUEST,
                          "a nonblocking collective cannot be cancelled");
  /* A send goes on (the cancel does not win); so does a receive a test
   * completed already, or one from MPI_PROC_NULL. */
  if (r->kind != REQ_RECV || r->done || r->req == NULL)
    return MPI_SUCCESS;
  return crnet_mpi_from_crnet(r->comm, "MPI_Cancel", crnet_cancel(r->req));
}

int MPI_Test_cancelled(const MPI_Status *status, int *flag) {
  if (status == NULL || flag == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Test_cancelled", MPI_ERR_ARG,
                          "status or flag is NULL");
  *flag = status->crnet_cancelled_ != 0;
  return MPI_SUCCESS;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
  if (request == NULL || flag == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Test", MPI_ERR_ARG,
                          "request or flag is NULL");
  if (*request == MPI_REQUEST_NULL) {
    *flag = 1;
    empty_status(status);
    return MPI_SUCCESS;
  }
  *flag = poll_one(*request);
  if (!*flag)
    return MPI_SUCCESS;
  return report(request, status, "MPI_Test");
}

/* Reports every request of requests[0..count) (all complete): statuses,
 * frees; MPI_ERR_IN_STATUS, raised on the first failed one's comm and
 * naming it, if any failed. */
static int report_all(int count, MPI_Request requests[], MPI_Status statuses[],
                      const char *fn) {
  int failed = -1, first_rc = 0, refused_by = -1;
  MPI_Comm comm = MPI_COMM_NULL;
  for (int i = 0; i < count; i++) {
    struct crnet_mpi_request *r = requests[i];
    MPI_Status *st =
        statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
    if (r == MPI_REQUEST_NULL) {
      empty_status(st);
      continue;
    }
    fill_status(r, st);
    if (r->rc != 0 && failed < 0) {
      failed = i;
      first_rc = r->rc;
      refused_by = r->refused_by;
      comm = r->comm;
    }
    crnet_mpi_request_free(r);
    requests[i] = MPI_REQUEST_NULL;
  }
  if (failed < 0)
    return MPI_SUCCESS;
  if (refused_by >= 0)
    return crnet_mpi_fail(comm, fn, MPI_ERR_IN_STATUS,
                          "request %d: " REFUSED_MSG, failed, refused_by);
  const char *why = comm->c != NULL ? crnet_comm_errmsg(comm->c) : "";
  return crnet_mpi_fail(comm, fn, MPI_ERR_IN_STATUS,
                        "request %d: %s%s%s (each status's MPI_ERROR has its "
                        "class)",
                        failed, crnet_strerror(first_rc),
                        why[0] != '\0' ? ": " : "", why);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  if (count < 0 || (count > 0 && requests == NULL))
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Waitall", MPI_ERR_ARG,
                          "count %d, requests %p", count, (void *)requests);
  /* One after the other: each wait moves every request of the job on. */
  for (int i = 0; i < count; i++)
    if (requests[i] != MPI_REQUEST_NULL)
      finish(requests[i]);
  return report_all(count, requests, statuses, "MPI_Waitall");
}

int MPI_Testall(int count, MPI_Request requests[], int *flag,
                MPI_Status statuses[]) {
  bool all = true;
  if (count < 0 || flag == NULL || (count > 0 && requests == NULL))
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Testall", MPI_ERR_ARG,
                          "count %d, requests %p, flag %p", count,
                          (void *)requests, (void *)flag);
  for (int i = 0; i < count; i++)
    if (requests[i] != MPI_REQUEST_NULL && !poll_one(requests[i]))
      all = false;
  *flag = all;
  if (!all)
    return MPI_SUCCESS;
  return report_all(count, requests, statuses, "MPI_Testall");
}

/* The crnet requests still pending behind requests[0..count): one entry
 * per request, or per part of a REQ_PARTS one; owner[] and part[] say
 * whose. */
typedef struct pending {
  crnet_request **req;
  int *owner, *part, n;
} pending;

static bool collect(pending *pd, int count, MPI_Request requests[]) {
  int cap = 0;
  for (int i = 0; i < count; i++)
    if (requests[i] != MPI_REQUEST_NULL)
      cap += requests[i]->kind == REQ_PARTS ? requests[i]->nparts : 1;
  pd->n = 0;
  pd->req = malloc(sizeof *pd->req * (size_t)(cap > 0 ? cap : 1));
  pd->owner = malloc(sizeof *pd->owner * (size_t)(cap > 0 ? cap : 1));
  pd->part = malloc(sizeof *pd->part * (size_t)(cap > 0 ? cap : 1));
  if (pd->req == NULL || pd->owner == NULL || pd->part == NULL)
    return false;
  for (int i = 0; i < count; i++) {
    struct crnet_mpi_request *r = requests[i];
    if (r == MPI_REQUEST_NULL)
      continue;
    for (int k = 0; k < (r->kind == REQ_PARTS ? r->nparts : 1); k++) {
      crnet_request *q = r->kind == REQ_PARTS ? r->parts[k] : r->req;
      if (q == NULL)
        continue;
      pd->req[pd->n] = q;
      pd->owner[pd->n] = i;
      pd->part[pd->n++] = k;
    }
  }
  return true;
}

static void pending_free(pending *pd) {
  free(pd->req);
  free(pd->owner);
  free(pd->part);
}

/* Blocks until one of requests[0..count) is complete (done): its index in
 * *index, or MPI_UNDEFINED when none is live. MPI_SUCCESS or the error,
 * raised. */
static int block_until_one(int count, MPI_Request requests[], int *index,
                           const char *fn) {
  pending pd;
  int j = -1, rc, live;
  for (;;) {
    /* One complete already (by a test, or a request without messages)
     * goes first. */
    live = 0;
    for (int i = 0; i < count; i++)
      if (requests[i] != MPI_REQUEST_NULL) {
        live++;
        if (requests[i]->done) {
          *index = i;
          return MPI_SUCCESS;
        }
      }
    if (live == 0) {
      *index = MPI_UNDEFINED;
      return MPI_SUCCESS;
    }
    if (!collect(&pd, count, requests)) {
      pending_free(&pd);
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_NO_MEM, "%d requests",
                            count);
    }
    rc = crnet_waitany(pd.n, pd.req, &j);
    if (j < 0 || j >= pd.n) { /* crnet refused the call itself */
      pending_free(&pd);
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_REQUEST, "%s",
                            crnet_strerror(rc));
    }
    struct crnet_mpi_request *r = requests[pd.owner[j]];
    if (r->kind == REQ_PARTS) {
      part_done(r, pd.part[j], rc); /* freed by crnet_waitany */
    } else {
      r->req = NULL;
      set_done(r, rc);
    }
    pending_free(&pd);
  }
}

static int check_array(const char *fn, int count, MPI_Request requests[],
                       const void *out) {
  if (count < 0 || out == NULL || (count > 0 && requests == NULL))
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                          "count %d, requests %p, an output %p", count,
                          (void *)requests, out);
  return MPI_SUCCESS;
}

int MPI_Waitany(int count, MPI_Request requests[], int *index,
                MPI_Status *status) {
  int rc = check_array("MPI_Waitany", count, requests, index);
  if (rc == MPI_SUCCESS)
    rc = block_until_one(count, requests, index, "MPI_Waitany");
  if (rc != MPI_SUCCESS)
    return rc;
  if (*index == MPI_UNDEFINED) {
    empty_status(status);
    return MPI_SUCCESS;
  }
  return report(&requests[*index], status, "MPI_Waitany");
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag,
                MPI_Status *status) {
  int rc = check_array("MPI_Testany", count, requests, index), live = 0;
  if (rc == MPI_SUCCESS)
    rc = check_array("MPI_Testany", count, requests, flag);
  if (rc != MPI_SUCCESS)
    return rc;
  *index = MPI_UNDEFINED;
  for (int i = 0; i < count; i++)
    if (requests[i] != MPI_REQUEST_NULL) {
      live++;
      if (poll_one(requests[i])) {
        *index = i;
        *flag = 1;
        return report(&requests[i], status, "MPI_Testany");
      }
    }
  /* Nothing live counts as complete, with an empty status (MPI 3.1,
   * 3.7.5). */
  *flag = live == 0;
  if (live == 0)
    empty_status(status);
  return MPI_SUCCESS;
}

/* Reports the requests of requests[0..count) that are complete: their
 * indices in indices[0..*outcount), statuses in that order. */
static int report_done(int count, MPI_Request requests[], int *outcount,
                       int indices[], MPI_Status statuses[], const char *fn) {
  MPI_Request *done;
  int n = 0, rc;
  if ((done = malloc(sizeof *done * (size_t)(count > 0 ? count : 1))) == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_NO_MEM, "%d requests",
                          count);
  for (int i = 0; i < count; i++)
    if (requests[i] != MPI_REQUEST_NULL && requests[i]->done) {
      indices[n] = i;
      done[n++] = requests[i];
      requests[i] = MPI_REQUEST_NULL;
    }
  *outcount = n;
  rc = report_all(n, done, statuses, fn);
  free(done);
  return rc;
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount,
                 int indices[], MPI_Status statuses[]) {
  int rc = check_array("MPI_Waitsome", incount, requests, outcount), first;
  if (rc == MPI_SUCCESS)
    rc = check_array("MPI_Waitsome", incount, requests, indices);
  if (rc == MPI_SUCCESS)
    rc = block_until_one(incount, requests, &first, "MPI_Waitsome");
  if (rc != MPI_SUCCESS)
    return rc;
  if (first == MPI_UNDEFINED) {
    *outcount = MPI_UNDEFINED;
    return MPI_SUCCESS;
  }
  /* The others complete by now too. */
  for (int i = 0; i < incount; i++)
    if (requests[i] != MPI_REQUEST_NULL)
      (void)poll_one(requests[i]);
  return report_done(incount, requests, outcount, indices, statuses,
                     "MPI_Waitsome");
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount,
                 int indices[], MPI_Status statuses[]) {
  int rc = check_array("MPI_Testsome", incount, requests, outcount), live = 0;
  if (rc == MPI_SUCCESS)
    rc = check_array("MPI_Testsome", incount, requests, indices);
  if (rc != MPI_SUCCESS)
    return rc;
  for (int i = 0; i < incount; i++)
    if (requests[i] != MPI_REQUEST_NULL) {
      live++;
      (void)poll_one(requests[i]);
    }
  if (live == 0) {
    *outcount = MPI_UNDEFINED;
    return MPI_SUCCESS;
  }
  return report_done(incount, requests, outcount, indices, statuses,
                     "MPI_Testsome");
}

/* --- requests the program freed while active ------------------------------ */

static pthread_mutex_t orphan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct crnet_mpi_request *orphans;
static _Atomic int norphans; /* a look without the lock */

/* Frees an orphan that ended; releases its comm if that was freed and
 * waited for it alone. */
static void bury(struct crnet_mpi_request *r) {
  MPI_Comm comm = r->comm;
  bool release;
  /* The comm's two counts fall together, under the lock that
   * crnet_mpi_orphans_defer_free decides by: exactly one bury sees the
   * last of them go, and only it releases the comm (nothing touches the
   * comm after that). */
  pthread_mutex_lock(&orphan_lock);
  comm->orphans--;
  release = atomic_fetch_sub(&comm->requests, 1) == 1 && comm->free_pending;
  pthread_mutex_unlock(&orphan_lock);
  request_memory_free(r);
  if (release)
    (void)crnet_mpi_comm_release(comm);
}

/* Reaps the orphans of `only` (MPI_COMM_NULL: of all), of buffered sends
 * only if bsends, waiting for each if wait. */
static void reap(MPI_Comm only, bool wait, bool bsends) {
  struct crnet_mpi_request *list, *next, *keep = NULL;
  pthread_mutex_lock(&orphan_lock);
  list = orphans;
  orphans = NULL;
  pthread_mutex_unlock(&orphan_lock);
  /* Outside the lock: a wait or test runs crnet's loop. */
  for (struct crnet_mpi_request *r = list; r != NULL; r = next) {
    next = r->next_orphan;
    if ((only == MPI_COMM_NULL || r->comm == only) &&
        (!bsends || r->bsend_bytes > 0)) {
      if (wait)
        finish(r);
      if (poll_one(r)) {
        atomic_fetch_sub(&norphans, 1);
        bury(r); /* its result goes with it: nobody can ask for it */
        continue;
      }
    }
    r->next_orphan = keep;
    keep = r;
  }
  pthread_mutex_lock(&orphan_lock);
  while (keep != NULL) {
    next = keep->next_orphan;
    keep->next_orphan = orphans;
    orphans = keep;
    keep = next;
  }
  pthread_mutex_unlock(&orphan_lock);
}

void crnet_mpi_orphans_reap(MPI_Comm only, bool wait) {
  reap(only, wait, false);
}

static void reap_if_any(void) {
  if (atomic_load(&norphans) > 0)
    crnet_mpi_orphans_reap(MPI_COMM_NULL, false);
}

int crnet_mpi_orphans_defer_free(MPI_Comm c) {
  int verdict;
  pthread_mutex_lock(&orphan_lock);
  if (atomic_load(&c->requests) == 0)
    verdict = CRNET_MPI_FREE_NOW;
  else if (atomic_load(&c->requests) == c->orphans) {
    c->free_pending = true; /* the last bury releases it */
    verdict = CRNET_MPI_FREE_DEFERRED;
  } else {
    verdict = CRNET_MPI_FREE_REFUSED;
  }
  pthread_mutex_unlock(&orphan_lock);
  return verdict;
}

bool crnet_mpi_orphans_only(MPI_Comm c) {
  bool only;
  pthread_mutex_lock(&orphan_lock);
  only = atomic_load(&c->requests) == c->orphans;
  pthread_mutex_unlock(&orphan_lock);
  return only;
}

/* r goes on in crnet, nobody's: freed now if it is over, else listed. */
static void orphan(struct crnet_mpi_request *r) {
  if (poll_one(r)) {
    crnet_mpi_request_free(r);
    return;
  }
  pthread_mutex_lock(&orphan_lock);
  r->comm->orphans++;
  r->next_orphan = orphans;
  orphans = r;
  atomic_fetch_add(&norphans, 1);
  pthread_mutex_unlock(&orphan_lock);
}

/* The request goes on, and ends unseen (MPI 3.1, 3.7.3): a send's buffer
 * must not be touched until the program knows otherwise. A nonblocking
 * collective's may not be freed (MPI 3.1, 5.12). */
int MPI_Request_free(MPI_Request *request) {
  struct crnet_mpi_request *r;
  if (request == NULL || *request == MPI_REQUEST_NULL)
    return crnet_mpi_fail(
        MPI_COMM_NULL, "MPI_Request_free", MPI_ERR_REQUEST, "%s",
        request == NULL ? "request is NULL" : "MPI_REQUEST_NULL");
  r = *request;
  if (r->kind == REQ_COLL || r->kind == REQ_PARTS)
    return crnet_mpi_fail(r->comm, "MPI_Request_free", MPI_ERR_REQUEST,
                          "the request of a nonblocking collective cannot be "
                          "freed: wait for it or test it");
  *request = MPI_REQUEST_NULL;
  orphan(r);
  return MPI_SUCCESS;
}

/* --- buffered sends ---------------------------------------------------------
 * MPI_Bsend copies the message and returns: the copy is sent by a request
 * nobody waits for (an orphan, above), freed when it ends. The buffer the
 * program attaches bounds what may be in flight this way (each message
 * counting MPI_BSEND_OVERHEAD more); the copies themselves are the
 * library's. */
static pthread_mutex_t bsend_lock = PTHREAD_MUTEX_INITIALIZER;
static void *bsend_buffer;
static size_t bsend_size, bsend_used;

static void bsend_release(size_t bytes) {
  pthread_mutex_lock(&bsend_lock);
  bsend_used -= bytes;
  pthread_mutex_unlock(&bsend_lock);
}

int MPI_Buffer_attach(void *buffer, int size) {
  int rc = MPI_SUCCESS;
  if (size < 0 || (size > 0 && buffer == NULL))
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Buffer_attach", MPI_ERR_BUFFER,
                          "buffer %p of %d bytes", buffer, size);
  pthread_mutex_lock(&bsend_lock);
  if (bsend_buffer != NULL)
    rc = MPI_ERR_BUFFER;
  else {
    bsend_buffer = buffer;
    bsend_size = (size_t)size;
  }
  pthread_mutex_unlock(&bsend_lock);
  if (rc != MPI_SUCCESS)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Buffer_attach", rc,
                          "a buffer is attached already: detach it first");
  return MPI_SUCCESS;
}

/* Waits until every buffered message has gone, then gives the buffer back
 * (buffer_addr is a void **, as MPI has it). */
int MPI_Buffer_detach(void *buffer_addr, int *size) {
  if (buffer_addr == NULL || size == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Buffer_detach", MPI_ERR_ARG,
                          "buffer_addr or size is NULL");
  /* Another thread's reap may hold some of them a while: until none is
   * left. */
  for (;;) {
    size_t used;
    reap(MPI_COMM_NULL, true, true);
    pthread_mutex_lock(&bsend_lock);
    used = bsend_used;
    pthread_mutex_unlock(&bsend_lock);
    if (used == 0)
      break;
    sched_yield();
  }
  pthread_mutex_lock(&bsend_lock);
  *(void **)buffer_addr = bsend_buffer;
  *size = (int)bsend_size;
  bsend_buffer = NULL;
  bsend_size = 0;
  pthread_mutex_unlock(&bsend_lock);
  return MPI_SUCCESS;
}

int crnet_mpi_bsend(MPI_Comm comm, const char *fn, const void *buf,
                    size_t count, crnet_datatype dt, size_t data, int dest,
                    int tag) {
  size_t bytes = count * crnet_datatype_size(dt), need;
  struct crnet_mpi_request *r;
  MPI_Request handle;
  bool room;
  int rc;
  reap(MPI_COMM_NULL, false, true); /* room from messages gone meanwhile */
  size_t size, used;
  /* Charged by the message's MPI size (data, without a pair type's
   * padding), as a program sizes the buffer. */
  need = data + MPI_BSEND_OVERHEAD;
  pthread_mutex_lock(&bsend_lock);
  size = bsend_size;
  used = bsend_used;
  room = used + need <= size;
  if (room)
    bsend_used += need;
  pthread_mutex_unlock(&bsend_lock);
  if (!room)
    return crnet_mpi_fail(comm, fn, MPI_ERR_BUFFER,
                          "%zu bytes do not fit in the attached buffer "
                          "(%zu bytes, %zu in use; MPI_Buffer_attach)",
                          need, size, used);
  rc = crnet_mpi_request_new(comm, fn, REQ_SEND, &handle, &r);
  if (rc == MPI_SUCCESS && (r->temp = malloc(bytes > 0 ? bytes : 1)) == NULL) {
    crnet_mpi_request_free(r);
    rc = crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM, "%zu bytes", bytes);
  }
  if (rc != MPI_SUCCESS) {
    bsend_release(need);
    return rc;
  }
  r->bsend_bytes = need;
  memcpy(r->temp, buf, bytes);
  rc = crnet_isend(comm->c, r->temp, count, dt, dest, tag, &r->req);
  if (rc != 0) {
    crnet_mpi_request_free(r);
    return crnet_mpi_from_crnet(comm, fn, rc);
  }
  orphan(r);
  return MPI_SUCCESS;
}
