/* Joining the crnet job through torch's store, for ranks that torch's own
 * launchers started (torchrun, a Kubernetes PyTorchJob: env:// with RANK,
 * WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and that have none of crnet's
 * environment.
 *
 * The store torch hands the backend (a c10d::Store, usually a PrefixStore
 * over env://'s TCPStore) serves as crnet_config.directory: rank 0 serves
 * crnet's rendezvous on a port of its own and publishes its addresses and a
 * fresh job key there, and the other ranks wait for them (crnet.h,
 * docs/STARTING.md). The store serves the start only; crnet's links and
 * handshake never go through it.
 */
#ifndef CRNET_TORCH_STORE_HPP
#define CRNET_TORCH_STORE_HPP

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "crnet.h"

namespace crnet_torch {

/* The world comm (world.hpp), joined with torch's rank and size through
 * `store` if this process has not joined yet; else the joined one, the
 * store unused. Blocks up to the init timeout (torch's `timeout_seconds`
 * unless CRNET_INIT_TIMEOUT is set); call it without the GIL (a store
 * written in Python takes it). Throws std::runtime_error naming crnet's
 * reason and, where the store failed, the store's. */
crnet_comm *world_through_store(const c10::intrusive_ptr<c10d::Store> &store,
                                int rank, int size, double timeout_seconds);

} // namespace crnet_torch

#endif
