/* A comm's collective state, and the hooks the runtime gets (comm_state.h).
 */
#include "comm_state.h"

#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "board_calls.h"

static int state_new(crnet_comm *c, const crnet_comm *parent) {
  struct crnet__comm_state *s = crnet__calloc(1, sizeof *s);
  if (s == NULL)
    return CRNET_ENOMEM;
  for (int k = 0; k < CRNET_COLL_COUNT; k++)
    snprintf(s->schedule[k], sizeof s->schedule[k], "%s",
             parent != NULL ? parent->coll->schedule[k]
                            : c->w->default_schedule[k]);
  c->coll = s;
  return 0;
}

static void state_free(struct crnet__comm_state *s) {
  if (s == NULL)
    return;
  for (int k = 0; k < CRNET_COLL_COUNT; k++)
    crnet__memo_drop(s->sched_memo[k]);
  free(s);
}

static const crnet__upper_layer collectives_layer = {
    .state_new = state_new,
    .state_free = state_free,
    .format_call = crnet__call_format,
};

/* A new comm's first call asks whether it can use its boards
 * (board_calls.c). If that call fails (a rank died just then), the comm
 * has failed as it would have at the program's first call: it is
 * returned all the same, and that call returns the error. */
int crnet__comm_made(crnet_comm **out, int rc) {
  if (rc == 0 && *out != NULL)
    (void)crnet__board_setup(*out);
  return rc;
}

int crnet_comm_init(crnet_comm **out, const crnet_config *cfg) {
  return crnet__comm_made(out, crnet__comm_init(out, cfg, &collectives_layer));
}
