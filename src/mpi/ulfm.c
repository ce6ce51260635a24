/* ULFM's names (mpi-ext.h) on crnet's revoke, agree and shrink (crnet.h,
 * docs/RELIABILITY.md). The failure classes come from errors.c's mapping:
 * CRNET_EPEER is MPIX_ERR_PROC_FAILED, CRNET_EREVOKED MPIX_ERR_REVOKED.
 */
#include <stdlib.h>

#include "mpi-ext.h"
#include "mpi_internal.h"

int MPIX_Comm_revoke(MPI_Comm comm) {
  int rc = crnet_mpi_check_comm(&comm, "MPIX_Comm_revoke");
  if (rc != MPI_SUCCESS)
    return rc;
  /* The hidden dup of the v-rooted collectives is part of the comm. */
  if (comm->hidden != NULL)
    crnet_comm_revoke(comm->hidden);
  return crnet_mpi_from_crnet(comm, "MPIX_Comm_revoke",
                              crnet_comm_revoke(comm->c));
}

int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm) {
  crnet_comm *c = NULL;
  int rc = crnet_mpi_check_comm(&comm, "MPIX_Comm_shrink");
  if (rc != MPI_SUCCESS)
    return rc;
  if (newcomm == NULL)
    return crnet_mpi_fail(comm, "MPIX_Comm_shrink", MPI_ERR_ARG,
                          "newcomm is NULL");
  rc = crnet_comm_shrink(comm->c, &c);
  if (rc != 0)
    return crnet_mpi_from_crnet(comm, "MPIX_Comm_shrink", rc);
  return crnet_mpi_comm_wrap(comm, "MPIX_Comm_shrink", c, newcomm);
}

int MPIX_Comm_agree(MPI_Comm comm, int *flag) {
  int rc = crnet_mpi_check_comm(&comm, "MPIX_Comm_agree");
  if (rc != MPI_SUCCESS)
    return rc;
  if (flag == NULL)
    return crnet_mpi_fail(comm, "MPIX_Comm_agree", MPI_ERR_ARG,
                          "flag is NULL");
  return crnet_mpi_from_crnet(comm, "MPIX_Comm_agree",
                              crnet_comm_agree(comm->c, flag));
}

int MPIX_Comm_failure_ack(MPI_Comm comm) {
  int rc = crnet_mpi_check_comm(&comm, "MPIX_Comm_failure_ack"), n;
  int size, *ranks;
  if (rc != MPI_SUCCESS)
    return rc;
  size = crnet_comm_size(comm->c);
  ranks = malloc(sizeof *ranks * (size_t)(size > 0 ? size : 1));
  if (ranks == NULL)
    return crnet_mpi_fail(comm, "MPIX_Comm_failure_ack", MPI_ERR_NO_MEM,
                          "out of memory");
  n = crnet_comm_ack_lost(comm->c, ranks, size);
  if (n < 0) {
    free(ranks);
    return crnet_mpi_from_crnet(comm, "MPIX_Comm_failure_ack", n);
  }
  free(comm->acked);
  comm->acked = ranks;
  comm->nacked = n;
  return MPI_SUCCESS;
}

int MPIX_Comm_is_revoked(MPI_Comm comm, int *flag) {
  int rc = crnet_mpi_check_comm(&comm, "MPIX_Comm_is_revoked");
  if (rc != MPI_SUCCESS)
    return rc;
  if (flag == NULL)
    return crnet_mpi_fail(comm, "MPIX_Comm_is_revoked", MPI_ERR_ARG,
                          "flag is NULL");
  *flag = crnet_comm_is_revoked(comm->c) == 1;
  return MPI_SUCCESS;
}

/* The group of comm's ranks in ranks[0..n-1]: MPI_GROUP_EMPTY for none. */
static int group_of_ranks(MPI_Comm comm, const int *ranks, int n,
                          MPI_Group *out) {
  MPI_Group all;
  int rc;
  if (n == 0) {
    *out = MPI_GROUP_EMPTY;
    return MPI_SUCCESS;
  }
  rc = MPI_Comm_group(comm, &all);
  if (rc != MPI_SUCCESS)
    return rc;
  rc = MPI_Group_incl(all, n, ranks, out);
  MPI_Group_free(&all);
  return rc;
}

int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp) {
  int rc = crnet_mpi_check_comm(&comm, "MPIX_Comm_get_failed"), n, size;
  int *ranks;
  if (rc != MPI_SUCCESS)
    return rc;
  if (failedgrp == NULL)
    return crnet_mpi_fail(comm, "MPIX_Comm_get_failed", MPI_ERR_ARG,
                          "failedgrp is NULL");
  size = crnet_comm_size(comm->c);
  ranks = malloc(sizeof *ranks * (size_t)(size > 0 ? size : 1));
  if (ranks == NULL)
    return crnet_mpi_fail(comm, "MPIX_Comm_get_failed", MPI_ERR_NO_MEM,
                          "out of memory");
  n = crnet_comm_lost(comm->c, ranks, size);
  rc = n < 0 ? crnet_mpi_from_crnet(comm, "MPIX_Comm_get_failed", n)
             : group_of_ranks(comm, ranks, n, failedgrp);
  free(ranks);
  return rc;
}

int MPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp) {
  int rc = crnet_mpi_check_comm(&comm, "MPIX_Comm_failure_get_acked");
  if (rc != MPI_SUCCESS)
    return rc;
  if (failedgrp == NULL)
    return crnet_mpi_fail(comm, "MPIX_Comm_failure_get_acked", MPI_ERR_ARG,
                          "failedgrp is NULL");
  return group_of_ranks(comm, comm->acked, comm->nacked, failedgrp);
}
