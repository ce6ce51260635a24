/* ulfm_survive: an MPI program written for ULFM (User-Level Failure
 * Mitigation: MPIX_Comm_revoke, MPIX_Comm_agree, MPIX_Comm_shrink, as Open
 * MPI and MPICH offer them), built with crnet-mpicc unchanged.
 *
 *   crnet-mpicc -o ulfm_survive ulfm_survive.c
 *   crlaunch --keep-going -n 4 ./ulfm_survive [steps] [lost_rank] [lost_step]
 *
 * Each step allreduces sum(i * step) over i = 1..N, the items dealt out over
 * the current comm, and checks it. At lost_step the rank lost_rank (default
 * the last) kills itself. The survivors agree after each step on whether
 * it succeeded everywhere; if not, they revoke the comm, acknowledge the
 * failures, shrink, and redo the step on the shrunk comm. Exit 0 when every
 * sum was right. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <mpi-ext.h>
#include <mpi.h>

#define N 100000

static long long partial(int rank, int p, int step) {
  long long s = 0;
  for (long long i = 1 + rank; i <= N; i += p)
    s += i * step;
  return s;
}

/* "PROC_FAILED", "REVOKED" or the class number, for the log. */
static const char *class_name(int rc) {
  int cls;
  MPI_Error_class(rc, &cls);
  return cls == MPIX_ERR_PROC_FAILED ? "MPIX_ERR_PROC_FAILED"
         : cls == MPIX_ERR_REVOKED   ? "MPIX_ERR_REVOKED"
                                     : "another class";
}

int main(int argc, char **argv) {
  MPI_Comm comm;
  int steps, lost_rank, lost_step, world_rank, world_size, wrong = 0;
  int redone = 0, unexpected = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  steps = argc > 1 ? atoi(argv[1]) : 10;
  lost_rank = argc > 2 ? atoi(argv[2]) : world_size - 1;
  lost_step = argc > 3 ? atoi(argv[3]) : steps / 2;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  for (int step = 1; step <= steps;) {
    long long mine, total = 0;
    int rank, size, rc, flag;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (step == lost_step && world_rank == lost_rank)
      kill(getpid(), SIGKILL);
    mine = partial(rank, size, step);
    rc = MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, comm);
    if (rc != MPI_SUCCESS) {
      const char *name = class_name(rc);
      if (name[0] == 'a')
        unexpected++;
      MPIX_Comm_revoke(comm);
    }
    flag = rc == MPI_SUCCESS;
    rc = MPIX_Comm_agree(comm, &flag);
    if (rc == MPI_SUCCESS && flag) {
      if (total != (long long)step * N * (N + 1) / 2)
        wrong++;
      step++;
      continue;
    }
    /* A failure: go on with the survivors. */
    MPI_Comm shrunk;
    MPI_Group failed, known;
    int nfailed = 0, nknown = 0, revoked = 0;
    MPIX_Comm_revoke(comm);
    MPIX_Comm_is_revoked(comm, &revoked);
    MPIX_Comm_failure_ack(comm);
    MPIX_Comm_failure_get_acked(comm, &failed);
    MPIX_Comm_get_failed(comm, &known);
    MPI_Group_size(failed, &nfailed);
    MPI_Group_size(known, &nknown);
    if (failed != MPI_GROUP_EMPTY)
      MPI_Group_free(&failed);
    if (known != MPI_GROUP_EMPTY)
      MPI_Group_free(&known);
    if (!revoked || nknown < nfailed)
      unexpected++;
    if (MPIX_Comm_shrink(comm, &shrunk) != MPI_SUCCESS) {
      fprintf(stderr, "rank %d: MPIX_Comm_shrink failed\n", world_rank);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_free(&comm);
    comm = shrunk;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (nfailed == 0)
      unexpected++;
    redone++;
  }
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (rank == 0)
    printf("%d steps on %d of %d ranks, %d redone; every sum %s%s\n", steps,
           size, world_size, redone, wrong == 0 ? "right" : "checked: WRONG",
           unexpected == 0 ? "" : "; an unexpected error class");
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return wrong == 0 && unexpected == 0 ? 0 : 1;
}
