/* What PMIx itself costs a process, without crnet: the floor under a
 * crnet job's start through srun --mpi=pmix or mpirun
 * (tools/bench/launch_overhead.sh, docs/STARTING.md "Start-up cost").
 * It does what crnet's PMIx start does with PMIx and nothing else: init,
 * one put and commit, a fence that collects the data, one get of rank
 * 0's value, finalize. Exit 0 when every step succeeded. */
#include <pmix.h>
#include <stdio.h>
#include <string.h>

static int step_failed(const char *what, pmix_status_t rc) {
  fprintf(stderr, "pmix_floor: %s: %s\n", what, PMIx_Error_string(rc));
  return 1;
}

int main(void) {
  pmix_proc_t me;
  pmix_status_t rc = PMIx_Init(&me, NULL, 0);
  if (rc != PMIX_SUCCESS)
    return step_failed("PMIx_Init", rc);

  pmix_value_t value;
  PMIX_VALUE_LOAD(&value, "a rendezvous address", PMIX_STRING);
  /* Not "pmix...": PMIx keeps keys of that prefix for itself. */
  rc = PMIx_Put(PMIX_GLOBAL, "crnet.floor", &value);
  PMIX_VALUE_DESTRUCT(&value);
  if (rc == PMIX_SUCCESS)
    rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS)
    return step_failed("PMIx_Put", rc);

  pmix_proc_t all;
  PMIX_PROC_LOAD(&all, me.nspace, PMIX_RANK_WILDCARD);
  pmix_info_t collect;
  bool yes = true;
  PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  rc = PMIx_Fence(&all, 1, &collect, 1);
  PMIX_INFO_DESTRUCT(&collect);
  if (rc != PMIX_SUCCESS)
    return step_failed("PMIx_Fence", rc);

  pmix_proc_t root;
  PMIX_PROC_LOAD(&root, me.nspace, 0);
  pmix_value_t *got = NULL;
  rc = PMIx_Get(&root, "crnet.floor", NULL, 0, &got);
  if (rc != PMIX_SUCCESS)
    return step_failed("PMIx_Get", rc);
  PMIX_VALUE_RELEASE(got);

  rc = PMIx_Finalize(NULL, 0);
  if (rc != PMIX_SUCCESS)
    return step_failed("PMIx_Finalize", rc);
  return 0;
}
