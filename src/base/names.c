/* Error codes, and the names and sizes of public enumerations that both the
 * runtime and the schedules use (datatype sizes: the executor and the
 * point-to-point calls; names: messages on both sides). Everything here
 * returns constants or string literals, so it is safe to call from any
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

size_t crnet_datatype_size(crnet_datatype dt) {
  switch (dt) {
  case CRNET_INT8:
  case CRNET_UINT8:
  case CRNET_BYTE:
    return 1;
  case CRNET_INT16:
  case CRNET_UINT16:
  case CRNET_FLOAT16:
  case CRNET_BFLOAT16:
    return 2;
  case CRNET_INT32:
  case CRNET_UINT32:
  case CRNET_FLOAT:
    return 4;
  case CRNET_INT64:
  case CRNET_UINT64:
  case CRNET_DOUBLE:
    return 8;
  case CRNET_DATATYPE_COUNT:
    break;
  }
  return 0;
}

const char *crnet_datatype_name(crnet_datatype dt) {
  switch (dt) {
  case CRNET_INT8:
    return "int8";
  case CRNET_INT16:
    return "int16";
  case CRNET_INT32:
    return "int32";
  case CRNET_INT64:
    return "int64";
  case CRNET_UINT8:
    return "uint8";
  case CRNET_UINT16:
    return "uint16";
  case CRNET_UINT32:
    return "uint32";
  case CRNET_UINT64:
    return "uint64";
  case CRNET_FLOAT16:
    return "float16";
  case CRNET_BFLOAT16:
    return "bfloat16";
  case CRNET_FLOAT:
    return "float";
  case CRNET_DOUBLE:
    return "double";
  case CRNET_BYTE:
    return "byte";
  case CRNET_DATATYPE_COUNT:
    break;
  }
  return "unknown datatype";
}
