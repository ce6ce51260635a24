/* crnet-mpi's extensions: the ULFM names (User-Level Failure Mitigation,
 * as Open MPI and MPICH spell them), on crnet's revoke, agree and shrink
 * (crnet.h, docs/RELIABILITY.md). A program written for ULFM includes
 * <mpi-ext.h> and builds unchanged; it runs under crlaunch --keep-going
 * (CRNET_ON_FAILURE=continue), without which a lost rank ends the job as
 * before. Set MPI_ERRORS_RETURN on the comms whose failures the program
 * handles: under MPI_ERRORS_ARE_FATAL the first failure still ends it. */
#ifndef CRNET_MPI_EXT_H
#define CRNET_MPI_EXT_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPIX_FT_ULFM 1 /* what programs test for ULFM's presence */

/* Error classes: a rank of the comm was lost; the comm was revoked. */
#define MPIX_ERR_PROC_FAILED 54
#define MPIX_ERR_PROC_FAILED_PENDING 55
#define MPIX_ERR_REVOKED 56

/* Every member's pending and later calls on comm fail with
 * MPIX_ERR_REVOKED; only the calls below still work on it. */
CRNET_MPI_EXTERN int MPIX_Comm_revoke(MPI_Comm comm);
/* A new comm of comm's survivors, in their order in comm. */
CRNET_MPI_EXTERN int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
/* *flag becomes the bitwise AND of every survivor's *flag, alike on every
 * survivor; MPIX_ERR_PROC_FAILED on every survivor if a rank was lost that
 * not every survivor had acknowledged (*flag is the agreed value still). */
CRNET_MPI_EXTERN int MPIX_Comm_agree(MPI_Comm comm, int *flag);
/* *flag = 1 if comm has been revoked (as far as this process has heard). */
CRNET_MPI_EXTERN int MPIX_Comm_is_revoked(MPI_Comm comm, int *flag);
/* The group of the ranks of comm known lost now (ULFM's newer name). */
CRNET_MPI_EXTERN int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp);
/* Acknowledges the ranks of comm known lost now; MPIX_Comm_agree no longer
 * fails because of them. */
CRNET_MPI_EXTERN int MPIX_Comm_failure_ack(MPI_Comm comm);
/* The group of the ranks the last MPIX_Comm_failure_ack acknowledged. */
CRNET_MPI_EXTERN int MPIX_Comm_failure_get_acked(MPI_Comm comm,
                                                 MPI_Group *failedgrp);

#ifdef __cplusplus
}
#endif

#endif
