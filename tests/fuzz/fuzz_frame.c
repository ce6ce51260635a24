/* Fuzz target: the frame header decoder (src/runtime/frame.c), the first
 * code that sees a stranger's bytes after a handshake.
 *
 * Input: the header bytes (zero-padded to CRNET__FRAME_HEADER_SIZE), then
 * optionally 8 bytes of max_length (little-endian; absent: no bound).
 * Checked on every input: a refusal is CRNET_EIO with a reason and leaves
 * the output alone; an accepted header respects max_length and encodes
 * back to exactly the bytes it came from (one encoding per header); and
 * the answer does not depend on whether a reason is asked for.
 */
#include <stdbool.h>
#include <string.h>

#include "crnet.h"
#include "frame.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Field by field: struct padding is not part of a header. */
static bool same(const crnet__frame_header *a, const crnet__frame_header *b) {
  return a->kind == b->kind && a->coll == b->coll && a->flags == b->flags &&
         a->seq == b->seq && a->round == b->round && a->sig == b->sig &&
         a->length == b->length && a->call.count == b->call.count &&
         a->call.op == b->call.op && a->call.root == b->call.root &&
         a->call.dtype == b->call.dtype &&
         a->call.schedule == b->call.schedule &&
         a->call.variant == b->call.variant;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t in[CRNET__FRAME_HEADER_SIZE] = {0};
  uint8_t out[CRNET__FRAME_HEADER_SIZE];
  uint64_t max_length = UINT64_MAX;
  crnet__frame_header h, sentinel, h2;
  const char *why = NULL;
  int rc;

  memcpy(in, data, size < sizeof in ? size : sizeof in);
  if (size >= sizeof in + 8)
    max_length = crnet__get_le64(data + sizeof in);
  memset(&sentinel, 0xA5, sizeof sentinel);
  h = sentinel;
  rc = crnet__frame_decode(in, max_length, &h, &why);
  h2 = sentinel;
  if (crnet__frame_decode(in, max_length, &h2, NULL) != rc)
    fuzz_fail("decode answers differently without a reason pointer");
  if (rc != 0) {
    if (rc != CRNET_EIO)
      fuzz_fail("refusal with %d, not CRNET_EIO", rc);
    if (why == NULL || why[0] == '\0')
      fuzz_fail("refusal without a reason");
    if (!same(&h, &sentinel))
      fuzz_fail("refused header written out (%s)", why);
    return 0;
  }
  if (why != NULL)
    fuzz_fail("accepted header with a reason (%s)", why);
  if (h.length > max_length)
    fuzz_fail("length %llu over max %llu accepted",
              (unsigned long long)h.length, (unsigned long long)max_length);
  if (!same(&h, &h2))
    fuzz_fail("two decodes of one header differ");
  crnet__frame_encode(&h, out);
  if (memcmp(out, in, sizeof out) != 0)
    fuzz_fail("an accepted header does not encode back to its bytes");
  return 0;
}
