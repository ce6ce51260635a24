/* crbench --calibrate: measures the cost model's constants on the running
 * job and writes them into the tuning file that crnet's `auto` reads
 * (docs/TUNING.md).
 *
 * The model prices a schedule at R·ρ·α + B·β + G·γ (R rounds, B bytes
 * moved, G bytes reduced by the busiest rank; ρ = ring_round for ring, 1
 * for the rest). So a few calls whose R, B and G are known, timed as
 * crbench times rows (barrier, one call, the slowest rank's time, median
 * of the repetitions), give, by least squares, the cost of a round α (a
 * circulant or hypercube round), of a ring round α_r, and β and γ; then
 * ring_round = α_r / α:
 *
 *   what                             R        B          G
 *   barrier, circulant               L        0          0
 *   allreduce of p elements, circ.   2L       ~0         ~0
 *   allreduce of p elements, ring    2(p-1)   ~0         ~0
 *   allreduce of p elements, hyp.    d+3f     ~0         ~0
 *   allgather of S, circulant        L        qS         0
 *   allgather of S, ring             p-1      qS         0
 *   allgather of S, hypercube        d+2f     (q+f)S     0
 *   reduce_scatter of S, circ.       L        qS         qS (S at p = 3)
 *   reduce_scatter of S, ring        p-1      qS         qS
 *   allreduce of A, hypercube        d+3f     (d+2f)A    (d+f/2)A
 *   allreduce of A, circulant        2L       2qA        qA (A at p = 3)
 *
 * with L = ceil(log2 p), d = floor(log2 p), f = 1 when p is not a power
 * of two, else 0, q = (p-1)/p; S = MAX/16, MAX/4 and MAX (-e, 1 MiB by
 * default, where auto's choices are made; S is the whole vector:
 * allgather's output, reduce_scatter's input) and A = MAX/16, MAX/4 and
 * MAX/2 (hypercube's messages are the whole vector: beyond about 512 KiB
 * per message this VM's loopback costs more per byte, which no linear model
 * fits). The small allreduce has one element per block, so that every
 * round of every schedule is an exchange (with fewer elements than ranks
 * most blocks are empty and the rounds degenerate into one-way messages).
 * The rows of R, B and G are those of src/schedules/model.c, written out
 * here because crbench uses the public API only. The fit minimises the
 * relative errors (every row counts alike: the small calls pin the round
 * costs, the large ones β and γ); a γ that comes out negative (reductions
 * hidden in the noise, or overlapped with receiving) is set to 0 and the
 * rest refitted. A fit without positive α and β, or with a ring_round
 * outside the file's range (0.1 to 10), writes nothing. (Hypercube's rounds
 * share α: fitted apart, they came out at 0.92 to 1.13 of a circulant
 * round on the 2-core VM, noise around 1, and a factor of that noise
 * flipped the ties where hypercube and circulant have the same rounds and
 * volume, allgather at p = 2^d.)
 *
 * The file: rank 0 writes --tuning-out, else the file the library reads
 * (CRNET_TUNING_FILE, else $XDG_CONFIG_HOME/crnet/tuning or
 * ~/.config/crnet/tuning, creating the directory). An existing file is
 * merged: its key.P lines for other p are kept, this p's and the plain
 * keys are replaced, so calibrating at p = 2, 4, 8, 16 in turn builds α(p)
 * (the cost of a round grows once ranks outnumber cores). A line crbench
 * does not understand stops it, rather than losing the line. The file is
 * written to FILE.tmp and renamed over FILE.
 *
 * Shared memory. When every link of the job is shared memory (all ranks on
 * one host, the default there), the fit measures those links: α and β are
 * written as shm_alpha and shm_beta (what auto prices one-host jobs and
 * the host-local phases of two-level schedules with), and the file's
 * alpha, beta, gamma and ring_round lines, which are TCP's, are kept as
 * they are. Calibrate TCP's across hosts, or on one host with
 * CRNET_TRANSPORT=tcp.
 *
 * CRBENCH_CALIBRATE_MODEL="ALPHA,BETA,GAMMA,RING_ROUND" (for tests: pass it
 * with crlaunch -x) keeps every call and its timing but takes each row's
 * time from the model under those constants instead of the clock, so the
 * fit must give them back and the file is written however busy the machine
 * is: on a loaded machine a rank that loses its core for a time slice
 * (milliseconds, against rows of tens of microseconds) makes the measured
 * fit refuse, rightly, and the tests of the file and of the fit itself
 * must not depend on that.
 */
#include "crbench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROWS 32
#define MAX_KEPT 128 /* key.P lines kept from an existing file */

/* The unknowns, in the order of the fit: the cost of a round (circulant,
 * hypercube), of a ring round, β, γ (last, so that dropping it fits the
 * rest). */
enum { X_ALPHA, X_RING, X_BETA, X_GAMMA, NX };

/* The file's keys, in crnet__tuning_param's order; a fit gives the first
 * NFIT, and on shared memory writes its alpha and beta as the last two. */
#define NFIT 4
#define NKEYS 6
static const char *const keys[NKEYS] = {"alpha",      "beta",
                                        "gamma",      "ring_round",
                                        "shm_alpha",  "shm_beta"};

struct row {
  const char *what;     /* "allgather" ... */
  crnet_collective coll;
  const char *schedule;
  size_t bytes;         /* the vector: see the table above */
  double r, b, g;       /* the model's terms */
  int family;           /* X_ALPHA or X_RING: whose rounds r counts */
  double t;             /* measured, seconds */
};

struct cal {
  crnet_comm *comm;
  bool shm; /* every link of the job is shared memory */
  const struct crbench_calibration *c;
  int rank, p;
  size_t esize;
  void *send, *recv;
  double *times;
  bool given;       /* CRBENCH_CALIBRATE_MODEL: times from the model */
  double given_x[NX]; /* its constants as the fit's unknowns */
};

/* A row's terms as the fit's columns (see X_ALPHA ...). */
static void columns(const struct row *w, double v[NX]) {
  for (int j = 0; j < NX; j++)
    v[j] = 0;
  v[w->family] = w->r;
  v[X_BETA] = w->b;
  v[X_GAMMA] = w->g;
}

/* The model's time for a row under the fitted unknowns x. */
static double model_of(const struct row *w, const double x[NX]) {
  double v[NX], t = 0;
  columns(w, v);
  for (int j = 0; j < NX; j++)
    t += v[j] * x[j];
  return t;
}

/* The element size of the calibration's datatype. */
static size_t esize_of(crnet_datatype dt) { return crnet_datatype_size(dt); }

static int one_call(struct cal *k, const struct row *w) {
  size_t n = w->bytes / k->esize / (size_t)k->p;
  switch (w->coll) {
  case CRNET_COLL_BARRIER:
    return crnet_barrier(k->comm);
  case CRNET_COLL_ALLREDUCE:
    return crnet_allreduce(k->comm, k->send, k->recv, w->bytes / k->esize,
                           k->c->dt, k->c->op);
  case CRNET_COLL_ALLGATHER:
    return crnet_allgather(k->comm, k->send, k->recv, n, k->c->dt);
  case CRNET_COLL_REDUCE_SCATTER:
    return crnet_reduce_scatter_block(k->comm, k->send, k->recv, n, k->c->dt,
                                      k->c->op);
  default:
    return CRNET_EINVAL;
  }
}

/* Times one row as crbench times a row: warm-up calls, then per repetition
 * a barrier and one timed call; the slowest rank's time per repetition;
 * the median. The bookkeeping runs on auto. */
static int measure(struct cal *k, struct row *w) {
  const struct crbench_calibration *c = k->c;
  int rc = crnet_comm_set_schedule(k->comm, w->coll, w->schedule);
  for (int i = 0; rc == 0 && i < c->warmup + c->iters; i++) {
    double t0 = 0;
    if (i >= c->warmup) {
      rc = crnet_barrier(k->comm);
      t0 = crbench_now();
    }
    if (rc == 0)
      rc = one_call(k, w);
    if (i >= c->warmup)
      k->times[i - c->warmup] =
          k->given ? model_of(w, k->given_x) : crbench_now() - t0;
  }
  if (rc == 0)
    rc = crnet_comm_set_schedule(k->comm, w->coll, "auto");
  if (rc == 0)
    rc = crnet_allreduce(k->comm, CRNET_IN_PLACE, k->times, (size_t)c->iters,
                         CRNET_DOUBLE, CRNET_MAX);
  if (rc != 0) {
    fprintf(stderr, PROG ": rank %d: --calibrate: %s %s (%zu B): %s: %s\n",
            k->rank, w->what, w->schedule, w->bytes, crnet_err_name(rc),
            crnet_comm_errmsg(k->comm));
    return 1;
  }
  w->t = crbench_median(k->times, (size_t)c->iters);
  return 0;
}

/* Whose rounds a schedule's are, for the rows below. */
static int family_of(const char *schedule) {
  return strcmp(schedule, "ring") == 0 ? X_RING : X_ALPHA;
}

static struct row make_row(const char *what, crnet_collective coll,
                           const char *schedule, size_t bytes, double r,
                           double b, double g) {
  return (struct row){what, coll, schedule, bytes, r, b, g,
                      family_of(schedule), 0};
}

/* The rows of the table at the top, for this p. */
static size_t plan(const struct cal *k, struct row *rows) {
  double p = k->p, q = (p - 1) / p, L = 0, d = 0, f;
  size_t n = 0, sizes[3], asizes[3];
  size_t unit = k->esize * (size_t)k->p;
  double s = (double)unit; /* the small allreduce: one element per block */
  while ((1 << (int)L) < k->p)
    L++;
  while ((2 << (int)d) <= k->p)
    d++;
  f = (1 << (int)d) != k->p;
  rows[n++] = make_row("barrier", CRNET_COLL_BARRIER, "circulant", 0, L, 0, 0);
  rows[n++] = make_row("allreduce", CRNET_COLL_ALLREDUCE, "circulant", unit,
                       2 * L, 2 * q * s, k->p == 3 ? s : q * s);
  rows[n++] = make_row("allreduce", CRNET_COLL_ALLREDUCE, "ring", unit,
                       2 * (p - 1), 2 * q * s, q * s);
  rows[n++] = make_row("allreduce", CRNET_COLL_ALLREDUCE, "hypercube", unit,
                       d + 3 * f, (d + 2 * f) * s, (d + f / 2) * s);
  sizes[0] = k->c->max_bytes / 16;
  sizes[1] = k->c->max_bytes / 4;
  sizes[2] = k->c->max_bytes;
  asizes[0] = sizes[0];
  asizes[1] = sizes[1];
  asizes[2] = k->c->max_bytes / 2;
  for (int i = 0; i < 3; i++) {
    size_t bytes = sizes[i] / unit * unit, abytes = asizes[i] / unit * unit;
    double v = (double)bytes, a = (double)abytes;
    if (bytes == 0)
      continue;
    rows[n++] = make_row("allgather", CRNET_COLL_ALLGATHER, "circulant", bytes,
                         L, q * v, 0);
    rows[n++] = make_row("allgather", CRNET_COLL_ALLGATHER, "ring", bytes,
                         p - 1, q * v, 0);
    rows[n++] = make_row("allgather", CRNET_COLL_ALLGATHER, "hypercube", bytes,
                         d + 2 * f, (q + f) * v, 0);
    rows[n++] = make_row("reduce_scatter", CRNET_COLL_REDUCE_SCATTER,
                         "circulant", bytes, L, q * v,
                         k->p == 3 ? v : q * v);
    rows[n++] = make_row("reduce_scatter", CRNET_COLL_REDUCE_SCATTER, "ring",
                         bytes, p - 1, q * v, q * v);
    if (abytes == 0)
      continue;
    rows[n++] = make_row("allreduce", CRNET_COLL_ALLREDUCE, "hypercube",
                         abytes, d + 3 * f, (d + 2 * f) * a, (d + f / 2) * a);
    rows[n++] = make_row("allreduce", CRNET_COLL_ALLREDUCE, "circulant",
                         abytes, 2 * L, 2 * q * a, k->p == 3 ? a : q * a);
  }
  return n;
}

/* Least squares in relative error over the first `nvar` unknowns:
 * minimises Σ (model / t - 1)^2. Returns false if singular. */
static bool fit(const struct row *rows, size_t n, int nvar, double x[NX]) {
  double a[NX][NX + 1] = {{0}};
  for (size_t i = 0; i < n; i++) {
    double v[NX];
    columns(&rows[i], v);
    for (int j = 0; j < nvar; j++)
      v[j] /= rows[i].t;
    for (int j = 0; j < nvar; j++) {
      for (int l = 0; l < nvar; l++)
        a[j][l] += v[j] * v[l];
      a[j][NX] += v[j];
    }
  }
  /* Gaussian elimination with partial pivoting on the normal equations,
   * scaled per column first: α, β and γ differ by orders of magnitude. */
  double scale[NX];
  for (int j = 0; j < nvar; j++)
    scale[j] = a[j][j] > 0 ? 1 / sqrt(a[j][j]) : 1;
  for (int j = 0; j < nvar; j++) {
    for (int l = 0; l < nvar; l++)
      a[j][l] *= scale[j] * scale[l];
    a[j][NX] *= scale[j];
  }
  for (int col = 0; col < nvar; col++) {
    int piv = col;
    for (int r = col + 1; r < nvar; r++)
      if (fabs(a[r][col]) > fabs(a[piv][col]))
        piv = r;
    if (fabs(a[piv][col]) < 1e-12)
      return false;
    for (int l = 0; l <= NX; l++) {
      double tmp = a[col][l];
      a[col][l] = a[piv][l];
      a[piv][l] = tmp;
    }
    for (int r = 0; r < nvar; r++) {
      double f;
      if (r == col)
        continue;
      f = a[r][col] / a[col][col];
      for (int l = col; l <= NX; l++)
        a[r][l] -= f * a[col][l];
    }
  }
  for (int j = 0; j < NX; j++)
    x[j] = j < nvar ? a[j][NX] / a[j][j] * scale[j] : 0;
  return true;
}

/* The file's constants from the fitted unknowns. */
static void constants_of(const double x[NX], double out[NFIT]) {
  out[0] = x[X_ALPHA];
  out[1] = x[X_BETA];
  out[2] = x[X_GAMMA];
  out[3] = x[X_RING] / x[X_ALPHA];
}

/* --- the file ----------------------------------------------------------------- */

/* Where to write: --tuning-out, or the file the library reads. Creates the
 * directory of the default place. 0, or 1 after saying why. */
static int out_path(const struct crbench_calibration *c, char *path,
                    size_t n) {
  const char *v;
  char dir[900];
  if (c->out_path != NULL) {
    snprintf(path, n, "%s", c->out_path);
    return 0;
  }
  v = getenv("CRNET_TUNING_FILE");
  if (v != NULL && v[0] != '\0') {
    snprintf(path, n, "%s", v);
    return 0;
  }
  v = getenv("XDG_CONFIG_HOME");
  if (v != NULL && v[0] == '/') {
    snprintf(dir, sizeof dir, "%s/crnet", v);
  } else if ((v = getenv("HOME")) != NULL && v[0] != '\0') {
    snprintf(dir, sizeof dir, "%s/.config/crnet", v);
  } else {
    fprintf(stderr, PROG ": --calibrate: no HOME and no XDG_CONFIG_HOME: "
                    "give --tuning-out FILE\n");
    return 1;
  }
  /* mkdir -p */
  for (char *slash = strchr(dir + 1, '/');; slash = strchr(slash + 1, '/')) {
    if (slash != NULL)
      *slash = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
      fprintf(stderr, PROG ": --calibrate: cannot create %s: %s\n", dir,
              strerror(errno));
      return 1;
    }
    if (slash == NULL)
      break;
    *slash = '/';
  }
  snprintf(path, n, "%s/tuning", dir);
  return 0;
}

/* One "key.P = value" line of an existing file, to keep. */
struct kept {
  char key[32];
  long p;
  char value[64];
};

static int kept_cmp(const void *a, const void *b) {
  const struct kept *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c != 0 ? c : (x->p > y->p) - (x->p < y->p);
}

/* Reads what an existing file keeps: every line of a key this calibration
 * does not write (written[j] false; p = 0 for a plain key), and the key.P
 * lines of other p of those it writes. 0 (also when there is no file), or
 * 1 after saying why. */
static int read_kept(const char *path, int p, const bool written[NKEYS],
                     struct kept *kept, size_t *nkept) {
  FILE *f = fopen(path, "r");
  char line[512];
  unsigned lineno = 0;
  *nkept = 0;
  if (f == NULL && errno == ENOENT)
    return 0;
  if (f == NULL) {
    fprintf(stderr, PROG ": --calibrate: %s: %s\n", path, strerror(errno));
    return 1;
  }
  while (fgets(line, sizeof line, f) != NULL) {
    char key[32], value[64], rest[8];
    long lp = 0;
    char *hash = strchr(line, '#');
    int n;
    lineno++;
    if (hash != NULL)
      *hash = '\0';
    n = sscanf(line, " %31[a-z_.0-9] = %63s %7s", key, value, rest);
    if (n <= 0)
      continue; /* blank or comment */
    char *dot = strchr(key, '.');
    if (dot != NULL) {
      *dot = '\0';
      lp = strtol(dot + 1, NULL, 10);
    }
    bool known = false, replaced = false;
    for (int j = 0; j < NKEYS; j++)
      if (strcmp(key, keys[j]) == 0) {
        known = true;
        replaced = written[j];
      }
    if (n != 2 || !known || (dot != NULL && lp < 2)) {
      fprintf(stderr,
              PROG ": --calibrate: %s line %u is not a tuning line crbench "
                   "can keep; fix it or choose another --tuning-out\n",
              path, lineno);
      fclose(f);
      return 1;
    }
    if (replaced && (dot == NULL || lp == p))
      continue; /* replaced by this calibration */
    if (*nkept == MAX_KEPT) {
      fprintf(stderr, PROG ": --calibrate: %s has more than %d per-p lines\n",
              path, MAX_KEPT);
      fclose(f);
      return 1;
    }
    snprintf(kept[*nkept].key, sizeof kept[*nkept].key, "%s", key);
    kept[*nkept].p = lp;
    snprintf(kept[*nkept].value, sizeof kept[*nkept].value, "%s", value);
    (*nkept)++;
  }
  fclose(f);
  return 0;
}

/* The keys of this calibration: alpha, beta, gamma and ring_round on TCP;
 * on shared memory its alpha and beta as shm_alpha and shm_beta. */
static void written_keys(bool shm, const double fit[NFIT], bool written[NKEYS],
                         double values[NKEYS]) {
  for (int j = 0; j < NKEYS; j++) {
    written[j] = shm ? j >= NFIT : j < NFIT;
    values[j] = j < NFIT ? fit[j] : fit[j - NFIT];
  }
}

static int write_tuning(const struct cal *k, const double fit[NFIT],
                        const char *path) {
  struct kept kept[MAX_KEPT + 2 * NKEYS];
  size_t nkept;
  char tmp[1100], host[64] = "?", when[32] = "?";
  time_t now = time(NULL);
  bool written[NKEYS];
  double c[NKEYS];
  FILE *f;
  written_keys(k->shm, fit, written, c);
  if (read_kept(path, k->p, written, kept, &nkept) != 0)
    return 1;
  for (int j = 0; j < NKEYS; j++) {
    if (!written[j])
      continue;
    snprintf(kept[nkept].key, sizeof kept[nkept].key, "%s", keys[j]);
    kept[nkept].p = k->p;
    snprintf(kept[nkept].value, sizeof kept[nkept].value, "%.4e", c[j]);
    nkept++;
  }
  qsort(kept, nkept, sizeof kept[0], kept_cmp);
  gethostname(host, sizeof host - 1);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&now));
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  f = fopen(tmp, "w");
  if (f == NULL) {
    fprintf(stderr, PROG ": --calibrate: cannot write %s: %s\n", tmp,
            strerror(errno));
    return 1;
  }
  fprintf(f,
          "# crnet tuning: the constants of the alpha-beta-gamma model with\n"
          "# which the auto schedule chooses (docs/TUNING.md), in seconds per\n"
          "# round (alpha), per byte moved (beta) and per byte reduced\n"
          "# (gamma), and the cost of a ring round in multiples of alpha\n"
          "# (ring_round); shm_alpha and shm_beta are alpha and beta of\n"
          "# shared-memory links. Written by crbench --calibrate; key.P lines\n"
          "# were measured with P ranks, the plain keys by the last\n"
          "# calibration of their links: this one p = %d on %s (%s), %s %s,\n"
          "# messages up to %zu bytes, %s.\n",
          k->p, host, k->shm ? "shared memory" : "TCP",
          crnet_datatype_name(k->c->dt), crnet_op_name(k->c->op),
          k->c->max_bytes, when);
  for (int j = 0; j < NKEYS; j++)
    if (written[j])
      fprintf(f, "%s = %.4e\n", keys[j], c[j]);
  for (size_t i = 0; i < nkept; i++)
    if (kept[i].p == 0)
      fprintf(f, "%s = %s\n", kept[i].key, kept[i].value);
  for (size_t i = 0; i < nkept; i++)
    if (kept[i].p != 0)
      fprintf(f, "%s.%ld = %s\n", kept[i].key, kept[i].p, kept[i].value);
  if (fclose(f) != 0 || rename(tmp, path) != 0) {
    fprintf(stderr, PROG ": --calibrate: cannot write %s: %s\n", path,
            strerror(errno));
    unlink(tmp);
    return 1;
  }
  return 0;
}

/* --- the whole ----------------------------------------------------------------- */

/* CRBENCH_CALIBRATE_MODEL (see the top): false if unset; true with its
 * constants in k->given_x; -1 after saying why when it does not parse. */
static int given_model(struct cal *k) {
  const char *v = getenv("CRBENCH_CALIBRATE_MODEL");
  double alpha, beta, gamma, ring_round;
  char rest;
  if (v == NULL || v[0] == '\0')
    return 0;
  if (sscanf(v, "%lf,%lf,%lf,%lf %c", &alpha, &beta, &gamma, &ring_round,
             &rest) != 4 ||
      !(alpha > 0 && beta > 0 && gamma >= 0 && ring_round > 0)) {
    fprintf(stderr,
            PROG ": rank %d: CRBENCH_CALIBRATE_MODEL='%s': want ALPHA,BETA,"
                 "GAMMA,RING_ROUND, positive (GAMMA may be 0)\n",
            k->rank, v);
    return -1;
  }
  k->given_x[X_ALPHA] = alpha;
  k->given_x[X_RING] = ring_round * alpha;
  k->given_x[X_BETA] = beta;
  k->given_x[X_GAMMA] = gamma;
  k->given = true;
  return 1;
}

static void print_fit(const struct cal *k, const struct row *rows, size_t n,
                      const double x[NX], bool gamma_fitted) {
  const struct crbench_calibration *c = k->c;
  double v[NFIT];
  constants_of(x, v);
  if (c->json) {
    printf("{\"probe\": \"calibrate\", \"p\": %d, \"links\": \"%s\", "
           "\"alpha\": %.6g, \"beta\": "
           "%.6g, \"gamma\": %.6g, \"ring_round\": %.6g, "
           "\"gamma_fitted\": %s, \"rows\": [",
           k->p, k->shm ? "shm" : "tcp", v[0], v[1], v[2], v[3],
           gamma_fitted ? "true" : "false");
    for (size_t i = 0; i < n; i++)
      printf("%s{\"coll\": \"%s\", \"schedule\": \"%s\", \"size\": %zu, "
             "\"time_us\": %.6g, \"model_us\": %.6g}",
             i ? ", " : "", rows[i].what, rows[i].schedule, rows[i].bytes,
             rows[i].t * 1e6, model_of(&rows[i], x) * 1e6);
    printf("]}\n");
    return;
  }
  printf("# crbench --calibrate: p = %d, %s %s, %d repetitions per row "
         "(median of the slowest rank)\n",
         k->p, crnet_datatype_name(c->dt), crnet_op_name(c->op), c->iters);
  printf("# %-15s %-10s %10s %8s %14s %12s %12s %7s\n", "collective",
         "schedule", "size(B)", "rounds", "moved(B)", "time(us)", "model(us)",
         "error");
  for (size_t i = 0; i < n; i++) {
    double model = model_of(&rows[i], x);
    printf("  %-15s %-10s %10zu %8.0f %14.0f %12.2f %12.2f %+6.1f%%\n",
           rows[i].what, rows[i].schedule, rows[i].bytes, rows[i].r,
           rows[i].b, rows[i].t * 1e6, model * 1e6,
           100 * (model - rows[i].t) / rows[i].t);
  }
  if (k->shm)
    printf("links: shared memory (alpha and beta are written as shm_alpha "
           "and shm_beta)\n");
  printf("alpha = %.4e s per round\n"
         "beta  = %.4e s per byte (%.3f GB/s)\n"
         "gamma = %.4e s per byte reduced%s\n"
         "ring_round = %.4f (a ring round: %.4e s)\n",
         v[0], v[1], 1e-9 / v[1], v[2],
         gamma_fitted ? "" : " (the fit gave a negative figure: 0)", v[3],
         x[X_RING]);
}

int crbench_calibrate(crnet_comm *comm, const struct crbench_calibration *c) {
  struct cal k = {.comm = comm, .c = c};
  struct row rows[MAX_ROWS];
  double x[NX] = {0, 0, 0, 0}, v[NFIT];
  bool gamma_fitted = true;
  char path[1024];
  size_t n;
  int32_t bad = 0;
  int rc = 0;

  k.rank = crnet_comm_rank(comm);
  k.p = crnet_comm_size(comm);
  k.shm = true;
  k.esize = esize_of(c->dt);
  if (k.p < 2) {
    if (k.rank == 0)
      fprintf(stderr, PROG ": --calibrate needs at least 2 ranks\n");
    return 1;
  }
  k.send = calloc(1, c->max_bytes + 64);
  k.recv = calloc(1, c->max_bytes + 64);
  k.times = calloc((size_t)c->iters, sizeof *k.times);
  bad = k.send == NULL || k.recv == NULL || k.times == NULL ? 1 : 0;
  if (given_model(&k) < 0)
    bad = 2;
  if (crnet_allreduce(comm, CRNET_IN_PLACE, &bad, 1, CRNET_INT32,
                      CRNET_MAX) != 0 ||
      bad) {
    if (k.rank == 0 && bad == 1)
      fprintf(stderr, PROG ": --calibrate: cannot allocate 2 x %zu bytes\n",
              c->max_bytes);
    rc = 1;
    goto done;
  }
  if (k.given && k.rank == 0)
    fprintf(stderr, PROG ": --calibrate: every row's time is the model's "
                    "under CRBENCH_CALIBRATE_MODEL, not the clock's\n");
  n = plan(&k, rows);
  for (size_t i = 0; i < n && rc == 0; i++) {
    rc = measure(&k, &rows[i]);
    if (rc == 0 && k.rank == 0 && !c->json)
      fprintf(stderr, PROG ": --calibrate: %s %s %zu B: %.1f us\n",
              rows[i].what, rows[i].schedule, rows[i].bytes, rows[i].t * 1e6);
  }
  if (rc != 0)
    goto done;
  /* Which links were measured: rank 0's decide, since it writes the file.
   * With lazy links (the default from 64 ranks) the calls above never
   * brought up the links to most peers: a link that is not there says
   * nothing, one on TCP says TCP. */
  {
    int shm_links = 0;
    for (int r = 0; r < k.p; r++) {
      crnet_link_kind kind = CRNET_LINK_NONE;
      if (r == k.rank || crnet_comm_peer_link(comm, r, &kind) != 0)
        continue;
      if (kind == CRNET_LINK_TCP)
        k.shm = false;
      shm_links += kind == CRNET_LINK_SHM;
    }
    if (shm_links == 0)
      k.shm = false;
  }
  /* Every rank fits the same numbers (the times are maxima over ranks),
   * so every rank reaches the same verdict without talking. */
  if (!fit(rows, n, NX, x) || x[X_GAMMA] < 0) {
    gamma_fitted = false;
    if (!fit(rows, n, NX - 1, x))
      x[X_ALPHA] = x[X_BETA] = 0;
    x[X_GAMMA] = 0;
  }
  if (!(x[X_ALPHA] > 0 && x[X_ALPHA] <= 1 && x[X_BETA] > 0 &&
        x[X_BETA] <= 1e-3)) {
    if (k.rank == 0)
      fprintf(stderr,
              PROG ": --calibrate: the fit gave alpha %g, beta %g: the "
                   "times are too noisy for the model (is the machine busy?); "
                   "nothing written, try again with more repetitions (-n)\n",
              x[X_ALPHA], x[X_BETA]);
    rc = 1;
    goto done;
  }
  constants_of(x, v);
  /* ring_round is written only for TCP's links. */
  if (!k.shm && !(v[3] >= 0.1 && v[3] <= 10)) {
    if (k.rank == 0)
      fprintf(stderr,
              PROG ": --calibrate: the fit gave ring_round %g (the file "
                   "takes 0.1 to 10): the times are too noisy for the model "
                   "(is the machine busy?); nothing written, try again with "
                   "more repetitions (-n)\n",
              v[3]);
    rc = 1;
    goto done;
  }
  if (k.rank == 0) {
    print_fit(&k, rows, n, x, gamma_fitted);
    rc = out_path(c, path, sizeof path);
    if (rc == 0)
      rc = write_tuning(&k, v, path);
    if (rc == 0 && !c->json)
      printf("# written to %s (crsched --crossover -p %d --tuning %s shows "
             "where auto switches)\n",
             path, k.p, path);
    fflush(stdout);
  }
  /* Rank 0's verdict on writing is everyone's exit status. */
  bad = rc;
  if (crnet_allreduce(comm, CRNET_IN_PLACE, &bad, 1, CRNET_INT32,
                      CRNET_MAX) != 0)
    bad = 1;
  rc = bad != 0;
done:
  free(k.send);
  free(k.recv);
  free(k.times);
  return rc;
}
