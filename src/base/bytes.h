/* Little-endian encoding of integers, for every wire and file format of
 * crnet: frames, the handshake and the rendezvous (runtime), the tuning
 * constants carried in the rendezvous (tuning.h). */
#ifndef CRNET_BYTES_H
#define CRNET_BYTES_H

#include <stdint.h>

static inline void crnet__put_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t crnet__get_le32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}

static inline void crnet__put_le64(uint8_t *p, uint64_t v) {
  crnet__put_le32(p, (uint32_t)v);
  crnet__put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint64_t crnet__get_le64(const uint8_t *p) {
  return (uint64_t)crnet__get_le32(p) |
         ((uint64_t)crnet__get_le32(p + 4) << 32);
}

static inline void crnet__put_le16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline uint16_t crnet__get_le16(const uint8_t *p) {
  return (uint16_t)(p[0] | (p[1] << 8));
}

#endif
