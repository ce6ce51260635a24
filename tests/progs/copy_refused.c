/* copy_refused: a shared-memory link whose reader may not read the
 * writer's memory, as in a container whose seccomp profile refuses
 * process_vm_readv (Docker's default does, without CAP_SYS_PTRACE).
 *
 *   crlaunch -n 2 -x CRNET_SHM_SINGLE_COPY=1 copy_refused setup
 *   crlaunch -n 2 -x CRNET_SHM_SINGLE_COPY=1 copy_refused midrun
 *
 * Rank 1 installs a seccomp filter that fails process_vm_readv with EPERM
 * (the only call that copies out of another process).
 *   setup:  before init. Its probe of rank 0's memory fails, so it asks
 *           rank 0 for two copies; the link is still shared memory, and
 *           large allreduces, bcasts and allgathers come out right (a
 *           piece handed over by address could not have been read).
 *   midrun: after a first large allreduce (one copy, checked). The next
 *           one's copy fails: rank 1's call fails saying so, rank 0's
 *           fails too, and neither hangs.
 * Exits 0 when that is what happened, 1 otherwise (saying what), 77 where
 * no filter can be installed (another architecture). */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "crnet.h"

#define COUNT (1 << 20) /* int32: 4 MiB, far above the by-address minimum */
#define SKIP 77

#if defined(__x86_64__)
#define FILTER_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define FILTER_ARCH AUDIT_ARCH_AARCH64
#endif

/* process_vm_readv fails with EPERM in every thread of this process from
 * now on; everything else is allowed. 0, or -1 (errno set). */
static int refuse_copies(void) {
#ifdef FILTER_ARCH
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FILTER_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return -1;
  /* TSYNC: the progress thread, if there is one, too. */
  return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                      SECCOMP_FILTER_FLAG_TSYNC, &prog);
#else
  errno = ENOSYS;
  return -1;
#endif
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A checked 4 MiB allreduce, bcast from rank 0 and allgather of 2 MiB
 * blocks: 0, a crnet error, or -1000 for a wrong value. */
static int large_calls(crnet_comm *c, int32_t *in, int32_t *out, int seed) {
  int rank = crnet_comm_rank(c), p = crnet_comm_size(c), rc;
  size_t block = COUNT / (size_t)p;
  for (int i = 0; i < COUNT; i++)
    in[i] = rank + i + seed;
  rc = crnet_allreduce(c, in, out, COUNT, CRNET_INT32, CRNET_SUM);
  for (int i = 0; rc == 0 && i < COUNT; i++)
    if (out[i] != p * (p - 1) / 2 + p * (i + seed))
      rc = -1000;
  if (rc != 0)
    return rc;
  rc = crnet_bcast(c, in, COUNT, CRNET_INT32, 0);
  for (int i = 0; rc == 0 && i < COUNT; i++)
    if (in[i] != i + seed)
      rc = -1000;
  if (rc != 0)
    return rc;
  for (size_t i = 0; i < block; i++)
    in[i] = (int32_t)(rank * 7 + (int)i);
  rc = crnet_allgather(c, in, out, block, CRNET_INT32);
  for (size_t i = 0; rc == 0 && i < block * (size_t)p; i++)
    if (out[i] != (int32_t)((int)(i / block) * 7 + (int)(i % block)))
      rc = -1000;
  return rc;
}

static const char *said(int rc) {
  return rc == -1000 ? "a wrong value" : crnet_strerror(rc);
}

int main(int argc, char **argv) {
  crnet_comm *c;
  crnet_link_kind k = CRNET_LINK_NONE;
  const char *mode = argc > 1 ? argv[1] : "";
  int midrun = strcmp(mode, "midrun") == 0, rank, rc;
  int32_t *in = malloc(COUNT * sizeof *in), *out = malloc(COUNT * sizeof *out);
  if (in == NULL || out == NULL || (!midrun && strcmp(mode, "setup") != 0)) {
    fprintf(stderr, "usage: copy_refused setup|midrun\n");
    return 1;
  }
#ifndef FILTER_ARCH
  fprintf(stderr, "copy_refused: no seccomp filter for this architecture\n");
  return SKIP;
#endif
  rank = atoi(getenv("CRNET_RANK") != NULL ? getenv("CRNET_RANK") : "-1");
  if (!midrun && rank == 1 && refuse_copies() != 0) {
    fprintf(stderr, "copy_refused: seccomp: %s\n", strerror(errno));
    return 1;
  }
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0) {
    fprintf(stderr, "copy_refused: init: %s\n", crnet_init_errmsg());
    return 1;
  }
  rank = crnet_comm_rank(c);
  double t_give_up = now_s() + 30;
  /* The link moves to shared memory in the background after init; the
   * ranks agree on when both sides see it there (and on giving up). */
  for (int shm = 0, both = 0, give_up = 0; rc == 0 && !both && !give_up;) {
    int mine[2], all[2];
    rc = crnet_comm_peer_link(c, 1 - rank, &k);
    shm = k == CRNET_LINK_SHM;
    mine[0] = shm;
    mine[1] = now_s() > t_give_up;
    if (rc == 0)
      rc = crnet_allreduce(c, mine, all, 2, CRNET_INT32, CRNET_MIN);
    both = all[0];
    give_up = all[1];
  }
  if (rc == 0 && k != CRNET_LINK_SHM) {
    fprintf(stderr, "copy_refused: rank %d: the link is not shared memory\n",
            rank);
    return 1;
  }
  if (rc == 0)
    rc = large_calls(c, in, out, 1);
  if (rc != 0) {
    fprintf(stderr, "copy_refused: %s: rank %d: %s (%s)\n", mode, rank,
            said(rc), crnet_comm_errmsg(c));
    return 1;
  }
  if (!midrun) {
    if (rank == 0)
      printf("copy_refused: setup: rank 1 may not read rank 0's memory; "
             "4 MiB allreduce, bcast and allgather right on shared memory\n");
    crnet_comm_destroy(c);
    free(in);
    free(out);
    return 0;
  }
  if (rank == 1 && refuse_copies() != 0) {
    fprintf(stderr, "copy_refused: seccomp: %s\n", strerror(errno));
    return 1;
  }
  double t0 = now_s();
  rc = crnet_barrier(c);
  if (rc == 0)
    rc = large_calls(c, in, out, 2);
  double took = now_s() - t0;
  const char *why = crnet_comm_errmsg(c);
  printf("copy_refused: midrun: rank %d: %s after %.2f s (%s)\n", rank,
         said(rc), took, why != NULL ? why : "");
  if (rc == 0 || rc == -1000) {
    fprintf(stderr,
            "copy_refused: midrun: rank %d: the refused copy went "
            "unnoticed\n",
            rank);
    return 1;
  }
  /* The reader says what failed. */
  if (rank == 1 && (why == NULL || strstr(why, "memory failed") == NULL)) {
    fprintf(stderr,
            "copy_refused: midrun: rank 1's error does not name the "
            "copy: %s\n",
            why != NULL ? why : "(none)");
    return 1;
  }
  crnet_comm_destroy(c);
  free(in);
  free(out);
  return 0;
}
