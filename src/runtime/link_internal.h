/* What link.c (reading, the handshake, the link's life) and link_write.c
 * (writing) share; nothing outside the two includes this. */
#ifndef CRNET_LINK_INTERNAL_H
#define CRNET_LINK_INTERNAL_H

#include "link.h"

/* Something a request may be waiting for happened on the link (see
 * crnet__link.io_flag and io_count). On every read and write: inline. */
static inline void crnet__link_note_io(crnet__link *l) {
  if (l->io_flag != NULL)
    *l->io_flag = true;
  if (l->io_count != NULL)
    ++*l->io_count;
}

/* The first failure of an established link: stop reading, fail the posted
 * receive, tell the owner once. */
void crnet__link_fail(crnet__link *l, int status, const char *why);

/* Completes every queued write of an encrypted link with `status`. */
void crnet__link_fail_queued(crnet__link *l, int status);

/* Seals and writes what is queued on an encrypted link, within the bound
 * on chunks in flight (all: no bound). */
void crnet__link_pump_sealing(crnet__link *l, bool all);

/* Frees the spare write chunks of a closed link. */
void crnet__link_free_spares(crnet__link *l);

/* Starts reading frames (a no-op while connecting or reading already). */
void crnet__link_start_reading(crnet__link *l);

/* The close callback of every handle the link owns (h->data is the link):
 * the last one ends the link's life (on_closed). */
void crnet__link_handle_closed(uv_handle_t *h);

/* The link's byte stream out, on TCP or, once switched, on shared memory
 * (link_shm.h): as uv_write and uv_try_write. inline_only: on shared
 * memory, through the ring, never by address. */
int crnet__link_io_write(crnet__link *l, uv_write_t *w, const uv_buf_t *b,
                         unsigned n, uv_write_cb cb, bool inline_only);
int crnet__link_io_try_write(crnet__link *l, const uv_buf_t *b, unsigned n);

#endif
