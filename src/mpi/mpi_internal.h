/* crnet-mpi's own state, shared by its files. Everything here sits on
 * libcrnet's public API (crnet.h) and nothing else of crnet.
 *
 * Handles. A communicator is a struct crnet_mpi_comm holding its crnet
 * comm and error handler; MPI_COMM_WORLD and MPI_COMM_SELF name two static
 * ones, the others are allocated and listed (so MPI_Finalize can destroy
 * what the program left). A datatype is an index into a table of
 * (crnet base type, elements of it per MPI element); an operator an index
 * into a table of crnet operators. A request wraps a crnet request with
 * what its completion needs: the receive's status, and the count arrays
 * of a v-collective, which must live until then.
 *
 * Errors. Every MPI function returns mpi_error(...)'s code: MPI_SUCCESS, a
 * bare class, or a code that also names a message kept in a ring of the
 * last MPI_ERROR_MESSAGES ones (errors.c); the comm's handler decides
 * whether the code is returned or the job ends.
 */
#ifndef CRNET_MPI_INTERNAL_H
#define CRNET_MPI_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "crnet.h"
#include "mpi.h"

/* A call's packed copies of buffers of types with holes (layout.c). Each
 * buffer of a dense type is used in place and costs nothing. */
typedef struct crnet_mpi_stage {
  void *send;    /* packed send data, or NULL */
  void *recv;    /* packed receive space, or NULL */
  void *recv_to; /* the program's buffer that recv unpacks into */
  size_t recv_count;
  struct crnet_mpi_layout *recv_layout; /* held while recv is */
} crnet_mpi_stage;

struct crnet_mpi_comm {
  crnet_comm *c; /* NULL before MPI_Init and after MPI_Finalize */
  /* A dup of c made at the first MPI_Gatherv or MPI_Scatterv, whose
   * messages then cannot meet the program's own (vrooted.c); or NULL. */
  crnet_comm *hidden;
  _Atomic MPI_Errhandler errhandler; /* set and read from any thread */
  bool user; /* made by split or dup: freed by MPI_Comm_free */
  /* MPI requests of this comm not yet reported by a wait or test: while
   * there are any, the crnet comm must stay (its destroy would free
   * complete crnet requests the MPI ones still point to). */
  _Atomic int requests;
  struct crnet_mpi_comm *next, *prev; /* the list of user comms */
  struct crnet_mpi_attr *attrs;       /* the program's attributes (attr.c) */
  char name[MPI_MAX_OBJECT_NAME];     /* MPI_Comm_set_name's; under a lock */
  /* Requests of it the program freed while active (MPI_Request_free), and
   * whether MPI_Comm_free was called and waits for them to end: both
   * under the requests' orphan lock (requests.c). */
  int orphans;
  bool free_pending;
  /* Its Cartesian grid (topo.c), or NULL: set when made, then only read;
   * MPI_Comm_dup copies it, the comm's release frees it. */
  struct crnet_mpi_cart *cart;
  /* The ranks the last MPIX_Comm_failure_ack acknowledged (ulfm.c), or
   * NULL; freed with the comm. */
  int *acked;
  int nacked;
};

/* A copy of grid g (NULL for none, or no memory) (topo.c). */
struct crnet_mpi_cart *crnet_mpi_cart_copy(const struct crnet_mpi_cart *g);

enum request_kind { REQ_COLL, REQ_SEND, REQ_RECV, REQ_NULL_PEER, REQ_PARTS };

struct crnet_mpi_request {
  crnet_request *req; /* NULL once complete */
  enum request_kind kind;
  MPI_Comm comm;
  bool done;      /* completed by a test, result in rc and st */
  bool cancelled; /* a receive that ended by MPI_Cancel (rc is then 0) */
  int rc;         /* crnet's result */
  crnet_status st;
  size_t *arrays; /* a v-collective's converted counts, freed at the end */
  void *temp;     /* an in-place alltoallv's copy of its blocks, likewise */
  /* REQ_PARTS: the messages of a gatherv or scatterv (vrooted.c), each
   * NULL once complete; the request is complete when all are. A received
   * part's status (part_st, or NULL) tells a peer's refusal (its tag);
   * refused_by is then that peer, else -1. */
  crnet_request **parts;
  crnet_status *part_st;
  int nparts;
  int refused_by;
  struct crnet_mpi_request *next_orphan; /* MPI_Request_free'd, active */
  size_t bsend_bytes;    /* a buffered send's share of the attached buffer */
  crnet_mpi_stage stage; /* packed buffers of types with holes */
};

/* A gatherv or scatterv message that says its sender refused its own
 * arguments to the call (vrooted.c); received parts check for it. */
#define CRNET_MPI_TAG_REFUSED 3

/* Destroys comm's hidden dup, if it has one (vrooted.c): 0, or
 * CRNET_EINVAL, keeping it, while requests of it are in flight. */
int crnet_mpi_hidden_free(MPI_Comm comm);

/* Fills *status (unless MPI_STATUS_IGNORE) with the source, tag, class of
 * crnet's result rc, and the bytes received (requests.c). */
void crnet_mpi_status(MPI_Status *status, int source, int tag, int rc,
                      size_t bytes);

/* Frees what request r holds and r itself (requests.c). */
void crnet_mpi_request_free(struct crnet_mpi_request *r);

/* Requests freed by MPI_Request_free while active go on in crnet and are
 * reaped later: at every new request (without waiting), by MPI_Comm_free
 * of their comm (likewise), and by MPI_Finalize (waiting for all). A comm
 * freed while such requests of it are left is destroyed when the last one
 * ends (crnet_mpi_comm_release). only: that comm's, or MPI_COMM_NULL for
 * every comm's. */
void crnet_mpi_orphans_reap(MPI_Comm only, bool wait);
/* MPI_Comm_free's end: c's crnet comm destroyed, c unlisted and freed. */
int crnet_mpi_comm_release(MPI_Comm c);
/* MPI_Comm_free's verdict, under the orphans' lock: free c now (no request
 * of it left), or it is marked to be released by the last of its orphans
 * to end, or refused (requests of it that are not orphans are left). */
enum { CRNET_MPI_FREE_NOW, CRNET_MPI_FREE_DEFERRED, CRNET_MPI_FREE_REFUSED };
int crnet_mpi_orphans_defer_free(MPI_Comm c);
/* Whether every request of c left is an orphan (none, or all freed). */
bool crnet_mpi_orphans_only(MPI_Comm c);
/* A buffered send (MPI_Bsend): checked arguments, dest not MPI_PROC_NULL;
 * data: the message's MPI size in bytes, what the attached buffer is
 * charged. */
int crnet_mpi_bsend(MPI_Comm comm, const char *fn, const void *buf,
                    size_t count, crnet_datatype dt, size_t data, int dest,
                    int tag);

/* A new request of `kind` on comm in *out, for the nonblocking call `fn`
 * whose handle goes to *request (refused, raised, if request is NULL). */
int crnet_mpi_request_new(MPI_Comm comm, const char *fn, enum request_kind kind,
                          MPI_Request *request, struct crnet_mpi_request **out);

/* The end of a nonblocking call that got crnet's result rc: the request
 * handed over in *request, or freed with the error raised. */
int crnet_mpi_request_started(MPI_Comm comm, const char *fn, int rc,
                              struct crnet_mpi_request *r,
                              MPI_Request *request);

/* --- state (env.c) --- */
/* The library's object behind a handle: MPI_COMM_WORLD and MPI_COMM_SELF
 * are small integers (mpi.h), every other handle is the object itself. */
MPI_Comm crnet_mpi_comm_of(MPI_Comm handle);
/* A new handle for crnet comm c (NULL: MPI_COMM_NULL), with the error
 * handler of `from`, as MPI_Comm_split, MPI_Comm_dup and MPI_Comm_create
 * give it; c is destroyed if that fails. */
int crnet_mpi_comm_wrap(MPI_Comm from, const char *fn, crnet_comm *c,
                        MPI_Comm *newcomm);
bool crnet_mpi_ready(void); /* between MPI_Init and MPI_Finalize */

/* Attributes (attr.c). delete_all runs the delete callbacks of every value
 * on comm and takes them off (the first callback that fails stops it:
 * its error, raised); copy_all gives `to` what the copy callbacks of
 * `from`'s values say (MPI_Comm_dup); drop_all frees comm's values without
 * callbacks; fini frees the keys (MPI_Finalize). */
int crnet_mpi_attr_delete_all(MPI_Comm comm, const char *fn);
int crnet_mpi_attr_copy_all(MPI_Comm from, MPI_Comm to, const char *fn);
void crnet_mpi_attr_drop_all(MPI_Comm comm);
void crnet_mpi_attr_fini(void);
crnet_comm *crnet_mpi_world(void);
/* Info objects (info.c): whether h is MPI_INFO_NULL or a live info; fini
 * frees them all (MPI_Finalize). */
bool crnet_mpi_info_valid(MPI_Info h);
void crnet_mpi_info_fini(void);
void crnet_mpi_list_add(MPI_Comm comm);
void crnet_mpi_list_remove(MPI_Comm comm);

/* --- errors (errors.c) --- */

/* The code for class `cls` with a message printf-formatted from fmt, after
 * the comm's handler had its say: with MPI_ERRORS_ARE_FATAL (the default)
 * the message goes to stderr, the job is aborted, and this does not
 * return. `fn` names the MPI function. comm may be MPI_COMM_NULL (the
 * world's handler then). */
int crnet_mpi_fail(MPI_Comm comm, const char *fn, int cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* crnet's result `rc` of a call on comm as an MPI code (MPI_SUCCESS for
 * 0), through crnet_mpi_fail with crnet's explanation of it. */
int crnet_mpi_from_crnet(MPI_Comm comm, const char *fn, int rc);

/* The class of crnet's error code. */
int crnet_mpi_class_of(int rc);

/* --- checks shared by the calls --- */

/* 0 if *comm is usable, turned into the library's object behind it
 * (crnet_mpi_comm_of); else the error, raised (MPI_ERR_COMM, or
 * MPI_ERR_OTHER before MPI_Init or after MPI_Finalize). Every call gives
 * it its own copy of the program's handle. */
int crnet_mpi_check_comm(MPI_Comm *comm, const char *fn);

/* k arrays v[0..k) of p ints (counts or displacements), each times n, as
 * one array of k * p size_t in *out (freed by the caller): 0, or the error
 * raised (a NULL array, a negative entry, no memory). names[] name them
 * in the message. (coll.c) */
int crnet_mpi_widen(MPI_Comm comm, const char *fn, int k, const int *const v[],
                    const char *const names[], int p, size_t n, size_t **out);

/* --- datatypes and operators (types.c) --- */

typedef struct crnet_mpi_type {
  crnet_datatype base; /* what crnet moves */
  size_t n;            /* base elements per element of this type */
  bool predefined;
  bool committed;
  bool live;
  bool pair; /* MPI_FLOAT_INT ... MPI_SHORT_INT: moved as its bytes */
  /* A derived type's MPI size in bytes and the padding after its last
   * byte of data, which differ from its extent for types made of pairs
   * (MPI_DOUBLE_INT: 12 bytes of data in 16); 0 and 0 for the predefined
   * types, whose sizes types.c knows. */
  size_t size, trail;
  /* A derived type whose data are not one dense run from offset 0 to its
   * extent (vector, indexed, struct, resized, subarray: layout.c). Calls
   * move it packed (count * n base elements) through a stage; calls that
   * have none refuse it. */
  bool holes;
  /* Made of more than one base type (a struct of ints and doubles): moved
   * as bytes (base CRNET_BYTE) and never reduced. */
  bool mixed;
  /* Its bounds were set by MPI_Type_create_resized (or it holds such a
   * type): in a constructor they win over where its data lie, and a
   * struct holding it is not padded (MPI 3.1, 4.1.7). */
  bool sticky;
  /* The alignment of its most aligned member (a struct's padding); 0 for
   * the predefined types, whose base type's size it is. */
  size_t align;
  /* The predefined operators MPI defines on it, a bit each
   * (CRNET_MPI_OP_BIT): those of its group of predefined types (MPI 3.1,
   * 5.9.2: C integer, floating point, logical, byte, multi-language, the
   * pairs; none for MPI_CHAR, MPI_WCHAR, MPI_PACKED), and for a derived
   * type those all of its predefined types allow. Base types alone do not
   * say it: MPI_BYTE, MPI_C_BOOL and MPI_UINT8_T are all CRNET_UINT8. */
  unsigned ops;
} crnet_mpi_type;

#define CRNET_MPI_OP_BIT(op) (1u << (op))

/* Where one element of a type with holes keeps its data: blocks of bytes
 * at offsets from the element's address, in type-map order (adjacent ones
 * merged), and its bounds. Shared by the type and the calls that move it,
 * which hold a reference until they end (MPI_Type_free may come first). */
typedef struct crnet_mpi_block {
  ptrdiff_t off;
  size_t len;
} crnet_mpi_block;

typedef struct crnet_mpi_layout {
  _Atomic int refs;
  ptrdiff_t lb, true_lb;
  size_t extent, true_extent;
  size_t size;  /* data bytes: the sum of the blocks' lengths */
  size_t align; /* of its most aligned member, for a struct's padding */
  size_t nblocks;
  crnet_mpi_block blocks[];
} crnet_mpi_layout;

/* The type behind dt with its layout, held (NULL for a dense type; not
 * held if layout is NULL); any live type if !committed_only. false if
 * there is none. crnet_mpi_type_get is this for committed types. */
bool crnet_mpi_type_hold(MPI_Datatype dt, bool committed_only,
                         crnet_mpi_type *t, crnet_mpi_layout **layout);
void crnet_mpi_layout_release(crnet_mpi_layout *l);
/* A new derived type t in the table, taking over layout (may be NULL):
 * MPI_SUCCESS with its handle, or MPI_ERR_NO_MEM (layout released). */
int crnet_mpi_type_add(const crnet_mpi_type *t, crnet_mpi_layout *layout,
                       MPI_Datatype *out);

/* The buffer to hand crnet for count elements of dt at buf: buf itself,
 * or a packed copy kept in s. 0, or the error raised. */
int crnet_mpi_stage_send(MPI_Comm comm, const char *fn, crnet_mpi_stage *s,
                         MPI_Datatype dt, const void *buf, size_t count,
                         const void **use);
/* Likewise for a receive buffer, unpacked into buf at the end; fill: the
 * packed space starts with buf's contents (in place, a bcast's root). */
int crnet_mpi_stage_recv(MPI_Comm comm, const char *fn, crnet_mpi_stage *s,
                         MPI_Datatype dt, void *buf, size_t count, bool fill,
                         void **use);
/* The call ended: if ok, the first `bytes` packed bytes received (SIZE_MAX:
 * all) are unpacked into the program's buffer; then everything is freed. */
void crnet_mpi_stage_end(crnet_mpi_stage *s, bool ok, size_t bytes);

/* The type behind handle dt, or NULL for MPI_DATATYPE_NULL, a freed or
 * unknown handle, or an uncommitted derived type. */
bool crnet_mpi_type_get(MPI_Datatype dt, crnet_mpi_type *out);

/* crnet's operator for MPI op `op` applied to elements of type t: 0 and
 * *out, or an MPI error class with *why set. */
int crnet_mpi_op_get(MPI_Op op, const crnet_mpi_type *t, crnet_op *out,
                     const char **why);

/* MPI_MINLOC and MPI_MAXLOC (loc.c), for MPI_Allreduce, MPI_Reduce
 * (root >= 0) and MPI_Reduce_scatter (counts: the pairs each rank gets;
 * NULL for the other two, which reduce `count` pairs). */
#define CRNET_MPI_IS_LOC(op) ((op) == MPI_MINLOC || (op) == MPI_MAXLOC)
int crnet_mpi_loc(MPI_Comm comm, const char *fn, const void *sendbuf,
                  void *recvbuf, int count, const int *counts, MPI_Datatype dt,
                  MPI_Op op, int root);

/* The ops and the LXOR operator crnet lacks: created at MPI_Init, the
 * same on every rank (crnet matches operators by handle). */
int crnet_mpi_ops_init(void);
void crnet_mpi_ops_fini(void);

#endif
