/* A main() for the fuzz harnesses in ordinary builds: runs
 * LLVMFuzzerTestOneInput once on every file named, or found in a directory
 * named, on the command line (in name order; names starting with '.' are
 * skipped), the way libFuzzer replays a corpus. This is how every build,
 * with gcc or clang, with or without the sanitizers, runs the seed corpus
 * and the regression inputs of tests/fuzz (meson tests fuzz-replay-*).
 *
 * A directory that does not exist is an error, and so is replaying
 * nothing at all: a test that cannot fail is a defect.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf = NULL;
  long n;
  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
      fseek(f, 0, SEEK_SET) != 0) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    if (f != NULL)
      fclose(f);
    return -1;
  }
  /* An exact-size copy, so that AddressSanitizer sees reads past the end. */
  buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    free(buf);
    fclose(f);
    return -1;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, (size_t)n);
  free(buf);
  return 0;
}

static int skip_hidden(const struct dirent *d) { return d->d_name[0] != '.'; }

int main(int argc, char **argv) {
  int total = 0;
  if (LLVMFuzzerInitialize != NULL)
    LLVMFuzzerInitialize(&argc, &argv);
  for (int a = 1; a < argc; a++) {
    struct stat st;
    struct dirent **names;
    int n, count = 0;
    if (stat(argv[a], &st) != 0) {
      fprintf(stderr, "replay: %s does not exist\n", argv[a]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (replay_file(argv[a]) != 0)
        return 1;
      total++;
      continue;
    }
    n = scandir(argv[a], &names, skip_hidden, alphasort);
    if (n < 0) {
      fprintf(stderr, "replay: cannot list %s\n", argv[a]);
      return 1;
    }
    for (int i = 0; i < n; i++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[a], names[i]->d_name);
      free(names[i]);
      if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        continue;
      if (replay_file(path) != 0)
        return 1;
      count++;
    }
    free(names);
    printf("replay: %d inputs from %s\n", count, argv[a]);
    total += count;
  }
  if (total == 0) {
    fprintf(stderr, "replay: no inputs\n");
    return 1;
  }
  printf("replay: %d inputs, all passed\n", total);
  return 0;
}
