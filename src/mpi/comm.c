/* Communicators: rank, size, split, dup, free. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

int MPI_Comm_rank(MPI_Comm comm, int *rank) {
  int rc = crnet_mpi_check_comm(&comm, "MPI_Comm_rank");
  if (rc != MPI_SUCCESS)
    return rc;
  if (rank == NULL)
    return crnet_mpi_fail(comm, "MPI_Comm_rank", MPI_ERR_ARG, "rank is NULL");
  *rank = crnet_comm_rank(comm->c);
  return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size) {
  int rc = crnet_mpi_check_comm(&comm, "MPI_Comm_size");
  if (rc != MPI_SUCCESS)
    return rc;
  if (size == NULL)
    return crnet_mpi_fail(comm, "MPI_Comm_size", MPI_ERR_ARG, "size is NULL");
  *size = crnet_comm_size(comm->c);
  return MPI_SUCCESS;
}

int crnet_mpi_comm_wrap(MPI_Comm from, const char *fn, crnet_comm *c,
                        MPI_Comm *newcomm) {
  struct crnet_mpi_comm *m;
  if (c == NULL) {
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  m = calloc(1, sizeof *m);
  if (m == NULL) {
    crnet_comm_destroy(c);
    return crnet_mpi_fail(from, fn, MPI_ERR_NO_MEM, "a communicator");
  }
  m->c = c;
  m->errhandler = from->errhandler;
  m->user = true;
  crnet_mpi_list_add(m);
  *newcomm = m;
  return MPI_SUCCESS;
}

/* A rank whose arguments are wrong still takes its part in the split
 * (with no color), so that the others do not wait for it, and fails. */
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  crnet_comm *c = NULL;
  bool bad_color = color < 0 && color != MPI_UNDEFINED;
  int rc = crnet_mpi_check_comm(&comm, "MPI_Comm_split");
  if (rc != MPI_SUCCESS)
    return rc;
  rc = crnet_comm_split(comm->c,
                        color == MPI_UNDEFINED || bad_color || newcomm == NULL
                            ? CRNET_UNDEFINED
                            : color,
                        key, &c);
  if (rc != 0)
    return crnet_mpi_from_crnet(comm, "MPI_Comm_split", rc);
  if (newcomm == NULL)
    return crnet_mpi_fail(comm, "MPI_Comm_split", MPI_ERR_ARG,
                          "newcomm is NULL");
  if (bad_color)
    return crnet_mpi_fail(comm, "MPI_Comm_split", MPI_ERR_ARG,
                          "color %d: a color is >= 0 or MPI_UNDEFINED", color);
  return crnet_mpi_comm_wrap(comm, "MPI_Comm_split", c, newcomm);
}

/* MPI_COMM_TYPE_SHARED: a comm of the ranks of each host, those that
 * share memory (crnet_comm_host). A rank whose arguments are wrong still
 * takes its part in the split (with no color), so that the others do not
 * wait for it, and fails. */
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                        MPI_Comm *newcomm) {
  const char *fn = "MPI_Comm_split_type";
  crnet_comm *c = NULL;
  int color = CRNET_UNDEFINED, bad = MPI_SUCCESS;
  int rc = crnet_mpi_check_comm(&comm, fn);
  if (rc != MPI_SUCCESS)
    return rc;
  if (newcomm == NULL)
    bad = MPI_ERR_ARG;
  else if (!crnet_mpi_info_valid(info))
    bad = MPI_ERR_INFO;
  else if (split_type == MPI_COMM_TYPE_SHARED)
    color = crnet_comm_host(comm->c, crnet_comm_rank(comm->c));
  else if (split_type != MPI_UNDEFINED)
    bad = MPI_ERR_ARG;
  if (color < 0 && color != CRNET_UNDEFINED) { /* no memory for the layout */
    bad = MPI_ERR_NO_MEM;
    color = CRNET_UNDEFINED;
  }
  rc = crnet_comm_split(comm->c, color, key, &c);
  if (rc != 0)
    return crnet_mpi_from_crnet(comm, fn, rc);
  if (bad == MPI_ERR_INFO)
    return crnet_mpi_fail(comm, fn, bad, "no such info object");
  if (bad == MPI_ERR_ARG && newcomm == NULL)
    return crnet_mpi_fail(comm, fn, bad, "newcomm is NULL");
  if (bad == MPI_ERR_ARG)
    return crnet_mpi_fail(comm, fn, bad,
                          "split_type %d: MPI_COMM_TYPE_SHARED or "
                          "MPI_UNDEFINED",
                          split_type);
  if (bad != MPI_SUCCESS)
    return crnet_mpi_fail(comm, fn, bad, "the hosts' layout");
  return crnet_mpi_comm_wrap(comm, fn, c, newcomm);
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
  crnet_comm *c = NULL;
  MPI_Comm dup = MPI_COMM_NULL;
  int rc = crnet_mpi_check_comm(&comm, "MPI_Comm_dup");
  if (rc != MPI_SUCCESS)
    return rc;
  rc = crnet_comm_dup(comm->c, &c);
  if (rc != 0)
    return crnet_mpi_from_crnet(comm, "MPI_Comm_dup", rc);
  /* A dup is collective: a rank whose newcomm is NULL took part, so that
   * the others do not wait for it, and fails. */
  if (newcomm == NULL) {
    crnet_comm_destroy(c);
    return crnet_mpi_fail(comm, "MPI_Comm_dup", MPI_ERR_ARG, "newcomm is NULL");
  }
  rc = crnet_mpi_comm_wrap(comm, "MPI_Comm_dup", c, &dup);
  if (rc != MPI_SUCCESS)
    return rc;
  /* A dup keeps the topology (MPI 3.1, 7.2). */
  if (comm->cart != NULL &&
      (dup->cart = crnet_mpi_cart_copy(comm->cart)) == NULL)
    rc = crnet_mpi_fail(comm, "MPI_Comm_dup", MPI_ERR_NO_MEM, "the grid");
  /* The attributes whose copy callbacks say so (MPI 3.1, 6.7.2); if one
   * fails, so does the dup, and the copies made so far go. */
  if (rc == MPI_SUCCESS)
    rc = crnet_mpi_attr_copy_all(comm, dup, "MPI_Comm_dup");
  if (rc != MPI_SUCCESS) {
    crnet_mpi_attr_delete_all(dup, "MPI_Comm_dup");
    crnet_mpi_attr_drop_all(dup);
    crnet_mpi_list_remove(dup);
    crnet_comm_destroy(dup->c);
    free(dup->cart);
    free(dup);
    return rc;
  }
  *newcomm = dup;
  return MPI_SUCCESS;
}

int crnet_mpi_comm_release(MPI_Comm c) {
  int rc = crnet_mpi_hidden_free(c);
  if (rc != CRNET_EINVAL)
    rc = crnet_comm_destroy(c->c);
  if (rc == CRNET_EINVAL)
    return rc;
  crnet_mpi_list_remove(c);
  free(c->cart);
  free(c->acked);
  free(c);
  /* A failed comm's sticky error is its, not the free's. */
  return 0;
}

int MPI_Comm_free(MPI_Comm *comm) {
  int rc;
  if (comm == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, "MPI_Comm_free", MPI_ERR_ARG,
                          "comm is NULL");
  MPI_Comm c = *comm; /* the program's handle changes only once freed */
  rc = crnet_mpi_check_comm(&c, "MPI_Comm_free");
  if (rc != MPI_SUCCESS)
    return rc;
  if (!c->user)
    return crnet_mpi_fail(c, "MPI_Comm_free", MPI_ERR_COMM,
                          "MPI_COMM_WORLD and MPI_COMM_SELF are not freed");
  crnet_mpi_orphans_reap(c, false);
  /* Refused while requests of it are not yet reported, even complete ones
   * (crnet_mpi_comm.requests); MPI would free it once they are. Requests
   * the program freed itself (MPI_Request_free) are waited for instead:
   * the comm goes when they end. */
  if (crnet_mpi_orphans_only(c)) {
    /* The delete callbacks first: one that fails keeps the comm. */
    rc = crnet_mpi_attr_delete_all(c, "MPI_Comm_free");
    if (rc != MPI_SUCCESS)
      return rc;
  }
  switch (crnet_mpi_orphans_defer_free(c)) {
  case CRNET_MPI_FREE_REFUSED:
    return crnet_mpi_fail(c, "MPI_Comm_free", MPI_ERR_UNSUPPORTED_OPERATION,
                          "the communicator has requests in flight: wait "
                          "for them first");
  case CRNET_MPI_FREE_DEFERRED:
    *comm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  default:
    break;
  }
  if (crnet_mpi_comm_release(c) == CRNET_EINVAL)
    return crnet_mpi_fail(c, "MPI_Comm_free", MPI_ERR_UNSUPPORTED_OPERATION,
                          "the communicator has requests in flight: wait "
                          "for them first");
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

/* Names: the program's, for its own messages and tools. A dup or split
 * does not inherit one (MPI 3.1, 6.8). */
static pthread_mutex_t name_lock = PTHREAD_MUTEX_INITIALIZER;

int MPI_Comm_set_name(MPI_Comm comm, const char *comm_name) {
  int rc = crnet_mpi_check_comm(&comm, "MPI_Comm_set_name");
  if (rc != MPI_SUCCESS)
    return rc;
  if (comm_name == NULL)
    return crnet_mpi_fail(comm, "MPI_Comm_set_name", MPI_ERR_ARG,
                          "comm_name is NULL");
  pthread_mutex_lock(&name_lock);
  /* Longer names are cut to MPI_MAX_OBJECT_NAME - 1 bytes, as MPI says. */
  snprintf(comm->name, sizeof comm->name, "%s", comm_name);
  pthread_mutex_unlock(&name_lock);
  return MPI_SUCCESS;
}

int MPI_Comm_get_name(MPI_Comm comm, char *comm_name, int *resultlen) {
  int rc = crnet_mpi_check_comm(&comm, "MPI_Comm_get_name");
  if (rc != MPI_SUCCESS)
    return rc;
  if (comm_name == NULL || resultlen == NULL)
    return crnet_mpi_fail(comm, "MPI_Comm_get_name", MPI_ERR_ARG,
                          "comm_name or resultlen is NULL");
  pthread_mutex_lock(&name_lock);
  memcpy(comm_name, comm->name, sizeof comm->name);
  pthread_mutex_unlock(&name_lock);
  *resultlen = (int)strlen(comm_name);
  return MPI_SUCCESS;
}
