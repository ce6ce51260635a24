/* The environment: MPI_Init and MPI_Finalize, the world and self comms,
 * clocks, names and versions, memory. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crnet_version.h"
#include "mpi_internal.h"

/* The objects behind MPI_COMM_WORLD and MPI_COMM_SELF. */
static struct crnet_mpi_comm world_comm = {.errhandler = MPI_ERRORS_ARE_FATAL,
                                           .name = "MPI_COMM_WORLD"};
static struct crnet_mpi_comm self_comm = {.errhandler = MPI_ERRORS_ARE_FATAL,
                                          .name = "MPI_COMM_SELF"};

MPI_Comm crnet_mpi_comm_of(MPI_Comm handle) {
  if (handle == MPI_COMM_WORLD)
    return &world_comm;
  if (handle == MPI_COMM_SELF)
    return &self_comm;
  return handle;
}

enum phase { BEFORE, RUNNING, AFTER };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Written under lock, read by every call without it. */
static _Atomic int phase = BEFORE;
static int thread_level = MPI_THREAD_SINGLE;
static struct crnet_mpi_comm *user_comms; /* split and dup, not yet freed */

bool crnet_mpi_ready(void) { return atomic_load(&phase) == RUNNING; }

crnet_comm *crnet_mpi_world(void) { return world_comm.c; }

void crnet_mpi_list_add(MPI_Comm comm) {
  pthread_mutex_lock(&lock);
  comm->prev = NULL;
  comm->next = user_comms;
  if (user_comms != NULL)
    user_comms->prev = comm;
  user_comms = comm;
  pthread_mutex_unlock(&lock);
}

void crnet_mpi_list_remove(MPI_Comm comm) {
  pthread_mutex_lock(&lock);
  if (comm->prev != NULL)
    comm->prev->next = comm->next;
  else
    user_comms = comm->next;
  if (comm->next != NULL)
    comm->next->prev = comm->prev;
  comm->next = comm->prev = NULL;
  pthread_mutex_unlock(&lock);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  crnet_comm *world = NULL, *self = NULL;
  int rc;
  (void)argc;
  (void)argv;
  pthread_mutex_lock(&lock);
  if (phase != BEFORE) {
    pthread_mutex_unlock(&lock);
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Init", MPI_ERR_OTHER,
                          phase == RUNNING ? "MPI is initialized already"
                                           : "MPI was finalized");
  }
  rc = crnet_comm_init(&world, NULL);
  if (rc != 0) {
    pthread_mutex_unlock(&lock);
    /* No job to abort: the handler's message, then the exit. */
    fprintf(stderr, "crnet-mpi: MPI_Init: %s: %s\n", crnet_strerror(rc),
            crnet_init_errmsg());
    exit(1);
  }
  /* Each rank alone: the comm of MPI_COMM_SELF. */
  rc = crnet_comm_split(world, crnet_comm_rank(world), 0, &self);
  if (rc == 0)
    rc = crnet_mpi_ops_init();
  if (rc != 0) {
    pthread_mutex_unlock(&lock);
    fprintf(stderr, "crnet-mpi: MPI_Init: %s: %s\n", crnet_strerror(rc),
            crnet_comm_errmsg(world));
    crnet_comm_abort(world, 1);
    exit(1);
  }
  world_comm.c = world;
  self_comm.c = self;
  /* Every call of the library may come from any thread (crnet.h,
   * "Threads"), and its own tables are locked. */
  thread_level = required < MPI_THREAD_SINGLE     ? MPI_THREAD_SINGLE
                 : required > MPI_THREAD_MULTIPLE ? MPI_THREAD_MULTIPLE
                                                  : required;
  if (provided != NULL)
    *provided = thread_level;
  phase = RUNNING;
  pthread_mutex_unlock(&lock);
  return MPI_SUCCESS;
}

int MPI_Init(int *argc, char ***argv) {
  return MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, NULL);
}

int MPI_Query_thread(int *provided) {
  if (provided == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Query_thread", MPI_ERR_ARG,
                          "provided is NULL");
  pthread_mutex_lock(&lock);
  *provided = thread_level;
  pthread_mutex_unlock(&lock);
  return MPI_SUCCESS;
}

/* Destroys the comms the program left, then self, then the world (which
 * must go last: crnet_comm_destroy). The world's destroy waits until every
 * rank's data is delivered, as MPI_Finalize does. */
/* Whether a comm's destroy at MPI_Finalize failed it. A lost rank or a
 * revoke is the comm's sticky error, met and reported by the calls before
 * (a ULFM program carries on past them, mpi-ext.h): finalizing the
 * survivors still succeeds. */
static bool finalize_error(int rc) {
  return rc != 0 && rc != CRNET_EPEER && rc != CRNET_EREVOKED;
}

int MPI_Finalize(void) {
  int rc = 0, first = 0;
  if (!crnet_mpi_ready())
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Finalize", MPI_ERR_OTHER,
                          "MPI is not initialized");
  /* MPI_COMM_SELF's attributes are deleted first, callbacks and all, as
   * if it were freed (MPI 3.1, 8.7.1): libraries hook their clean-up
   * there, and may still call MPI. */
  rc = crnet_mpi_attr_delete_all(&self_comm, "MPI_Finalize");
  if (rc != MPI_SUCCESS)
    return rc;
  /* Requests the program freed while active end first (their comms, if
   * freed, with them). */
  crnet_mpi_orphans_reap(MPI_COMM_NULL, true);
  pthread_mutex_lock(&lock);
  if (phase != RUNNING) {
    pthread_mutex_unlock(&lock);
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Finalize", MPI_ERR_OTHER,
                          "MPI is not initialized");
  }
  crnet_mpi_attr_drop_all(&world_comm);
  while (user_comms != NULL) {
    struct crnet_mpi_comm *c = user_comms;
    user_comms = c->next;
    crnet_mpi_attr_drop_all(c);
    crnet_mpi_hidden_free(c);
    rc = crnet_comm_destroy(c->c);
    if (finalize_error(rc) && first == 0)
      first = rc;
    free(c->cart);
    free(c->acked);
    free(c); /* a handle used after MPI_Finalize is erroneous (MPI 3.1, 8.7) */
  }
  crnet_mpi_hidden_free(&self_comm);
  crnet_mpi_hidden_free(&world_comm);
  rc = crnet_comm_destroy(self_comm.c);
  if (finalize_error(rc) && first == 0)
    first = rc;
  self_comm.c = NULL;
  free(self_comm.acked);
  free(world_comm.acked);
  self_comm.acked = world_comm.acked = NULL;
  self_comm.nacked = world_comm.nacked = 0;
  crnet_mpi_ops_fini();
  crnet_mpi_attr_fini();
  crnet_mpi_info_fini();
  rc = crnet_comm_destroy(world_comm.c);
  if (finalize_error(rc) && first == 0)
    first = rc;
  world_comm.c = NULL;
  phase = AFTER;
  pthread_mutex_unlock(&lock);
  if (first != 0)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Finalize",
                          crnet_mpi_class_of(first), "%s",
                          crnet_strerror(first));
  return MPI_SUCCESS;
}

int MPI_Initialized(int *flag) {
  if (flag == NULL)
    return MPI_ERR_ARG;
  *flag = atomic_load(&phase) != BEFORE;
  return MPI_SUCCESS;
}

int MPI_Finalized(int *flag) {
  if (flag == NULL)
    return MPI_ERR_ARG;
  *flag = atomic_load(&phase) == AFTER;
  return MPI_SUCCESS;
}

/* Ends every rank of the job, whatever comm names (crnet aborts the job;
 * MPI allows that). crlaunch exits with the code. */
int MPI_Abort(MPI_Comm comm, int errorcode) {
  (void)comm;
  if (crnet_mpi_world() != NULL)
    crnet_comm_abort(crnet_mpi_world(), errorcode);
  exit((errorcode & 0xff) != 0 ? errorcode & 0xff : 1);
}

double MPI_Wtime(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double MPI_Wtick(void) {
  struct timespec r;
  if (clock_getres(CLOCK_MONOTONIC, &r) != 0)
    return 1e-9;
  return (double)r.tv_sec + (double)r.tv_nsec * 1e-9;
}

int MPI_Get_processor_name(char *name, int *resultlen) {
  if (name == NULL || resultlen == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Get_processor_name", MPI_ERR_ARG,
                          "name or resultlen is NULL");
  if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0)
    snprintf(name, MPI_MAX_PROCESSOR_NAME, "unknown");
  name[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
  *resultlen = (int)strlen(name);
  return MPI_SUCCESS;
}

int MPI_Get_version(int *version, int *subversion) {
  if (version == NULL || subversion == NULL)
    return MPI_ERR_ARG;
  *version = MPI_VERSION;
  *subversion = MPI_SUBVERSION;
  return MPI_SUCCESS;
}

int MPI_Get_library_version(char *version, int *resultlen) {
  if (version == NULL || resultlen == NULL)
    return MPI_ERR_ARG;
  *resultlen = snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
                        "crnet-mpi %s: a subset of MPI %d.%d on crnet "
                        "(docs/MPI.md)",
                        CRNET_VERSION_STRING, MPI_VERSION, MPI_SUBVERSION);
  if (*resultlen >= MPI_MAX_LIBRARY_VERSION_STRING)
    *resultlen = MPI_MAX_LIBRARY_VERSION_STRING - 1;
  return MPI_SUCCESS;
}

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr) {
  void *p;
  if (!crnet_mpi_info_valid(info))
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Alloc_mem", MPI_ERR_INFO,
                          "no such info object");
  if (size < 0 || baseptr == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Alloc_mem", MPI_ERR_ARG,
                          "size %lld, baseptr %p", (long long)size, baseptr);
  p = malloc(size > 0 ? (size_t)size : 1);
  if (p == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Alloc_mem", MPI_ERR_NO_MEM,
                          "%lld bytes", (long long)size);
  memcpy(baseptr, &p, sizeof p);
  return MPI_SUCCESS;
}

int MPI_Free_mem(void *base) {
  free(base);
  return MPI_SUCCESS;
}

int MPI_Get_address(const void *location, MPI_Aint *address) {
  if (address == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Get_address", MPI_ERR_ARG,
                          "address is NULL");
  *address = (MPI_Aint)(uintptr_t)location;
  return MPI_SUCCESS;
}

MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp) { return base + disp; }

MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2) {
  return addr1 - addr2;
}
