/* The settings: one table of every CRNET_* variable crnet reads, with its
 * type, default, accepted values, the crnet_config field that wins over it,
 * where it is read and one line of documentation (settings.c).
 *
 * Who uses it:
 *   - comm.c's load_settings reads the rows of the communicator through
 *     crnet__settings_read and combines them (the rank and the size, lazy
 *     links by the job's size, the rendezvous port inside CRNET_PORT_RANGE,
 *     the job key into secret memory);
 *   - crlaunch --settings reads every row over the environment its ranks
 *     would get and prints the values, or the library's error;
 *   - tests/test_settings.c checks every row's parser and default, and
 *     that docs/SETTINGS.md's table names exactly the table's variables.
 * Rows of variables other files read (CRNET__READ_ELSEWHERE) are
 * documentation: their readers parse them, nothing here does.
 *
 * Nothing here blocks or allocates; errors are written into a caller's
 * buffer, worded as crnet_init_errmsg() gives them.
 */
#ifndef CRNET_SETTINGS_H
#define CRNET_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "crnet.h"

/* The largest job: CRNET_SIZE and crnet_config.size. */
#define CRNET__MAX_JOB_SIZE (1 << 24)

/* Every setting. The library reads the rows of a group in this order, which
 * decides the error it reports when several values are wrong. */
enum crnet__setting_id {
  CRNET__SET_RANK,
  CRNET__SET_SIZE,
  CRNET__SET_PROGRESS_THREAD,
  CRNET__SET_INIT_TIMEOUT,
  CRNET__SET_TIMEOUT,
  CRNET__SET_LIVENESS_TIMEOUT,
  CRNET__SET_HANDSHAKE_TIMEOUT,
  CRNET__SET_SPIN_US,
  CRNET__SET_HOST_CPUS,
  CRNET__SET_STREAM_PIECE,
  CRNET__SET_ROUNDS_IN_FLIGHT,
  CRNET__SET_STREAMS,
  CRNET__SET_STREAMS_MIN_BYTES,
  CRNET__SET_ENCRYPT,
  CRNET__SET_LAZY_LINKS,
  CRNET__SET_SOCKET_BUFFER,
  /* CRNET_<COLLECTIVE>_SCHEDULE: one row per crnet_collective, from here. */
  CRNET__SET_SCHEDULE,
  CRNET__SET_TRACE = CRNET__SET_SCHEDULE + CRNET_COLL_COUNT,
  CRNET__SET_STATS,
  CRNET__SET_TRANSPORT,
  CRNET__SET_SHM_RING_BYTES,
  CRNET__SET_SHM_SINGLE_COPY,
  CRNET__SET_SHM_BOARD_BYTES,
  CRNET__SET_SHM_MEMBARRIER,
  CRNET__SET_ON_FAILURE,
  CRNET__SET_RESTARTS,
  CRNET__SET_RESTARTED,
  CRNET__SET_RENDEZVOUS,
  CRNET__SET_LAUNCHER,
  CRNET__SET_PORT_RANGE,
  CRNET__SET_IFACE,
  CRNET__SET_JOB_KEY,
  CRNET__SET_JOB_KEY_FILE,
  CRNET__SET_LAUNCHER_FD,
  CRNET__SET_DEBUG,
  CRNET__SET_NO_AESNI,
  CRNET__SET_NO_F16C,
  CRNET__SET_TUNING_FILE,
  CRNET__SET_SSH,
  CRNET__SET_AGENT_SILENCE,
  CRNET__SETTING_COUNT
};

/* When, and by whom, a setting is read. */
enum crnet__setting_group {
  CRNET__READ_JOB,       /* the job's shape: load_settings itself, which
                            falls back on Slurm's variables */
  CRNET__READ_INIT,      /* by every crnet_comm_init */
  CRNET__READ_PEERS,     /* by crnet_comm_init of a job of 2 ranks or more */
  CRNET__READ_KEY,       /* likewise, by load_settings into secret memory */
  CRNET__READ_ELSEWHERE, /* by another file (the row's read_by) */
};

/* What a value looks like. */
typedef enum crnet__setting_type {
  CRNET__SETTING_INTEGER,    /* decimal, lo to hi (a power of two if the
                                row says so), in `unit` */
  CRNET__SETTING_SECONDS,    /* decimal with fractions, up to hi; 0 only if
                                `zero` says what it means; else at least lo */
  CRNET__SETTING_WORD,       /* one of `words` */
  CRNET__SETTING_TEXT,       /* any string shorter than max_length bytes */
  CRNET__SETTING_HOST_PORT,  /* host:port, [v6addr]:port or name:port */
  CRNET__SETTING_PORT_RANGE, /* lo-hi, 1 <= lo <= hi <= 65535 */
  CRNET__SETTING_KEY,        /* 64 hex digits: a secret, never echoed */
  CRNET__SETTING_FLAG,       /* set or not: the value is not looked at */
} crnet__setting_type;

/* How a crnet_config field wins over the variable. */
typedef enum crnet__setting_config {
  CRNET__CONFIG_NONE,
  CRNET__CONFIG_CHOICE,  /* an int field, when >= 0: the value itself */
  CRNET__CONFIG_SECONDS, /* a double field, when > 0: the seconds */
  CRNET__CONFIG_STRING,  /* a string field, when not NULL: parsed as the
                            variable's value would be ("" as unset) */
} crnet__setting_config;

#define CRNET__SETTING_MAX_WORDS 4

typedef struct crnet__setting_word {
  const char *word; /* NULL ends the list */
  int value;
} crnet__setting_word;

typedef struct crnet__setting {
  const char *name; /* the environment variable */
  crnet__setting_type type;
  enum crnet__setting_group group;
  /* The default, written as a value and parsed like one (so the docs and
   * the code cannot disagree); NULL: unset means what `unset` says. */
  const char *default_value;
  const char *unset;
  const char *unit; /* INTEGER: "bytes", "microseconds", ... */
  double lo, hi;    /* INTEGER, SECONDS */
  bool power_of_two;         /* INTEGER: only powers of two */
  bool hi_as_power;          /* INTEGER: errors write hi as 2^30 */
  const char *zero;          /* SECONDS: what 0 means; NULL: 0 is refused */
  crnet__setting_word words[CRNET__SETTING_MAX_WORDS]; /* WORD */
  size_t max_length;         /* TEXT: the longest accepted is one less */
  const char *what;          /* the error's "is not ...", where the type's
                                own wording does not fit ("a rank") */
  bool empty_is_value;       /* "" is a value, not unset */
  const char *missing;       /* unset is an error, saying this */
  crnet__setting_config config;
  size_t config_offset;      /* in crnet_config */
  const char *config_field;  /* "crnet_config.timeout" */
  const char *read_by;       /* the file that reads it */
  const char *doc;           /* one line */
} crnet__setting;

extern const crnet__setting crnet__settings_table[CRNET__SETTING_COUNT];

/* Where a value came from. */
typedef enum crnet__setting_source {
  CRNET__FROM_NONE,    /* unset, and the setting has no default value */
  CRNET__FROM_DEFAULT,
  CRNET__FROM_ENVIRONMENT,
  CRNET__FROM_CONFIG,  /* a crnet_config field */
} crnet__setting_source;

typedef struct crnet__setting_value {
  crnet__setting_source source;
  /* As given, or the default: borrowed from the environment, the config or
   * the table. NULL for a config number and for FROM_NONE. */
  const char *text;
  long number;    /* INTEGER; WORD: the word's value; HOST_PORT: the port;
                     PORT_RANGE: lo */
  long high;      /* PORT_RANGE: hi */
  double seconds; /* SECONDS */
} crnet__setting_value;

/* Where crnet__setting_read looks a variable up: the process's environment
 * for the library, the ranks' environment to be for crlaunch. Returns the
 * value, or NULL if unset. Must not block. */
typedef const char *crnet__setting_lookup(const char *name, void *arg);

/* Parses `text` as setting `id`'s value into out's number, high, seconds
 * and text (its source is the caller's). `name` is the variable an error
 * names: the row's own, or the one the value came from (SLURM_PROCID).
 * 0, or CRNET_EINVAL with the reason in err. */
int crnet__setting_parse(int id, const char *name, const char *text,
                         crnet__setting_value *out, char *err, size_t errlen);

/* Reads setting `id`: cfg's field where cfg (may be NULL) sets it, else
 * lookup's value (unless empty, for a row where "" is unset), else the
 * default. 0, or CRNET_EINVAL with the reason in err. */
int crnet__setting_read(int id, const crnet_config *cfg,
                        crnet__setting_lookup *lookup, void *arg,
                        crnet__setting_value *out, char *err, size_t errlen);

/* Reads every setting of `group` in table order into values[id]; the first
 * error stops it. 0, or CRNET_EINVAL with the reason in err. */
int crnet__settings_read(enum crnet__setting_group group,
                         const crnet_config *cfg,
                         crnet__setting_lookup *lookup, void *arg,
                         crnet__setting_value values[CRNET__SETTING_COUNT],
                         char *err, size_t errlen);
/* The same, leaving setting `except` (-1: none) unread: its value's source
 * is CRNET__FROM_NONE and its text NULL, whatever the table says of a
 * missing value (CRNET_RENDEZVOUS, which a directory can stand in for). */
int crnet__settings_read_except(
    enum crnet__setting_group group, int except, const crnet_config *cfg,
    crnet__setting_lookup *lookup, void *arg,
    crnet__setting_value values[CRNET__SETTING_COUNT], char *err,
    size_t errlen);

/* What setting `id` accepts, as its error says it: "a number of bytes (0
 * to 2^30)", "0, 1 or auto", "host:port". */
void crnet__setting_accepts(int id, char *buf, size_t len);

/* host:port, [v6addr]:port or name:port, the port 1 to 65535. 0 or -1. */
int crnet__settings_host_port(const char *text, char *host, size_t hostlen,
                              int *port);

#endif
