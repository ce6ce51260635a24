/* Tuning: the constants of the α-β-γ cost model with which `auto` picks a
 * schedule (select.c), read from a small text file and made identical on
 * every rank of a job.
 *
 * The model prices a schedule as R·ρ·α + B·β + G·γ: R message rounds, B
 * bytes moved and G bytes reduced by the busiest rank (model.c has R, B and
 * G of every schedule). α is the cost of one round (mostly waking the
 * receiver), β of one byte on the wire, γ of one reduced byte, all in
 * seconds. ρ is 1 for every schedule but ring, whose rounds cost
 * ring_round·α: rounds are not alike, and on a host with more ranks than
 * cores a ring round, whose peers are the neighbours, costs less than a
 * circulant round (docs/TUNING.md has the figures).
 *
 * The file (docs/TUNING.md), written by `crbench --calibrate` or by hand:
 *
 *   # comments run from '#' to the end of the line
 *   alpha = 4e-05        # seconds per round
 *   beta = 1e-09         # seconds per byte sent or received
 *   gamma = 1.5e-10      # seconds per byte reduced
 *   ring_round = 0.7     # a ring round costs 0.7 alpha
 *   alpha.16 = 2.1e-04   # key.P: the figure measured with P ranks
 *   shm_alpha = 5e-06    # alpha and beta of shared-memory links, for the
 *   shm_beta = 2.5e-10   # host-local phases of two-level schedules
 *
 * Every key is optional. A constant's value for a job of p ranks is its key.p
 * line if there is one; between two key.P lines, the straight line through
 * them; below the first or above the last, the nearest one; with no key.P
 * line at all, the plain key; and the built-in default where the file says
 * nothing (1 for ring_round, so a file written before it existed prices
 * every round at α, as it always did). Per-p figures exist because α grows once
 * ranks outnumber cores (a round then waits for the scheduler as well as the
 * network).
 *
 * Validation is strict (a typo must not silently change schedule choices):
 * unknown keys, a key given twice, values that are not finite numbers in
 * range, P outside 2..2^24, more than CRNET__TUNING_MAX_POINTS figures per
 * constant, lines without '=' are all errors naming the file and the line.
 *
 * Where the file is: $CRNET_TUNING_FILE if set (set but empty: no file,
 * built-in defaults); else $XDG_CONFIG_HOME/crnet/tuning when
 * XDG_CONFIG_HOME is an absolute path; else $HOME/.config/crnet/tuning. A
 * missing file at the default place means the built-in defaults; a missing
 * file that CRNET_TUNING_FILE names is an error, because someone asked for
 * it.
 *
 * Agreement: the ranks of a job must pick the same schedule for every call
 * (the call signature would fail them with CRNET_EMISMATCH otherwise), so
 * only rank 0 reads the file, and its constants travel to every rank in the
 * rendezvous (rendezvous.h: RENDEZVOUS_REGISTER and RENDEZVOUS_TABLE carry the
 * encoding below). Other ranks' files are never read.
 */
#ifndef CRNET_TUNING_H
#define CRNET_TUNING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"

/* key.P figures per constant. */
#define CRNET__TUNING_MAX_POINTS 16
/* The smallest and largest P of a key.P line (CRNET_SIZE's range). */
#define CRNET__TUNING_MIN_P 2
#define CRNET__TUNING_MAX_P (1 << 24)
/* Files longer than this are refused: a tuning file is a dozen lines. */
#define CRNET__TUNING_MAX_FILE_BYTES 65536

/* The wire encoding, little-endian: for alpha, beta, gamma, ring_round,
 * shm_alpha, shm_beta in turn (crnet__tuning_param's order), the
 * plain value (f64, IEEE 754 bits), the number of key.P figures n (u32),
 * then CRNET__TUNING_MAX_POINTS slots of (P u32, value f64), the first n in
 * increasing P and the rest all zero. */
#define CRNET__TUNING_WIRE_PARAM (8 + 4 + CRNET__TUNING_MAX_POINTS * 12)
#define CRNET__TUNING_WIRE_SIZE (6 * CRNET__TUNING_WIRE_PARAM)

/* Built-in defaults: see tuning.c for where they come from. */
#define CRNET__TUNING_DEFAULT_ALPHA 4e-5
#define CRNET__TUNING_DEFAULT_BETA 1e-9
#define CRNET__TUNING_DEFAULT_GAMMA 1.5e-10
#define CRNET__TUNING_DEFAULT_RING_ROUND 1.0
#define CRNET__TUNING_DEFAULT_SHM_ALPHA 5e-6
#define CRNET__TUNING_DEFAULT_SHM_BETA 2.5e-10

typedef enum crnet__tuning_param {
  CRNET__TUNING_ALPHA = 0,
  CRNET__TUNING_BETA,
  CRNET__TUNING_GAMMA,
  CRNET__TUNING_RING_ROUND, /* a ring round, in multiples of alpha */
  /* alpha and beta of a shared-memory link (ranks of one host): they
   * price the schedules of a job whose links are all shared memory, and
   * the host-local phases of the two-level schedules (twolevel.h); alpha
   * and beta price everything else (TCP). */
  CRNET__TUNING_SHM_ALPHA,
  CRNET__TUNING_SHM_BETA,
  CRNET__TUNING_NPARAMS
} crnet__tuning_param;

typedef struct crnet__tuning_point {
  int32_t p;
  double value;
} crnet__tuning_point;

typedef struct crnet__tuning {
  double base[CRNET__TUNING_NPARAMS]; /* the plain key, or the default */
  uint32_t npoints[CRNET__TUNING_NPARAMS];
  crnet__tuning_point points[CRNET__TUNING_NPARAMS]
                            [CRNET__TUNING_MAX_POINTS]; /* increasing p */
  /* Where the values came from, for messages: "built-in defaults", a file
   * name, "rank 0". Not part of the wire encoding. */
  char source[256];
} crnet__tuning;

/* "alpha", "beta", "gamma", "ring_round", "shm_alpha", "shm_beta". */
const char *crnet__tuning_param_name(crnet__tuning_param k);

/* The built-in defaults, no per-p figures. Never fails. */
void crnet__tuning_defaults(crnet__tuning *t);

/* The constant's value for a job of p ranks (see the top of the file). */
double crnet__tuning_get(const crnet__tuning *t, crnet__tuning_param k,
                         int32_t p);

/* Parses a tuning file's text (len bytes, need not be NUL-terminated) into
 * *t, starting from the built-in defaults. `name` is the file name for
 * messages. 0, or CRNET_EINVAL with "NAME line N: why" in err (t is then
 * the defaults). */
int crnet__tuning_parse(crnet__tuning *t, const char *text, size_t len,
                        const char *name, char *err, size_t errlen);

/* Resolves the file's location (see the top of the file) into path.
 * Returns 1 when CRNET_TUNING_FILE names it (it must exist), 0 for the
 * default place (it may be missing), -1 when there is no file to read
 * (CRNET_TUNING_FILE set but empty, or neither XDG_CONFIG_HOME nor HOME
 * usable, or the path too long). */
int crnet__tuning_path(char *path, size_t n);

/* Reads and parses the file at path. must_exist: a missing file is an error
 * rather than the defaults. 0 (t filled, t->source says from where), or
 * CRNET_EINVAL (malformed; missing when it must exist) / CRNET_EIO (cannot
 * read it) with the reason, naming the file, in err. */
int crnet__tuning_load_file(crnet__tuning *t, const char *path, bool must_exist,
                            char *err, size_t errlen);

/* What crnet_comm_init calls: rank 0 loads the file from
 * crnet__tuning_path(); other ranks take the defaults for now and rank 0's
 * values in the rendezvous (bootstrap.c). 0 or an error as above. */
int crnet__tuning_init(crnet__tuning *t, int rank, char *err, size_t errlen);

/* The wire encoding (see CRNET__TUNING_WIRE_SIZE). Never fails. */
void crnet__tuning_encode(const crnet__tuning *t,
                          uint8_t out[CRNET__TUNING_WIRE_SIZE]);

/* Decodes and validates, by the file's rules; t->source becomes `source`.
 * 0, or CRNET_EIO when the bytes are not a valid tuning (t untouched). */
int crnet__tuning_decode(const uint8_t in[CRNET__TUNING_WIRE_SIZE],
                         const char *source, crnet__tuning *t);

/* "alpha 4e-05 s, beta 1e-09 s/B, gamma 1.5e-10 s/B, ring round x0.7,
 * shared memory alpha 5e-06 s, beta 2.5e-10 s/B at p = 8 (FILE)" into
 * buf, for log lines and tools. */
void crnet__tuning_describe(const crnet__tuning *t, int32_t p, char *buf,
                            size_t n);

#endif
