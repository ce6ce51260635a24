/* A directory: a key-value store that every rank of a job reaches, kept by
 * the launcher that started the job (a PMIx server: srun --mpi=pmix, Open
 * MPI's mpirun, prterun) or by the program (torch's store, through
 * crnet_config.directory). With one, nobody has to set CRNET_RENDEZVOUS or
 * hand out a job key: rank 0 serves the rendezvous on a port of its own
 * choosing and publishes where, with a fresh job key; the other ranks look
 * both up (bootstrap.c, "published rendezvous").
 *
 * The directory decides who may read what rank 0 publishes: PMIx's store
 * is the launcher's, which only the job's processes reach; a torch store is
 * a TCP server anyone who can reach it may read (docs/STARTING.md). */
#ifndef CRNET_DIRECTORY_H
#define CRNET_DIRECTORY_H

#include <stdbool.h>
#include <stddef.h>

#include "crnet.h"

/* Keys rank 0 publishes. */
#define CRNET__DIR_RENDEZVOUS "crnet.rendezvous"
#define CRNET__DIR_KEY "crnet.key"
/* The longest value: a list of addresses, or a key in hex. */
#define CRNET__DIR_VALUE_MAX 1024

typedef struct crnet__directory {
  const char *name; /* for messages: "PMIx", "the program's directory" */
  /* Rank 0: makes value visible under key to every rank. 0, or a negative
   * code with the reason in why. */
  int (*publish)(void *ctx, const char *key, const char *value, char *why,
                 size_t why_len);
  /* Every rank, once rank 0 has published and before any lookup (PMIx's
   * fence); NULL where a lookup waits for the value by itself. */
  int (*fence)(void *ctx, double timeout_s, char *why, size_t why_len);
  /* The value rank 0 published under key, waiting up to timeout_s for it.
   * 0, or a negative code (CRNET_ETIMEDOUT, CRNET_EIO) with why. */
  int (*lookup)(void *ctx, const char *key, char *value, size_t cap,
                double timeout_s, char *why, size_t why_len);
  /* Lets go of the directory; NULL if there is nothing to let go of. */
  void (*close)(void *ctx);
  void *ctx;
} crnet__directory;

/* True when a PMIx server started this process (it left PMIX_RANK and
 * PMIX_NAMESPACE in the environment), whether or not this build can talk
 * to it. */
bool crnet__pmix_started(void);

/* True when this build has PMIx (libpmix-dev at build time). */
bool crnet__pmix_built(void);

/* Joins the PMIx server: this process's rank, the job's size, and the
 * directory on its key-value store. 0, or CRNET_EINVAL / CRNET_EIO with the
 * reason in why (this build has no PMIx, or PMIx_Init failed). */
int crnet__pmix_open(int *rank, int *size, crnet__directory *dir, char *why,
                     size_t why_len);

/* The program's directory (crnet_config.directory) as one of these. */
void crnet__directory_from_config(const crnet_directory *d,
                                  crnet__directory *out);

#endif
