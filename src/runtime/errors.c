/* Error codes and the names of public enumerations that no module owns.
 * Everything here returns string literals, so it is safe to call from any
 * thread and at any time. */
#include "crnet.h"

#define ERR_MSG_CASE(name, value, msg)                                         \
  case CRNET_##name:                                                           \
    return msg;
#define ERR_NAME_CASE(name, value, msg)                                        \
  case CRNET_##name:                                                           \
    return "CRNET_" #name;

const char *crnet_strerror(int err) {
  switch (err) {
  case CRNET_OK:
    return "success";
    CRNET_ERRNO_MAP(ERR_MSG_CASE)
  }
  return "unknown error";
}

const char *crnet_err_name(int err) {
  switch (err) {
  case CRNET_OK:
    return "CRNET_OK";
    CRNET_ERRNO_MAP(ERR_NAME_CASE)
  }
  return "CRNET_E?";
}

const char *crnet_collective_name(crnet_collective coll) {
  switch (coll) {
  case CRNET_COLL_ALLREDUCE:
    return "allreduce";
  case CRNET_COLL_REDUCE_SCATTER:
    return "reduce_scatter";
  case CRNET_COLL_SCAN:
    return "scan";
  case CRNET_COLL_ALLTOALL:
    return "alltoall";
  case CRNET_COLL_ALLGATHER:
    return "allgather";
  case CRNET_COLL_BCAST:
    return "bcast";
  case CRNET_COLL_REDUCE:
    return "reduce";
  case CRNET_COLL_BARRIER:
    return "barrier";
  case CRNET_COLL_GATHER:
    return "gather";
  case CRNET_COLL_SCATTER:
    return "scatter";
  case CRNET_COLL_ALLTOALLV:
    return "alltoallv";
  case CRNET_COLL_COUNT:
    break;
  }
  return "unknown collective";
}
