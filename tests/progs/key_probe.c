/* key_probe: a rank that reports what it can see of its job key, for the
 * key hygiene test of test_security (run under crlaunch).
 *
 * Before crnet_comm_init it reads the key file named by CRNET_JOB_KEY_FILE
 * (as the library will) and notes the modes of the file and of its
 * directory. After init and one checked allreduce it waits (at most 5 s)
 * for crlaunch to remove the key file, then writes a report to
 * $KEY_PROBE_DIR/rank.R and waits (at most 30 s) for $KEY_PROBE_DIR/release
 * to appear, so that the test can read /proc/PID/cmdline and environ of the
 * live rank. The report holds the key: the test needs it to search for it,
 * and KEY_PROBE_DIR is the test's own private directory.
 *
 * Exit status 0 when every step worked, 1 otherwise (said on stderr).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crnet.h"

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Waits until `path` exists (want 1) or is gone (want 0); 1 if it came to
 * pass within ms milliseconds. */
static int wait_path(const char *path, int want, long ms) {
  for (long t = 0; t <= ms; t += 10) {
    if ((access(path, F_OK) == 0) == (want == 1))
      return 1;
    sleep_ms(10);
  }
  return 0;
}

int main(void) {
  const char *dir = getenv("KEY_PROBE_DIR");
  const char *path = getenv("CRNET_JOB_KEY_FILE");
  const char *r = getenv("CRNET_RANK");
  char key[128] = "", keydir[4096], report[4096], tmp[4200], release[4096];
  struct stat fst, dst;
  crnet_comm *c;
  int64_t v, sum = 0;
  int rank, rc, removed;
  FILE *f;

  if (dir == NULL || path == NULL || r == NULL) {
    fprintf(stderr, "key_probe: KEY_PROBE_DIR, CRNET_JOB_KEY_FILE and "
                    "CRNET_RANK must be set\n");
    return 1;
  }
  rank = atoi(r);
  f = fopen(path, "r");
  if (f == NULL || fgets(key, sizeof key, f) == NULL || stat(path, &fst) != 0) {
    fprintf(stderr, "key_probe: cannot read %s: %s\n", path, strerror(errno));
    return 1;
  }
  fclose(f);
  key[strcspn(key, " \r\n")] = '\0';
  snprintf(keydir, sizeof keydir, "%s", path);
  if (strrchr(keydir, '/') != NULL)
    *strrchr(keydir, '/') = '\0';
  if (stat(keydir, &dst) != 0) {
    fprintf(stderr, "key_probe: cannot stat %s\n", keydir);
    return 1;
  }

  rc = crnet_comm_init(&c, NULL);
  if (rc != 0) {
    fprintf(stderr, "key_probe: init: %s\n", crnet_init_errmsg());
    return 1;
  }
  v = rank + 1;
  rc = crnet_allreduce(c, &v, &sum, 1, CRNET_INT64, CRNET_SUM);
  if (rc == 0 && sum != (int64_t)crnet_comm_size(c) *
                            (crnet_comm_size(c) + 1) / 2)
    rc = CRNET_EIO;
  /* Every rank has registered (the allreduce needs the whole mesh), so
   * crlaunch is removing the key file, if it has not already. */
  removed = wait_path(path, 0, 5000);

  snprintf(report, sizeof report, "%s/rank.%d", dir, rank);
  snprintf(tmp, sizeof tmp, "%s.tmp", report);
  f = fopen(tmp, "w");
  if (f == NULL) {
    fprintf(stderr, "key_probe: cannot write %s\n", tmp);
    return 1;
  }
  fprintf(f, "pid %d\nkey %s\nfile_mode %o\ndir_mode %o\nowner_ok %d\n"
             "removed %d\nallreduce %d\n",
          (int)getpid(), key, (unsigned)(fst.st_mode & 07777),
          (unsigned)(dst.st_mode & 07777),
          fst.st_uid == getuid() && dst.st_uid == getuid(), removed, rc);
  fclose(f);
  memset(key, 0, sizeof key);
  if (rename(tmp, report) != 0)
    return 1;

  snprintf(release, sizeof release, "%s/release", dir);
  if (!wait_path(release, 1, 30000)) {
    fprintf(stderr, "key_probe: rank %d: never released\n", rank);
    rc = CRNET_ETIMEDOUT;
  }
  if (crnet_comm_destroy(c) != 0)
    rc = CRNET_EIO;
  return rc == 0 ? 0 : 1;
}
