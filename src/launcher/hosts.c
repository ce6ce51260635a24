/* Host lists and rank placement. See hosts.h. */
#include "hosts.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *why, size_t why_len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, why_len, fmt, ap);
  va_end(ap);
  return -1;
}

/* A slot count: decimal digits only, 1..MAX_RANKS-ish. -1 if not. */
static int parse_slots(const char *s, size_t len) {
  if (len == 0 || len > 6)
    return -1;
  int v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v >= 1 && v <= 65536 ? v : -1;
}

/* Host names and addresses: letters, digits and "-._:%" (the last two for
 * IPv6 addresses and their zones); a user part ("user@host") is ssh's to
 * read and allowed too. Anything else would reach a shell or ssh's
 * option parser. */
static int valid_name(const char *s, size_t len) {
  if (len == 0 || len > CRNET__HOST_NAME_MAX || s[0] == '-')
    return 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!isalnum(c) && strchr("-._:%@", c) == NULL)
      return 0;
  }
  return 1;
}

static int add_host(crnet__hostlist *hl, const char *name, size_t len,
                    int slots, char *why, size_t why_len) {
  if (!valid_name(name, len))
    return fail(why, why_len, "'%.*s' is not a host name", (int)len, name);
  /* A host named again (mpirun's "--host a,a,b") adds its slots. */
  for (int i = 0; i < hl->n; i++)
    if (strlen(hl->hosts[i].name) == len &&
        memcmp(hl->hosts[i].name, name, len) == 0) {
      if (hl->hosts[i].slots > 65536 - slots)
        return fail(why, why_len, "'%.*s': more than 65536 slots", (int)len,
                    name);
      hl->hosts[i].slots += slots;
      hl->slots += slots;
      return 0;
    }
  if (hl->n >= CRNET__HOSTS_MAX)
    return fail(why, why_len, "more than %d hosts", CRNET__HOSTS_MAX);
  crnet__host *h = realloc(hl->hosts, (size_t)(hl->n + 1) * sizeof *h);
  if (h == NULL)
    return fail(why, why_len, "out of memory");
  hl->hosts = h;
  h = &hl->hosts[hl->n++];
  memset(h, 0, sizeof *h);
  memcpy(h->name, name, len);
  h->name[len] = '\0';
  h->slots = slots;
  hl->slots += slots;
  return 0;
}

/* One item of a --hosts list: "name", "name:N", "[v6]", "[v6]:N", or a bare
 * IPv6 address. */
static int parse_item(crnet__hostlist *hl, const char *s, size_t len,
                      char *why, size_t why_len) {
  const char *name = s;
  size_t name_len = len;
  int slots = 1;
  const char *count = NULL;
  size_t count_len = 0;
  if (len > 0 && s[0] == '[') {
    const char *close = memchr(s, ']', len);
    if (close == NULL)
      return fail(why, why_len, "'%.*s': no closing ']'", (int)len, s);
    name = s + 1;
    name_len = (size_t)(close - name);
    size_t rest = len - (size_t)(close + 1 - s);
    if (rest > 0) {
      if (close[1] != ':')
        return fail(why, why_len, "'%.*s': expected ':N' after ']'", (int)len,
                    s);
      count = close + 2;
      count_len = rest - 1;
    }
  } else {
    const char *colon = memchr(s, ':', len);
    const char *second =
        colon != NULL ? memchr(colon + 1, ':', len - (size_t)(colon + 1 - s))
                      : NULL;
    if (colon != NULL && second == NULL) {
      name_len = (size_t)(colon - s);
      count = colon + 1;
      count_len = len - name_len - 1;
    }
  }
  if (count != NULL) {
    slots = parse_slots(count, count_len);
    if (slots < 0)
      return fail(why, why_len, "'%.*s': the slot count must be 1..65536",
                  (int)len, s);
  }
  return add_host(hl, name, name_len, slots, why, why_len);
}

int crnet__hosts_parse_list(crnet__hostlist *hl, const char *spec, char *why,
                            size_t why_len) {
  const char *p = spec;
  if (*p == '\0')
    return fail(why, why_len, "the host list is empty");
  for (;;) {
    size_t len = strcspn(p, ",");
    if (len == 0)
      return fail(why, why_len, "an empty item in the host list '%s'", spec);
    if (parse_item(hl, p, len, why, why_len) != 0)
      return -1;
    if (p[len] == '\0')
      return 0;
    p += len + 1;
  }
}

/* One line of a host file, comments already cut: "name [slots=N]". */
static int parse_line(crnet__hostlist *hl, char *line, char *why,
                      size_t why_len) {
  char *save = NULL;
  char *name = strtok_r(line, " \t\r", &save);
  if (name == NULL)
    return 0;
  int slots = 1;
  char *word;
  while ((word = strtok_r(NULL, " \t\r", &save)) != NULL) {
    if (strncmp(word, "slots=", 6) != 0)
      return fail(why, why_len, "'%s': expected slots=N", word);
    slots = parse_slots(word + 6, strlen(word + 6));
    if (slots < 0)
      return fail(why, why_len, "'%s': the slot count must be 1..65536",
                  word);
  }
  size_t len = strlen(name);
  if (len >= 2 && name[0] == '[' && name[len - 1] == ']')
    return add_host(hl, name + 1, len - 2, slots, why, why_len);
  return add_host(hl, name, len, slots, why, why_len);
}

int crnet__hosts_parse_file(crnet__hostlist *hl, const char *path, char *why,
                            size_t why_len) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return fail(why, why_len, "%s: %s", path, strerror(errno));
  char line[1024];
  int lineno = 0;
  int rc = 0;
  int before = hl->n;
  while (rc == 0 && fgets(line, sizeof line, f) != NULL) {
    lineno++;
    size_t len = strlen(line);
    if (len == sizeof line - 1 && line[len - 1] != '\n') {
      rc = fail(why, why_len, "%s:%d: line too long", path, lineno);
      break;
    }
    line[strcspn(line, "#\n")] = '\0';
    char msg[300];
    if (parse_line(hl, line, msg, sizeof msg) != 0)
      rc = fail(why, why_len, "%s:%d: %s", path, lineno, msg);
  }
  if (rc == 0 && ferror(f))
    rc = fail(why, why_len, "%s: %s", path, strerror(errno));
  fclose(f);
  if (rc == 0 && hl->n == before)
    rc = fail(why, why_len, "%s: no hosts in the file", path);
  return rc;
}

/* ---- Slurm's allocation ------------------------------------------------ */

/* The names of a Slurm host list item `s` (len bytes), after `prefix` (plen
 * bytes of name[]): "node[01-03,7]-ib" is node01-ib, node02-ib, node03-ib,
 * node7-ib. A range keeps the width of its first bound ("01-03"); several
 * bracket groups multiply out. Each full name goes to names[], up to max
 * of them. The number of names, or -1 with why. */
static int expand_slurm_item(const char *s, size_t len, char *name, size_t plen,
                             char (*names)[CRNET__HOST_NAME_MAX + 1], int n,
                             int max, char *why, size_t why_len) {
  const char *open = memchr(s, '[', len);
  size_t lit = open != NULL ? (size_t)(open - s) : len;
  if (plen + lit > CRNET__HOST_NAME_MAX)
    return fail(why, why_len, "a host name of the list is too long");
  memcpy(name + plen, s, lit);
  plen += lit;
  if (open == NULL) {
    if (n >= max)
      return fail(why, why_len, "more than %d hosts", max);
    memcpy(names[n], name, plen);
    names[n][plen] = '\0';
    return n + 1;
  }
  const char *close = memchr(open, ']', len - lit);
  if (close == NULL)
    return fail(why, why_len, "'%.*s': no closing ']'", (int)len, s);
  const char *rest = close + 1;
  size_t rest_len = len - (size_t)(rest - s);
  const char *p = open + 1;
  if (p == close)
    return fail(why, why_len, "'%.*s': an empty range", (int)len, s);
  while (p < close) {
    size_t item = strcspn(p, ",]");
    const char *dash = memchr(p, '-', item);
    size_t lo_len = dash != NULL ? (size_t)(dash - p) : item;
    size_t hi_len = dash != NULL ? item - lo_len - 1 : item;
    const char *hi_s = dash != NULL ? dash + 1 : p;
    unsigned long lo = 0, hi = 0;
    for (size_t i = 0; i < lo_len; i++)
      lo = lo * 10 + (unsigned long)(p[i] - '0');
    for (size_t i = 0; i < hi_len; i++)
      hi = hi * 10 + (unsigned long)(hi_s[i] - '0');
    int digits = lo_len > 0 && lo_len <= 9 && hi_len > 0 && hi_len <= 9;
    for (size_t i = 0; digits && i < lo_len; i++)
      digits = isdigit((unsigned char)p[i]);
    for (size_t i = 0; digits && i < hi_len; i++)
      digits = isdigit((unsigned char)hi_s[i]);
    if (!digits || hi < lo)
      return fail(why, why_len, "'%.*s': '%.*s' is not a range of numbers",
                  (int)len, s, (int)item, p);
    if (hi - lo >= (unsigned long)max)
      return fail(why, why_len, "more than %d hosts", max);
    for (unsigned long v = lo; v <= hi; v++) {
      char num[24];
      int w = snprintf(num, sizeof num, "%0*lu", (int)lo_len, v);
      if (plen + (size_t)w > CRNET__HOST_NAME_MAX)
        return fail(why, why_len, "a host name of the list is too long");
      memcpy(name + plen, num, (size_t)w);
      n = expand_slurm_item(rest, rest_len, name, plen + (size_t)w, names, n,
                            max, why, why_len);
      if (n < 0)
        return -1;
    }
    p += item + (p[item] == ',');
  }
  return n;
}

/* The task counts of SLURM_TASKS_PER_NODE ("2(x3),1": 2, 2, 2, 1) into
 * counts[0..max). Their number, or -1 with why. */
static int parse_slurm_counts(const char *s, int *counts, int max, char *why,
                              size_t why_len) {
  int n = 0;
  const char *p = s;
  for (;;) {
    char *end;
    errno = 0;
    long c = strtol(p, &end, 10);
    long times = 1;
    if (end == p || errno != 0 || c < 1 || c > 65536 ||
        !isdigit((unsigned char)*p))
      return fail(why, why_len,
                  "SLURM_TASKS_PER_NODE='%s' is not a list of "
                  "counts (\"2(x3),1\")",
                  s);
    p = end;
    if (strncmp(p, "(x", 2) == 0) {
      times = strtol(p + 2, &end, 10);
      if (end == p + 2 || *end != ')' || times < 1 || times > max)
        return fail(why, why_len,
                    "SLURM_TASKS_PER_NODE='%s' is not a list "
                    "of counts (\"2(x3),1\")",
                    s);
      p = end + 1;
    }
    if (times > max - n)
      return fail(why, why_len,
                  "SLURM_TASKS_PER_NODE='%s' names more "
                  "nodes than the allocation has",
                  s);
    for (long i = 0; i < times; i++)
      counts[n++] = (int)c;
    if (*p == '\0')
      return n;
    if (*p != ',')
      return fail(why, why_len,
                  "SLURM_TASKS_PER_NODE='%s' is not a list of "
                  "counts (\"2(x3),1\")",
                  s);
    p++;
  }
}

int crnet__hosts_parse_slurm(crnet__hostlist *hl, const char *nodelist,
                             const char *tasks_per_node, char *why,
                             size_t why_len) {
  char(*names)[CRNET__HOST_NAME_MAX + 1] =
      calloc(CRNET__HOSTS_MAX, sizeof *names);
  int *counts = calloc(CRNET__HOSTS_MAX, sizeof *counts);
  char name[CRNET__HOST_NAME_MAX + 1];
  int n = 0, rc = -1;
  if (names == NULL || counts == NULL) {
    fail(why, why_len, "out of memory");
    goto out;
  }
  /* Items are separated by the commas outside brackets. */
  const char *p = nodelist;
  while (n >= 0 && *p != '\0') {
    size_t len = 0;
    int depth = 0;
    while (p[len] != '\0' && (depth > 0 || p[len] != ',')) {
      depth += p[len] == '[' ? 1 : p[len] == ']' ? -1 : 0;
      len++;
    }
    if (len == 0) {
      fail(why, why_len, "an empty item in the node list '%s'", nodelist);
      goto out;
    }
    n = expand_slurm_item(p, len, name, 0, names, n, CRNET__HOSTS_MAX, why,
                          why_len);
    p += len + (p[len] == ',');
  }
  if (n <= 0) {
    if (n == 0)
      fail(why, why_len, "the node list is empty");
    goto out;
  }
  int ncounts = parse_slurm_counts(tasks_per_node, counts, CRNET__HOSTS_MAX,
                                   why, why_len);
  if (ncounts < 0)
    goto out;
  if (ncounts != n) {
    fail(why, why_len,
         "the node list '%s' has %d node%s, but "
         "SLURM_TASKS_PER_NODE='%s' gives counts for %d",
         nodelist, n, n == 1 ? "" : "s", tasks_per_node, ncounts);
    goto out;
  }
  rc = 0;
  for (int i = 0; i < n && rc == 0; i++)
    rc = add_host(hl, names[i], strlen(names[i]), counts[i], why, why_len);
out:
  free(names);
  free(counts);
  return rc;
}

static int is_local_name(const char *name, const char *self) {
  return strcmp(name, "localhost") == 0 || strcmp(name, "127.0.0.1") == 0 ||
         strcmp(name, "::1") == 0 || (self != NULL && strcmp(name, self) == 0);
}

int crnet__hosts_place(crnet__hostlist *hl, int nranks, const char *self,
                       char *why, size_t why_len) {
  if (hl->n == 0)
    return fail(why, why_len, "no hosts");
  if (nranks > hl->slots)
    return fail(why, why_len,
                "%d ranks do not fit in the %ld slot%s of the host list",
                nranks, hl->slots, hl->slots == 1 ? "" : "s");
  int next = 0;
  for (int i = 0; i < hl->n; i++) {
    crnet__host *h = &hl->hosts[i];
    int left = nranks - next;
    h->first = next;
    h->count = left < h->slots ? left : h->slots;
    h->local = is_local_name(h->name, self);
    next += h->count;
  }
  return 0;
}

void crnet__hosts_free(crnet__hostlist *hl) {
  free(hl->hosts);
  hl->hosts = NULL;
  hl->n = 0;
  hl->slots = 0;
}
