/* Tuning constants: the file format, its strict parser, where the file
 * lives, and the wire encoding that gives every rank rank 0's values. See
 * tuning.h.
 *
 * The built-in defaults are the constants `auto` used before calibration
 * existed, which `crbench --calibrate` then confirmed to within a factor of
 * two on the 2-core VM the project is developed on, at p = 2 (no more ranks
 * than cores): a round costs about as much as waking a blocked receiver
 * (tens of µs), a byte on TCP loopback about 1 ns each way, a reduced byte
 * (float sum at memory speed) a sixth of that. ring_round defaults to 1
 * (a ring round costs α like any other), which is also what a file
 * written before it existed means. docs/TUNING.md has the measured figures.
 */
#include "tuning.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bytes.h"

static const char *const param_names[CRNET__TUNING_NPARAMS] = {
    "alpha", "beta", "gamma", "ring_round", "shm_alpha", "shm_beta"};

_Static_assert(CRNET__TUNING_WIRE_SIZE ==
                   CRNET__TUNING_NPARAMS * CRNET__TUNING_WIRE_PARAM,
               "the wire encoding has one part per constant");

/* The accepted range of each constant: finite, above lo (or at it, for
 * gamma: a free reduction is a legitimate model, and for ring_round), at
 * most hi. The bounds catch unit mistakes (β in ns, γ in GB/s, a round
 * factor in seconds) rather than encode physics. */
static const struct {
  double lo, hi;
  bool lo_inclusive;
  const char *unit;
} ranges[CRNET__TUNING_NPARAMS] = {
    {0, 1, false, "seconds per round"},
    {0, 1e-3, false, "seconds per byte"},
    {0, 1e-3, true, "seconds per byte"},
    {0.1, 10, true, "multiples of alpha"},
    {0, 1, false, "seconds per round"},
    {0, 1e-3, false, "seconds per byte"},
};

const char *crnet__tuning_param_name(crnet__tuning_param k) {
  return (unsigned)k < CRNET__TUNING_NPARAMS ? param_names[k] : "?";
}

static bool value_ok(crnet__tuning_param k, double v) {
  if (!isfinite(v) || v > ranges[k].hi)
    return false;
  return ranges[k].lo_inclusive ? v >= ranges[k].lo : v > ranges[k].lo;
}

void crnet__tuning_defaults(crnet__tuning *t) {
  memset(t, 0, sizeof *t);
  t->base[CRNET__TUNING_ALPHA] = CRNET__TUNING_DEFAULT_ALPHA;
  t->base[CRNET__TUNING_BETA] = CRNET__TUNING_DEFAULT_BETA;
  t->base[CRNET__TUNING_GAMMA] = CRNET__TUNING_DEFAULT_GAMMA;
  t->base[CRNET__TUNING_RING_ROUND] = CRNET__TUNING_DEFAULT_RING_ROUND;
  t->base[CRNET__TUNING_SHM_ALPHA] = CRNET__TUNING_DEFAULT_SHM_ALPHA;
  t->base[CRNET__TUNING_SHM_BETA] = CRNET__TUNING_DEFAULT_SHM_BETA;
  snprintf(t->source, sizeof t->source, "built-in defaults");
}

double crnet__tuning_get(const crnet__tuning *t, crnet__tuning_param k,
                         int32_t p) {
  const crnet__tuning_point *pt = t->points[k];
  uint32_t n = t->npoints[k], i = 0;
  if (n == 0)
    return t->base[k];
  if (p <= pt[0].p)
    return pt[0].value;
  if (p >= pt[n - 1].p)
    return pt[n - 1].value;
  while (pt[i + 1].p < p)
    i++;
  /* pt[i].p < p <= pt[i+1].p: the straight line between the two. */
  return pt[i].value + (pt[i + 1].value - pt[i].value) *
                           (double)(p - pt[i].p) /
                           (double)(pt[i + 1].p - pt[i].p);
}

/* --- the text format ------------------------------------------------------ */

typedef struct parse_state {
  crnet__tuning *t;
  const char *name;
  char *err;
  size_t errlen;
  unsigned line;
  unsigned base_line[CRNET__TUNING_NPARAMS]; /* where set, 0: not yet */
  unsigned point_line[CRNET__TUNING_NPARAMS][CRNET__TUNING_MAX_POINTS];
  locale_t c_locale; /* numbers are read with '.' whatever the program set */
} parse_state;

static int parse_error(parse_state *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int parse_error(parse_state *s, const char *fmt, ...) {
  va_list ap;
  int used = snprintf(s->err, s->errlen, "tuning file '%s' line %u: ",
                      s->name, s->line);
  if (used >= 0 && (size_t)used < s->errlen) {
    va_start(ap, fmt);
    vsnprintf(s->err + used, s->errlen - (size_t)used, fmt, ap);
    va_end(ap);
  }
  return CRNET_EINVAL;
}

static bool is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; }

/* [*b, *e) without the blanks around it. */
static void trim(const char **b, const char **e) {
  while (*b < *e && is_space(**b))
    (*b)++;
  while (*e > *b && is_space((*e)[-1]))
    (*e)--;
}

/* "alpha" or "alpha.P" into (k, p), p = 0 for the plain key. 0, or an
 * error already written. */
static int parse_key(parse_state *s, const char *b, const char *e,
                     crnet__tuning_param *k, int32_t *p) {
  size_t len = (size_t)(e - b);
  const char *dot = memchr(b, '.', len);
  size_t name_len = dot != NULL ? (size_t)(dot - b) : len;
  bool known = false;
  long long v = 0;
  for (int i = 0; i < CRNET__TUNING_NPARAMS && !known; i++) {
    known = strlen(param_names[i]) == name_len &&
            memcmp(param_names[i], b, name_len) == 0;
    *k = (crnet__tuning_param)i;
  }
  if (!known)
    return parse_error(s,
                       "unknown key '%.*s' (the keys are alpha, beta, gamma, "
                       "ring_round, shm_alpha, shm_beta, and KEY.P for P "
                       "ranks)",
                       (int)len, b);
  *p = 0;
  if (dot == NULL)
    return 0;
  /* P: decimal digits, no sign, no leading zero. */
  if (dot + 1 == e || dot[1] == '0')
    return parse_error(s, "'%.*s': P must be a number of ranks", (int)len, b);
  for (const char *q = dot + 1; q < e; q++) {
    if (*q < '0' || *q > '9')
      return parse_error(s, "'%.*s': P must be a number of ranks", (int)len,
                         b);
    if (v <= CRNET__TUNING_MAX_P) /* stops growing once out of range */
      v = v * 10 + (*q - '0');
  }
  if (v < CRNET__TUNING_MIN_P || v > CRNET__TUNING_MAX_P)
    return parse_error(s, "'%.*s': P must be %d..%d", (int)len, b,
                       CRNET__TUNING_MIN_P, CRNET__TUNING_MAX_P);
  *p = (int32_t)v;
  return 0;
}

static int parse_value(parse_state *s, crnet__tuning_param k, const char *key,
                       const char *b, const char *e, double *out) {
  char buf[64];
  char *end;
  size_t len = (size_t)(e - b);
  double v;
  if (len == 0)
    return parse_error(s, "%s has no value", key);
  if (len >= sizeof buf)
    return parse_error(s, "%s = '%.*s...' is not a number", key, 20, b);
  memcpy(buf, b, len);
  buf[len] = '\0';
  errno = 0;
  v = strtod_l(buf, &end, s->c_locale);
  if (end == buf || *end != '\0')
    return parse_error(s, "%s = '%s' is not a number", key, buf);
  if (errno == ERANGE || !value_ok(k, v))
    return parse_error(s,
                       "%s = %s is out of range: %s must be %s %g and at "
                       "most %g (%s)",
                       key, buf, param_names[k],
                       ranges[k].lo_inclusive ? "at least" : "above",
                       ranges[k].lo, ranges[k].hi, ranges[k].unit);
  *out = v;
  return 0;
}

static int set_value(parse_state *s, crnet__tuning_param k, int32_t p,
                     const char *key, double v) {
  crnet__tuning *t = s->t;
  uint32_t n = t->npoints[k], i;
  if (p == 0) {
    if (s->base_line[k] != 0)
      return parse_error(s, "%s is set twice (first on line %u)", key,
                         s->base_line[k]);
    s->base_line[k] = s->line;
    t->base[k] = v;
    return 0;
  }
  for (i = 0; i < n; i++)
    if (t->points[k][i].p == p)
      return parse_error(s, "%s is set twice (first on line %u)", key,
                         s->point_line[k][i]);
  if (n == CRNET__TUNING_MAX_POINTS)
    return parse_error(s, "more than %d per-p figures for %s",
                       CRNET__TUNING_MAX_POINTS, param_names[k]);
  /* Keep the figures in increasing p: insert in place. */
  for (i = n; i > 0 && t->points[k][i - 1].p > p; i--) {
    t->points[k][i] = t->points[k][i - 1];
    s->point_line[k][i] = s->point_line[k][i - 1];
  }
  t->points[k][i] = (crnet__tuning_point){p, v};
  s->point_line[k][i] = s->line;
  t->npoints[k] = n + 1;
  return 0;
}

static int parse_line(parse_state *s, const char *b, const char *e) {
  const char *hash = memchr(b, '#', (size_t)(e - b));
  const char *eq, *kb, *ke, *vb, *ve;
  crnet__tuning_param k = CRNET__TUNING_ALPHA;
  char key[48];
  int32_t p = 0;
  double v = 0;
  int rc;
  if (memchr(b, '\0', (size_t)(e - b)) != NULL)
    return parse_error(s, "a NUL byte (this is not a text file)");
  if (hash != NULL)
    e = hash;
  trim(&b, &e);
  if (b == e)
    return 0;
  eq = memchr(b, '=', (size_t)(e - b));
  if (eq == NULL)
    return parse_error(s, "expected 'key = value', not '%.*s'",
                       (int)(e - b > 60 ? 60 : e - b), b);
  kb = b;
  ke = eq;
  vb = eq + 1;
  ve = e;
  trim(&kb, &ke);
  trim(&vb, &ve);
  if (kb == ke)
    return parse_error(s, "a value without a key");
  if (ke - kb >= (ptrdiff_t)sizeof key)
    return parse_error(s, "unknown key '%.*s...'", 20, kb);
  rc = parse_key(s, kb, ke, &k, &p);
  if (rc != 0)
    return rc;
  snprintf(key, sizeof key, "%.*s", (int)(ke - kb), kb);
  rc = parse_value(s, k, key, vb, ve, &v);
  if (rc != 0)
    return rc;
  return set_value(s, k, p, key, v);
}

int crnet__tuning_parse(crnet__tuning *t, const char *text, size_t len,
                        const char *name, char *err, size_t errlen) {
  parse_state s;
  const char *b = text, *end = text + len;
  int rc = 0;
  memset(&s, 0, sizeof s);
  s.t = t;
  s.name = name;
  s.err = err;
  s.errlen = errlen;
  crnet__tuning_defaults(t);
  s.c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  if (s.c_locale == (locale_t)0) {
    snprintf(err, errlen, "tuning file '%s': out of memory", name);
    return CRNET_ENOMEM;
  }
  while (b < end && rc == 0) {
    const char *nl = memchr(b, '\n', (size_t)(end - b));
    const char *e = nl != NULL ? nl : end;
    s.line++;
    rc = parse_line(&s, b, e);
    b = nl != NULL ? nl + 1 : end;
  }
  freelocale(s.c_locale);
  if (rc != 0) {
    crnet__tuning_defaults(t);
    return rc;
  }
  snprintf(t->source, sizeof t->source, "%s", name);
  return 0;
}

/* --- the file --------------------------------------------------------------- */

int crnet__tuning_path(char *path, size_t n) {
  const char *v = getenv("CRNET_TUNING_FILE");
  int used;
  if (v != NULL) {
    if (v[0] == '\0')
      return -1;
    used = snprintf(path, n, "%s", v);
    return used >= 0 && (size_t)used < n ? 1 : -1;
  }
  v = getenv("XDG_CONFIG_HOME");
  if (v != NULL && v[0] == '/') {
    used = snprintf(path, n, "%s/crnet/tuning", v);
    return used >= 0 && (size_t)used < n ? 0 : -1;
  }
  v = getenv("HOME");
  if (v != NULL && v[0] != '\0') {
    used = snprintf(path, n, "%s/.config/crnet/tuning", v);
    return used >= 0 && (size_t)used < n ? 0 : -1;
  }
  return -1;
}

int crnet__tuning_load_file(crnet__tuning *t, const char *path, bool must_exist,
                            char *err, size_t errlen) {
  FILE *f;
  char *text;
  size_t len;
  int rc;
  crnet__tuning_defaults(t);
  f = fopen(path, "r");
  if (f == NULL) {
    if (errno == ENOENT && !must_exist)
      return 0;
    snprintf(err, errlen, "cannot open the tuning file '%s'%s: %s", path,
             must_exist ? " (CRNET_TUNING_FILE)" : "", strerror(errno));
    return errno == ENOENT ? CRNET_EINVAL : CRNET_EIO;
  }
  text = crnet__malloc(CRNET__TUNING_MAX_FILE_BYTES + 1);
  if (text == NULL) {
    fclose(f);
    snprintf(err, errlen, "out of memory");
    return CRNET_ENOMEM;
  }
  len = fread(text, 1, CRNET__TUNING_MAX_FILE_BYTES + 1, f);
  if (ferror(f)) {
    snprintf(err, errlen, "cannot read the tuning file '%s': %s", path,
             strerror(errno));
    rc = CRNET_EIO;
  } else if (len > CRNET__TUNING_MAX_FILE_BYTES) {
    snprintf(err, errlen,
             "the tuning file '%s' is larger than %d bytes: is it the right "
             "file?",
             path, CRNET__TUNING_MAX_FILE_BYTES);
    rc = CRNET_EINVAL;
  } else {
    rc = crnet__tuning_parse(t, text, len, path, err, errlen);
  }
  free(text);
  fclose(f);
  return rc;
}

int crnet__tuning_init(crnet__tuning *t, int rank, char *err, size_t errlen) {
  char path[1024];
  int where;
  crnet__tuning_defaults(t);
  if (rank != 0)
    return 0;
  where = crnet__tuning_path(path, sizeof path);
  if (where < 0)
    return 0;
  return crnet__tuning_load_file(t, path, where == 1, err, errlen);
}

/* --- the wire ------------------------------------------------------------------ */

static void put_f64(uint8_t *out, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  crnet__put_le64(out, bits);
}

static double get_f64(const uint8_t *in) {
  uint64_t bits = crnet__get_le64(in);
  double v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

void crnet__tuning_encode(const crnet__tuning *t,
                          uint8_t out[CRNET__TUNING_WIRE_SIZE]) {
  memset(out, 0, CRNET__TUNING_WIRE_SIZE);
  for (int k = 0; k < CRNET__TUNING_NPARAMS; k++) {
    uint8_t *o = out + (size_t)k * CRNET__TUNING_WIRE_PARAM;
    put_f64(o, t->base[k]);
    crnet__put_le32(o + 8, t->npoints[k]);
    for (uint32_t i = 0; i < t->npoints[k]; i++) {
      crnet__put_le32(o + 12 + 12 * i, (uint32_t)t->points[k][i].p);
      put_f64(o + 16 + 12 * i, t->points[k][i].value);
    }
  }
}

int crnet__tuning_decode(const uint8_t in[CRNET__TUNING_WIRE_SIZE],
                         const char *source, crnet__tuning *t) {
  crnet__tuning d;
  memset(&d, 0, sizeof d);
  for (int k = 0; k < CRNET__TUNING_NPARAMS; k++) {
    const uint8_t *o = in + (size_t)k * CRNET__TUNING_WIRE_PARAM;
    uint32_t n = crnet__get_le32(o + 8);
    d.base[k] = get_f64(o);
    if (!value_ok((crnet__tuning_param)k, d.base[k]) ||
        n > CRNET__TUNING_MAX_POINTS)
      return CRNET_EIO;
    d.npoints[k] = n;
    for (uint32_t i = 0; i < CRNET__TUNING_MAX_POINTS; i++) {
      uint32_t p = crnet__get_le32(o + 12 + 12 * i);
      double v = get_f64(o + 16 + 12 * i);
      if (i >= n) {
        /* Unused slots are zero, so that one tuning has one encoding. */
        for (int b = 0; b < 12; b++)
          if (o[12 + 12 * i + b] != 0)
            return CRNET_EIO;
        continue;
      }
      if (p < CRNET__TUNING_MIN_P || p > CRNET__TUNING_MAX_P ||
          (i > 0 && p <= (uint32_t)d.points[k][i - 1].p) ||
          !value_ok((crnet__tuning_param)k, v))
        return CRNET_EIO;
      d.points[k][i] = (crnet__tuning_point){(int32_t)p, v};
    }
  }
  snprintf(d.source, sizeof d.source, "%s", source);
  *t = d;
  return 0;
}

void crnet__tuning_describe(const crnet__tuning *t, int32_t p, char *buf,
                            size_t n) {
  snprintf(buf, n,
           "alpha %g s, beta %g s/B, gamma %g s/B, ring round x%g, "
           "shared memory alpha %g s, beta %g s/B at p = %d (%s)",
           crnet__tuning_get(t, CRNET__TUNING_ALPHA, p),
           crnet__tuning_get(t, CRNET__TUNING_BETA, p),
           crnet__tuning_get(t, CRNET__TUNING_GAMMA, p),
           crnet__tuning_get(t, CRNET__TUNING_RING_ROUND, p),
           crnet__tuning_get(t, CRNET__TUNING_SHM_ALPHA, p),
           crnet__tuning_get(t, CRNET__TUNING_SHM_BETA, p), (int)p,
           t->source);
}
