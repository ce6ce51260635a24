/* The agent configuration block and the words of an ssh command. See
 * remote.h. */
#include "remote.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *why, size_t why_len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, why_len, fmt, ap);
  va_end(ap);
  return -1;
}

/* ---- encoding --------------------------------------------------------- */

struct buf {
  char *p;
  size_t len;
  size_t cap;
  int nomem;
};

static void put(struct buf *b, const char *name, const char *value) {
  size_t need = strlen(name) + 1 + strlen(value) + 1;
  if (b->nomem)
    return;
  if (b->len + need + 1 > b->cap) {
    size_t cap = (b->len + need + 1) * 2;
    char *p = malloc(cap);
    if (p == NULL) {
      b->nomem = 1;
      return;
    }
    /* Grown by hand rather than realloc so that the old copy, which may
     * hold the key, is wiped before it is freed. */
    if (b->p != NULL) {
      memcpy(p, b->p, b->len);
      crnet__wipe(b->p, b->cap);
      free(b->p);
    }
    b->p = p;
    b->cap = cap;
  }
  b->len += (size_t)sprintf(b->p + b->len, "%s=%s", name, value) + 1;
}

static void put_int(struct buf *b, const char *name, int v) {
  char s[16];
  snprintf(s, sizeof s, "%d", v);
  put(b, name, s);
}

int crnet__agent_config_encode(const crnet__agent_config *c, char **out,
                               size_t *len) {
  struct buf b = {0};
  char hex[2 * CRNET__KEY_BYTES + 1];
  crnet__key_to_hex(c->key, hex);
  put_int(&b, "v", CRNET__AGENT_VERSION);
  put(&b, "key", hex);
  crnet__wipe(hex, sizeof hex);
  put(&b, "cwd", c->cwd);
  put(&b, "rendezvous", c->rendezvous);
  put(&b, "init_timeout", c->init_timeout);
  put_int(&b, "grace_ms", c->grace_ms);
  put_int(&b, "size", c->size);
  put_int(&b, "first", c->first);
  put_int(&b, "count", c->count);
  put_int(&b, "tag", c->tag_output);
  put_int(&b, "bind_none", c->bind_none);
  put_int(&b, "report_bindings", c->report_bindings);
  put(&b, "report", c->report);
  for (int i = 0; i < c->nenv; i++)
    put(&b, "env", c->env[i]);
  for (int i = 0; i < c->argc; i++)
    put(&b, "arg", c->argv[i]);
  if (b.nomem) {
    if (b.p != NULL)
      crnet__wipe(b.p, b.cap);
    free(b.p);
    return -1;
  }
  b.p[b.len++] = '\0'; /* the empty item that ends the block */
  *out = b.p;
  *len = b.len;
  return 0;
}

/* ---- decoding --------------------------------------------------------- */

static int append(char ***list, int *n, const char *s) {
  char **l = realloc(*list, (size_t)(*n + 2) * sizeof *l);
  if (l == NULL)
    return -1;
  *list = l;
  l[*n] = strdup(s);
  if (l[*n] == NULL)
    return -1;
  l[++*n] = NULL;
  return 0;
}

static int set_string(char **field, const char *s) {
  free(*field);
  *field = strdup(s);
  return *field == NULL ? -1 : 0;
}

/* A decimal integer in [lo, hi], or -1. */
static long parse_int(const char *s, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
    return -1;
  return v;
}

static int decode_item(crnet__agent_config *c, const char *item,
                       int *have_key, char *why, size_t why_len) {
  const char *eq = strchr(item, '=');
  if (eq == NULL)
    return fail(why, why_len, "item without '='");
  size_t nlen = (size_t)(eq - item);
  const char *v = eq + 1;
#define IS(name) (nlen == sizeof name - 1 && memcmp(item, name, nlen) == 0)
  long n;
  if (IS("v")) {
    if (parse_int(v, CRNET__AGENT_VERSION, CRNET__AGENT_VERSION) < 0)
      return fail(why, why_len,
                  "protocol version %s (this crlaunch speaks %d): the "
                  "crlaunch on this host is another version",
                  v, CRNET__AGENT_VERSION);
    return 0;
  }
  if (IS("key")) {
    if (crnet__key_parse_hex(v, c->key) != 0)
      return fail(why, why_len, "malformed key");
    *have_key = 1;
    return 0;
  }
  if (IS("cwd"))
    return set_string(&c->cwd, v);
  if (IS("rendezvous"))
    return set_string(&c->rendezvous, v);
  if (IS("init_timeout"))
    return set_string(&c->init_timeout, v);
  if (IS("report"))
    return set_string(&c->report, v);
  if (IS("size") || IS("first") || IS("count") || IS("tag") ||
      IS("bind_none") || IS("report_bindings") || IS("grace_ms")) {
    n = parse_int(v, 0, 1L << 30);
    if (n < 0)
      return fail(why, why_len, "%.*s=%s: not a number", (int)nlen, item, v);
    if (IS("size"))
      c->size = (int)n;
    else if (IS("first"))
      c->first = (int)n;
    else if (IS("count"))
      c->count = (int)n;
    else if (IS("tag"))
      c->tag_output = n != 0;
    else if (IS("bind_none"))
      c->bind_none = n != 0;
    else if (IS("grace_ms"))
      c->grace_ms = (int)n;
    else
      c->report_bindings = n != 0;
    return 0;
  }
  if (IS("env")) {
    if (strchr(v, '=') == NULL || v[0] == '=')
      return fail(why, why_len, "env item without a name");
    return append(&c->env, &c->nenv, v);
  }
  if (IS("arg"))
    return append(&c->argv, &c->argc, v);
#undef IS
  return fail(why, why_len, "unknown item '%.*s'", (int)nlen, item);
}

int crnet__agent_config_decode(const char *buf, size_t len,
                               crnet__agent_config *c, char *why,
                               size_t why_len) {
  memset(c, 0, sizeof *c);
  int have_key = 0;
  size_t at = 0;
  int rc = 0;
  while (rc == 0) {
    const char *item = buf + at;
    const char *nul = memchr(item, '\0', len - at);
    if (nul == NULL) {
      rc = fail(why, why_len, "the configuration is cut short");
      break;
    }
    at = (size_t)(nul - buf) + 1;
    if (item == nul)
      break; /* the empty item: done */
    why[0] = '\0';
    if (decode_item(c, item, &have_key, why, why_len) != 0) {
      if (why[0] == '\0')
        fail(why, why_len, "out of memory");
      rc = -1;
    }
  }
  if (rc == 0 && (!have_key || c->cwd == NULL || c->rendezvous == NULL ||
                  c->init_timeout == NULL || c->report == NULL ||
                  c->grace_ms < 1 ||
                  c->argc == 0))
    rc = fail(why, why_len, "the configuration misses an item");
  if (rc == 0 && (c->size < 1 || c->count < 1 || c->first < 0 ||
                  c->first >= c->size || c->count > c->size - c->first))
    rc = fail(why, why_len, "ranks %d..%ld do not fit a job of %d", c->first,
              (long)c->first + c->count - 1, c->size);
  if (rc != 0)
    crnet__agent_config_free(c);
  return rc;
}

int crnet__agent_config_read(int fd, crnet__agent_config *c, char *why,
                             size_t why_len) {
  char *buf = malloc(CRNET__AGENT_CONFIG_MAX + 1); /* + the final NUL */
  if (buf == NULL)
    return fail(why, why_len, "out of memory");
  size_t len = 0;
  int rc = -1;
  for (;;) {
    if (len == CRNET__AGENT_CONFIG_MAX) {
      fail(why, why_len, "the configuration is larger than %d bytes",
           CRNET__AGENT_CONFIG_MAX);
      break;
    }
    ssize_t n = read(fd, buf + len, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      fail(why, why_len, "standard input ended before the configuration%s%s",
           n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
      break;
    }
    len++;
    /* The block ends with an empty item: two NULs in a row (or a NUL
     * first, which decode refuses). */
    if (buf[len - 1] == '\0' && (len == 1 || buf[len - 2] == '\0')) {
      buf[len] = '\0';
      rc = crnet__agent_config_decode(buf, len, c, why, why_len);
      break;
    }
  }
  crnet__wipe(buf, len);
  free(buf);
  return rc;
}

void crnet__agent_config_free(crnet__agent_config *c) {
  crnet__wipe(c->key, sizeof c->key);
  free(c->cwd);
  free(c->rendezvous);
  free(c->init_timeout);
  free(c->report);
  crnet__free_words(c->env);
  crnet__free_words(c->argv);
  memset(c, 0, sizeof *c);
}

/* ---- words ------------------------------------------------------------ */

void crnet__free_words(char **argv) {
  if (argv == NULL)
    return;
  for (char **w = argv; *w != NULL; w++)
    free(*w);
  free(argv);
}

int crnet__split_words(const char *cmd, char ***argv, int *argc, char *why,
                       size_t why_len) {
  char **words = NULL;
  int n = 0;
  size_t cap = strlen(cmd) + 1;
  char *word = malloc(cap);
  if (word == NULL)
    return fail(why, why_len, "out of memory");
  const char *p = cmd;
  int rc = 0;
  while (rc == 0) {
    while (*p == ' ' || *p == '\t' || *p == '\n')
      p++;
    if (*p == '\0')
      break;
    size_t len = 0;
    while (rc == 0 && *p != '\0' && *p != ' ' && *p != '\t' && *p != '\n') {
      if (*p == '\'') {
        const char *end = strchr(p + 1, '\'');
        if (end == NULL) {
          rc = fail(why, why_len, "'%s': unbalanced single quote", cmd);
          break;
        }
        memcpy(word + len, p + 1, (size_t)(end - p - 1));
        len += (size_t)(end - p - 1);
        p = end + 1;
      } else if (*p == '"') {
        p++;
        while (*p != '"' && *p != '\0') {
          if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
            p++;
          word[len++] = *p++;
        }
        if (*p != '"')
          rc = fail(why, why_len, "'%s': unbalanced double quote", cmd);
        else
          p++;
      } else if (*p == '\\' && p[1] != '\0') {
        word[len++] = p[1];
        p += 2;
      } else {
        word[len++] = *p++;
      }
    }
    if (rc != 0)
      break;
    word[len] = '\0';
    if (append(&words, &n, word) != 0)
      rc = fail(why, why_len, "out of memory");
  }
  free(word);
  if (rc == 0 && n == 0)
    rc = fail(why, why_len, "the ssh command is empty");
  if (rc != 0) {
    crnet__free_words(words);
    return -1;
  }
  *argv = words;
  *argc = n;
  return 0;
}

char *crnet__shell_quote(const char *s) {
  size_t quotes = 0;
  for (const char *p = s; *p != '\0'; p++)
    quotes += *p == '\'';
  char *out = malloc(strlen(s) + 3 * quotes + 3);
  if (out == NULL)
    return NULL;
  char *o = out;
  *o++ = '\'';
  for (const char *p = s; *p != '\0'; p++) {
    if (*p == '\'') {
      memcpy(o, "'\\''", 4);
      o += 4;
    } else {
      *o++ = *p;
    }
  }
  *o++ = '\'';
  *o = '\0';
  return out;
}
