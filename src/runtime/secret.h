/* Memory for secrets: the job key, handshake state, session keys.
 *
 * A process that crashes writes a core file, and whoever reads it would
 * find every key the process held in ordinary heap memory. Secrets live
 * instead in pages marked MADV_DONTDUMP, which Linux leaves out of core
 * files (and out of what gcore writes), and they are wiped when freed.
 * Nothing else shares those pages, so a core file still holds everything
 * a program's author needs to debug it.
 *
 * Blocks are at most CRNET__SECRET_MAX bytes, aligned to 64, zeroed. They
 * come from 64 KiB slabs of such pages; a process holding a few thousand
 * links needs a few MiB. Thread safe: comms may live in different threads.
 */
#ifndef CRNET_SECRET_H
#define CRNET_SECRET_H

#include <stdbool.h>
#include <stddef.h>

#define CRNET__SECRET_MAX 1024

/* A zeroed block of n <= CRNET__SECRET_MAX bytes, or NULL when out of
 * memory. */
void *crnet__secret_alloc(size_t n);

/* Wipes and frees a block of crnet__secret_alloc. NULL does nothing. */
void crnet__secret_free(void *p);

/* True if p lies in memory that core files leave out (for tests: reads
 * /proc/self/smaps). */
bool crnet__secret_is_undumped(const void *p);

#endif
