/* vg_canary: a rank with the two faults valgrind is there to catch, a read
 * past the end of a heap block and a block never freed. The valgrind suite
 * runs it through crlaunch and expects the job to fail, so that a wrapper
 * that has stopped finding errors (a flag lost, valgrind not really in the
 * way) fails a test too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  char *block = malloc(16);
  if (block == NULL)
    return 1;
  memset(block, 'x', 16);
  volatile char past = block[16]; /* one byte beyond the block */
  printf("vg_canary read %d\n", past != 0);
  block = NULL; /* lost: a definite leak */
  return 0;
}
