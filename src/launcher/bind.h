/* Binding the ranks of one host to its CPUs (crlaunch --bind).
 *
 * A rank that may run on any CPU gets moved about by the scheduler: two
 * ranks that wait for each other in turn end up on one CPU while another
 * idles (a wake-up pulls the woken process to the waker's CPU), and with
 * more ranks than CPUs they crowd unevenly. Binding gives each rank CPUs of
 * its own, as mpirun's --bind-to does: the CPUs crlaunch itself may use
 * (its affinity mask: taskset, a cgroup's cpuset) are shared out among the
 * host's ranks.
 *
 *   ranks <= CPUs   rank i gets a block of CPUs/ranks of them (the first
 *                   CPUs % ranks blocks one more), whole cores together,
 *                   so that a rank's threads (a progress thread, OpenMP,
 *                   torch) stay on its block; with one CPU each, they are
 *                   taken one per core before a core's second thread.
 *   ranks > CPUs    rank i gets CPU i mod CPUs (in that same one-per-core
 *                   order): an even share of ranks per CPU, and no rank
 *                   migrating.
 *
 * The child inherits the mask of the thread that spawns it: crlaunch sets
 * its own thread's mask around each spawn (bind_enter, bind_leave). */
#ifndef CRNET_LAUNCHER_BIND_H
#define CRNET_LAUNCHER_BIND_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum crnet__bind_mode {
  CRNET__BIND_AUTO, /* as above */
  CRNET__BIND_NONE, /* every rank may use every CPU crlaunch may */
} crnet__bind_mode;

/* One CPU and where it sits: package (socket) and core within it. */
typedef struct crnet__cpu {
  int cpu, package, core;
} crnet__cpu;

/* Pure: the CPUs local rank `local` of `nlocal` gets out of `cpus` (n of
 * them, any order). Writes at most n CPU numbers, ascending, to out and
 * returns how many (0 when n or nlocal is not positive, or local is out of
 * range). */
int crnet__bind_assign(const crnet__cpu *cpus, int n, int nlocal, int local,
                       int *out);

/* The CPUs of this process (its affinity mask), with their topology from
 * /sys/devices/system/cpu (package 0 and core = CPU number where it says
 * nothing). */
typedef struct crnet__bind_plan {
  crnet__bind_mode mode;
  int nlocal;       /* the host's ranks */
  int ncpus;        /* the CPUs they share */
  crnet__cpu *cpus; /* them */
} crnet__bind_plan;

/* 0, or -1 with the reason in why (out of memory; no affinity mask). */
int crnet__bind_plan_init(crnet__bind_plan *p, crnet__bind_mode mode,
                          int nlocal, char *why, size_t whylen);
void crnet__bind_plan_free(crnet__bind_plan *p);

/* Sets the calling thread's mask to local rank `local`'s CPUs, the old one
 * saved in *saved, and describes them in desc ("2-3"); then the process
 * spawned next is bound. With mode none, or no plan, changes nothing and
 * returns 1. 0 on success, -1 with errno. */
int crnet__bind_enter(const crnet__bind_plan *p, int local, cpu_set_t *saved,
                      char *desc, size_t desclen);

/* Restores the mask bind_enter saved. */
void crnet__bind_leave(const cpu_set_t *saved);

/* "0-3,8,10-11" for the CPU numbers cpus[0..n) (ascending). */
void crnet__cpu_list_format(const int *cpus, int n, char *buf, size_t len);

#endif
