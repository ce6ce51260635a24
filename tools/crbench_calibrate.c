/* crbench --calibrate: measures the α-β-γ model's constants on the running
 * job and writes them into the tuning file that crnet's `auto` reads
 * (docs/TUNING.md).
 *
 * The model prices a schedule at R·α + B·β + G·γ (R rounds, B bytes moved,
 * G bytes reduced by the busiest rank). So a few calls whose R, B and G are
 * known, timed as crbench times rows (barrier, one call, the slowest rank's
 * time, median of the repetitions), give α, β and γ by least squares:
 *
 *   what                          R        B       G
 *   barrier, circulant            L        0       0
 *   allreduce of 4 B, circulant   2L       ~0      ~0
 *   allreduce of 4 B, ring        2(p-1)   ~0      ~0
 *   allgather of S, circulant     L        qS      0
 *   allgather of S, ring          p-1      qS      0
 *   reduce_scatter of S, circ.    L        qS      qS (S at p = 3)
 *   reduce_scatter of S, ring     p-1      qS      qS
 *
 * with L = ceil(log2 p), q = (p-1)/p, and S = MAX/16, MAX/4 and MAX (-e,
 * 1 MiB by default, where auto's choices are made; S is the whole vector: allgather's output,
 * reduce_scatter's input). The rows of R, B and G are those of
 * src/collectives/model.c, written out here because crbench uses the
 * public API only. The fit minimises the relative errors (every row
 * counts alike, the 4-byte calls pin α and the large ones β and γ); a γ
 * that comes out negative (reductions hidden in the noise, or overlapped
 * with receiving) is set to 0 and α, β refitted. A fit without positive α
 * and β writes nothing.
 *
 * The file: rank 0 writes --tuning-out, else the file the library reads
 * (CRNET_TUNING_FILE, else $XDG_CONFIG_HOME/crnet/tuning or
 * ~/.config/crnet/tuning, creating the directory). An existing file is
 * merged: its key.P lines for other p are kept, this p's and the plain
 * keys are replaced, so calibrating at p = 2, 4, 8, 16 in turn builds α(p)
 * (the cost of a round grows once ranks outnumber cores). A line crbench
 * does not understand stops it, rather than losing the line. The file is
 * written to FILE.tmp and renamed over FILE.
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

#define MAX_ROWS 16
#define MAX_KEPT 64 /* key.P lines kept from an existing file */

struct row {
  const char *what;     /* "allgather" ... */
  crnet_collective coll;
  const char *schedule;
  size_t bytes;         /* the vector: see the table above */
  double r, b, g;       /* the model's terms */
  double t;             /* measured, seconds */
};

struct cal {
  crnet_comm *comm;
  const struct crbench_calibration *c;
  int rank, p;
  size_t esize;
  void *send, *recv;
  double *times;
};

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
      k->times[i - c->warmup] = crbench_now() - t0;
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

/* The rows of the table at the top, for this p. */
static size_t plan(const struct cal *k, struct row *rows) {
  double p = k->p, q = (p - 1) / p, L = 0;
  size_t n = 0, sizes[3];
  size_t unit = k->esize * (size_t)k->p;
  while ((1 << (int)L) < k->p)
    L++;
  rows[n++] = (struct row){"barrier", CRNET_COLL_BARRIER, "circulant", 0, L,
                           0, 0, 0};
  rows[n++] = (struct row){"allreduce", CRNET_COLL_ALLREDUCE, "circulant",
                           k->esize, 2 * L, 2 * q * k->esize, q * k->esize,
                           0};
  rows[n++] = (struct row){"allreduce", CRNET_COLL_ALLREDUCE, "ring",
                           k->esize, 2 * (p - 1), 2 * q * k->esize,
                           q * k->esize, 0};
  sizes[0] = k->c->max_bytes / 16;
  sizes[1] = k->c->max_bytes / 4;
  sizes[2] = k->c->max_bytes;
  for (int i = 0; i < 3; i++) {
    double s = (double)(sizes[i] / unit * unit);
    size_t bytes = sizes[i] / unit * unit;
    double circ_g = k->p == 3 ? s : q * s;
    if (bytes == 0)
      continue;
    rows[n++] = (struct row){"allgather", CRNET_COLL_ALLGATHER, "circulant",
                             bytes, L, q * s, 0, 0};
    rows[n++] = (struct row){"allgather", CRNET_COLL_ALLGATHER, "ring", bytes,
                             p - 1, q * s, 0, 0};
    rows[n++] = (struct row){"reduce_scatter", CRNET_COLL_REDUCE_SCATTER,
                             "circulant", bytes, L, q * s, circ_g, 0};
    rows[n++] = (struct row){"reduce_scatter", CRNET_COLL_REDUCE_SCATTER,
                             "ring", bytes, p - 1, q * s, q * s, 0};
  }
  return n;
}

/* Least squares in relative error over the first `nvar` terms (α, β[, γ]):
 * minimises Σ ((r α + b β + g γ) / t - 1)^2. Returns false if singular. */
static bool fit(const struct row *rows, size_t n, int nvar, double x[3]) {
  double a[3][4] = {{0}};
  for (size_t i = 0; i < n; i++) {
    double v[3] = {rows[i].r / rows[i].t, rows[i].b / rows[i].t,
                   rows[i].g / rows[i].t};
    for (int j = 0; j < nvar; j++) {
      for (int l = 0; l < nvar; l++)
        a[j][l] += v[j] * v[l];
      a[j][3] += v[j];
    }
  }
  /* Gaussian elimination with partial pivoting on the normal equations,
   * scaled per column first: α, β and γ differ by orders of magnitude. */
  double scale[3];
  for (int j = 0; j < nvar; j++)
    scale[j] = a[j][j] > 0 ? 1 / sqrt(a[j][j]) : 1;
  for (int j = 0; j < nvar; j++) {
    for (int l = 0; l < nvar; l++)
      a[j][l] *= scale[j] * scale[l];
    a[j][3] *= scale[j];
  }
  for (int col = 0; col < nvar; col++) {
    int piv = col;
    for (int r = col + 1; r < nvar; r++)
      if (fabs(a[r][col]) > fabs(a[piv][col]))
        piv = r;
    if (fabs(a[piv][col]) < 1e-12)
      return false;
    for (int l = 0; l < 4; l++) {
      double tmp = a[col][l];
      a[col][l] = a[piv][l];
      a[piv][l] = tmp;
    }
    for (int r = 0; r < nvar; r++) {
      double f;
      if (r == col)
        continue;
      f = a[r][col] / a[col][col];
      for (int l = col; l < 4; l++)
        a[r][l] -= f * a[col][l];
    }
  }
  for (int j = 0; j < 3; j++)
    x[j] = j < nvar ? a[j][3] / a[j][j] * scale[j] : 0;
  return true;
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
  char key[16];
  long p;
  char value[64];
};

static int kept_cmp(const void *a, const void *b) {
  const struct kept *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c != 0 ? c : (x->p > y->p) - (x->p < y->p);
}

/* Reads the key.P lines of other p from an existing file. 0 (also when
 * there is no file), or 1 after saying why. */
static int read_kept(const char *path, int p, struct kept *kept,
                     size_t *nkept) {
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
    char key[16], value[64], rest[8];
    long lp = 0;
    char *hash = strchr(line, '#');
    int n;
    lineno++;
    if (hash != NULL)
      *hash = '\0';
    n = sscanf(line, " %15[a-z.0-9] = %63s %7s", key, value, rest);
    if (n <= 0)
      continue; /* blank or comment */
    char *dot = strchr(key, '.');
    if (dot != NULL) {
      *dot = '\0';
      lp = strtol(dot + 1, NULL, 10);
    }
    if (n != 2 || (strcmp(key, "alpha") != 0 && strcmp(key, "beta") != 0 &&
                   strcmp(key, "gamma") != 0) ||
        (dot != NULL && lp < 2)) {
      fprintf(stderr,
              PROG ": --calibrate: %s line %u is not a tuning line crbench "
                   "can keep; fix it or choose another --tuning-out\n",
              path, lineno);
      fclose(f);
      return 1;
    }
    if (dot == NULL || lp == p)
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

static int write_tuning(const struct cal *k, const double x[3],
                        const char *path) {
  struct kept kept[MAX_KEPT + 3];
  size_t nkept;
  char tmp[1100], host[64] = "?", when[32] = "?";
  time_t now = time(NULL);
  static const char *const keys[3] = {"alpha", "beta", "gamma"};
  FILE *f;
  if (read_kept(path, k->p, kept, &nkept) != 0)
    return 1;
  for (int j = 0; j < 3; j++) {
    snprintf(kept[nkept].key, sizeof kept[nkept].key, "%s", keys[j]);
    kept[nkept].p = k->p;
    snprintf(kept[nkept].value, sizeof kept[nkept].value, "%.4e", x[j]);
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
          "# (gamma). Written by crbench --calibrate; key.P lines were\n"
          "# measured with P ranks, the plain keys by the last calibration:\n"
          "# p = %d on %s, %s %s, messages up to %zu bytes, %s.\n",
          k->p, host, crnet_datatype_name(k->c->dt), crnet_op_name(k->c->op),
          k->c->max_bytes, when);
  for (int j = 0; j < 3; j++)
    fprintf(f, "%s = %.4e\n", keys[j], x[j]);
  for (size_t i = 0; i < nkept; i++)
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

static void print_fit(const struct cal *k, const struct row *rows, size_t n,
                      const double x[3], bool gamma_fitted) {
  const struct crbench_calibration *c = k->c;
  if (c->json) {
    printf("{\"probe\": \"calibrate\", \"p\": %d, \"alpha\": %.6g, \"beta\": "
           "%.6g, \"gamma\": %.6g, \"gamma_fitted\": %s, \"rows\": [",
           k->p, x[0], x[1], x[2], gamma_fitted ? "true" : "false");
    for (size_t i = 0; i < n; i++)
      printf("%s{\"coll\": \"%s\", \"schedule\": \"%s\", \"size\": %zu, "
             "\"time_us\": %.6g, \"model_us\": %.6g}",
             i ? ", " : "", rows[i].what, rows[i].schedule, rows[i].bytes,
             rows[i].t * 1e6,
             (rows[i].r * x[0] + rows[i].b * x[1] + rows[i].g * x[2]) * 1e6);
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
    double model = rows[i].r * x[0] + rows[i].b * x[1] + rows[i].g * x[2];
    printf("  %-15s %-10s %10zu %8.0f %14.0f %12.2f %12.2f %+6.1f%%\n",
           rows[i].what, rows[i].schedule, rows[i].bytes, rows[i].r,
           rows[i].b, rows[i].t * 1e6, model * 1e6,
           100 * (model - rows[i].t) / rows[i].t);
  }
  printf("alpha = %.4e s per round\nbeta  = %.4e s per byte (%.3f GB/s)\n"
         "gamma = %.4e s per byte reduced%s\n",
         x[0], x[1], 1e-9 / x[1], x[2],
         gamma_fitted ? "" : " (the fit gave a negative figure: 0)");
}

int crbench_calibrate(crnet_comm *comm, const struct crbench_calibration *c) {
  struct cal k = {.comm = comm, .c = c};
  struct row rows[MAX_ROWS];
  double x[3] = {0, 0, 0};
  bool gamma_fitted = true;
  char path[1024];
  size_t n;
  int32_t bad = 0;
  int rc = 0;

  k.rank = crnet_comm_rank(comm);
  k.p = crnet_comm_size(comm);
  k.esize = esize_of(c->dt);
  if (k.p < 2) {
    if (k.rank == 0)
      fprintf(stderr, PROG ": --calibrate needs at least 2 ranks\n");
    return 1;
  }
  k.send = calloc(1, c->max_bytes + 64);
  k.recv = calloc(1, c->max_bytes + 64);
  k.times = calloc((size_t)c->iters, sizeof *k.times);
  bad = k.send == NULL || k.recv == NULL || k.times == NULL;
  if (crnet_allreduce(comm, CRNET_IN_PLACE, &bad, 1, CRNET_INT32,
                      CRNET_MAX) != 0 ||
      bad) {
    if (k.rank == 0)
      fprintf(stderr, PROG ": --calibrate: cannot allocate 2 x %zu bytes\n",
              c->max_bytes);
    rc = 1;
    goto done;
  }
  n = plan(&k, rows);
  for (size_t i = 0; i < n && rc == 0; i++) {
    rc = measure(&k, &rows[i]);
    if (rc == 0 && k.rank == 0 && !c->json)
      fprintf(stderr, PROG ": --calibrate: %s %s %zu B: %.1f us\n",
              rows[i].what, rows[i].schedule, rows[i].bytes, rows[i].t * 1e6);
  }
  if (rc != 0)
    goto done;
  /* Every rank fits the same numbers (the times are maxima over ranks),
   * so every rank reaches the same verdict without talking. */
  if (!fit(rows, n, 3, x) || x[2] < 0) {
    gamma_fitted = false;
    if (!fit(rows, n, 2, x))
      x[0] = x[1] = 0;
    x[2] = 0;
  }
  if (!(x[0] > 0 && x[0] <= 1 && x[1] > 0 && x[1] <= 1e-3)) {
    if (k.rank == 0)
      fprintf(stderr,
              PROG ": --calibrate: the fit gave alpha %g, beta %g: the "
                   "times are too noisy for the model (is the machine busy?); "
                   "nothing written, try again with more repetitions (-n)\n",
              x[0], x[1]);
    rc = 1;
    goto done;
  }
  if (k.rank == 0) {
    print_fit(&k, rows, n, x, gamma_fitted);
    rc = out_path(c, path, sizeof path);
    if (rc == 0)
      rc = write_tuning(&k, x, path);
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
