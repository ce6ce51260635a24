/* crnet-mpi: the part of MPI that most programs use, on crnet.
 *
 * Installed as <prefix>/include/crnet-mpi/mpi.h, a directory of its own, so
 * that it never shadows a real MPI's mpi.h: a program finds it through
 * `crnet-mpicc` or `pkg-config --cflags crnet-mpi`, links libcrnet-mpi (which
 * uses libcrnet's public API only) and runs under crlaunch unchanged.
 *
 * What is here behaves as MPI 3.1 says; what is not here does not exist, so
 * a program that uses it fails to compile rather than misbehave. Calls with
 * arguments the subset does not support (a user operator on a derived
 * datatype, different send and receive type signatures) return an error of
 * the class named in docs/MPI.md with a message MPI_Error_string gives, as
 * do crnet's own failures (a lost rank, mismatched calls, a timeout).
 *
 * docs/MPI.md lists the subset, the differences from an MPI library, and
 * the OSU micro-benchmarks built against it.
 */
#ifndef CRNET_MPI_H
#define CRNET_MPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CRNET_MPI_EXTERN __attribute__((visibility("default")))
#else
#define CRNET_MPI_EXTERN
#endif

#define MPI_VERSION 3
#define MPI_SUBVERSION 1
#define CRNET_MPI 1 /* this is crnet-mpi, not a full MPI */

/* --- handles ------------------------------------------------------------- */

/* Communicators are pointers to the library's objects. MPI_COMM_WORLD and
 * MPI_COMM_SELF are small integers cast to that type: constant
 * expressions a program may use in static initializers, and no data
 * symbol a program's executable would copy (and so fix the size of). */
typedef struct crnet_mpi_comm *MPI_Comm;
#define MPI_COMM_NULL ((MPI_Comm)0)
#define MPI_COMM_WORLD ((MPI_Comm)1)
#define MPI_COMM_SELF ((MPI_Comm)2)

typedef struct crnet_mpi_request *MPI_Request;
#define MPI_REQUEST_NULL ((MPI_Request)0)

typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Errhandler;
typedef int MPI_Info;
typedef ptrdiff_t MPI_Aint;
typedef int64_t MPI_Offset;
typedef int64_t MPI_Count;

#define MPI_INFO_NULL ((MPI_Info)0)

typedef struct MPI_Status {
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
  /* private: the bytes received, for MPI_Get_count; whether the request
   * was cancelled, for MPI_Test_cancelled */
  size_t crnet_bytes_;
  int crnet_cancelled_;
} MPI_Status;
#define MPI_STATUS_IGNORE ((MPI_Status *)0)
#define MPI_STATUSES_IGNORE ((MPI_Status *)0)

/* --- datatypes ------------------------------------------------------------ */

#define MPI_DATATYPE_NULL ((MPI_Datatype)0)
#define MPI_CHAR ((MPI_Datatype)1)
#define MPI_SIGNED_CHAR ((MPI_Datatype)2)
#define MPI_UNSIGNED_CHAR ((MPI_Datatype)3)
#define MPI_BYTE ((MPI_Datatype)4)
#define MPI_SHORT ((MPI_Datatype)5)
#define MPI_UNSIGNED_SHORT ((MPI_Datatype)6)
#define MPI_INT ((MPI_Datatype)7)
#define MPI_UNSIGNED ((MPI_Datatype)8)
#define MPI_LONG ((MPI_Datatype)9)
#define MPI_UNSIGNED_LONG ((MPI_Datatype)10)
#define MPI_LONG_LONG_INT ((MPI_Datatype)11)
#define MPI_LONG_LONG MPI_LONG_LONG_INT /* a synonym, as MPI says */
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)12)
#define MPI_FLOAT ((MPI_Datatype)13)
#define MPI_DOUBLE ((MPI_Datatype)14)
#define MPI_WCHAR ((MPI_Datatype)15)
#define MPI_C_BOOL ((MPI_Datatype)16)
#define MPI_INT8_T ((MPI_Datatype)17)
#define MPI_INT16_T ((MPI_Datatype)18)
#define MPI_INT32_T ((MPI_Datatype)19)
#define MPI_INT64_T ((MPI_Datatype)20)
#define MPI_UINT8_T ((MPI_Datatype)21)
#define MPI_UINT16_T ((MPI_Datatype)22)
#define MPI_UINT32_T ((MPI_Datatype)23)
#define MPI_UINT64_T ((MPI_Datatype)24)
#define MPI_AINT ((MPI_Datatype)25)
#define MPI_OFFSET ((MPI_Datatype)26)
#define MPI_COUNT ((MPI_Datatype)27)
/* The pairs of a value and an int index that MPI_MINLOC and MPI_MAXLOC
 * reduce (laid out as struct { float v; int i; } and so on). */
#define MPI_FLOAT_INT ((MPI_Datatype)28)
#define MPI_DOUBLE_INT ((MPI_Datatype)29)
#define MPI_LONG_INT ((MPI_Datatype)30)
#define MPI_2INT ((MPI_Datatype)31)
#define MPI_SHORT_INT ((MPI_Datatype)32)
/* What MPI_Pack writes: bytes, received as they were packed. */
#define MPI_PACKED ((MPI_Datatype)33)

/* MPI_Type_create_subarray's orders. */
#define MPI_ORDER_C 56
#define MPI_ORDER_FORTRAN 57

/* --- operators ------------------------------------------------------------ */

#define MPI_OP_NULL ((MPI_Op)0)
#define MPI_MAX ((MPI_Op)1)
#define MPI_MIN ((MPI_Op)2)
#define MPI_SUM ((MPI_Op)3)
#define MPI_PROD ((MPI_Op)4)
#define MPI_LAND ((MPI_Op)5)
#define MPI_BAND ((MPI_Op)6)
#define MPI_LOR ((MPI_Op)7)
#define MPI_BOR ((MPI_Op)8)
#define MPI_LXOR ((MPI_Op)9)
#define MPI_BXOR ((MPI_Op)10)
#define MPI_MINLOC ((MPI_Op)11)
#define MPI_MAXLOC ((MPI_Op)12)

typedef void MPI_User_function(void *invec, void *inoutvec, int *len,
                               MPI_Datatype *datatype);

/* --- other constants ------------------------------------------------------ */

#define MPI_IN_PLACE ((void *)1)
#define MPI_ANY_SOURCE (-1)
#define MPI_ANY_TAG (-1)
#define MPI_PROC_NULL (-2)
#define MPI_UNDEFINED (-32766)

#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

#define MPI_MAX_PROCESSOR_NAME 256
#define MPI_MAX_OBJECT_NAME 64
#define MPI_MAX_INFO_KEY 255
#define MPI_MAX_INFO_VAL 1024
#define MPI_MAX_ERROR_STRING 512
#define MPI_MAX_LIBRARY_VERSION_STRING 256

#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)1)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)2)

/* Error classes. An error code is its class, or (with a message) a value
 * above MPI_ERR_LASTCODE's class range that MPI_Error_class maps back. */
#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1
#define MPI_ERR_COUNT 2
#define MPI_ERR_TYPE 3
#define MPI_ERR_TAG 4
#define MPI_ERR_COMM 5
#define MPI_ERR_RANK 6
#define MPI_ERR_REQUEST 7
#define MPI_ERR_ROOT 8
#define MPI_ERR_OP 9
#define MPI_ERR_ARG 10
#define MPI_ERR_UNKNOWN 11
#define MPI_ERR_TRUNCATE 12
#define MPI_ERR_OTHER 13
#define MPI_ERR_INTERN 14
#define MPI_ERR_IN_STATUS 15
#define MPI_ERR_PENDING 16
#define MPI_ERR_NO_MEM 17
#define MPI_ERR_UNSUPPORTED_OPERATION 18
#define MPI_ERR_INFO 19
#define MPI_ERR_GROUP 20
#define MPI_ERR_KEYVAL 21
#define MPI_ERR_INFO_KEY 22
#define MPI_ERR_INFO_VALUE 23
#define MPI_ERR_INFO_NOKEY 24
#define MPI_ERR_TOPOLOGY 25
#define MPI_ERR_DIMS 26
#define MPI_ERR_LASTCODE 0x3fffffff

/* --- the environment ------------------------------------------------------ */

CRNET_MPI_EXTERN int MPI_Init(int *argc, char ***argv);
CRNET_MPI_EXTERN int MPI_Init_thread(int *argc, char ***argv, int required,
                                     int *provided);
CRNET_MPI_EXTERN int MPI_Query_thread(int *provided);
CRNET_MPI_EXTERN int MPI_Finalize(void);
CRNET_MPI_EXTERN int MPI_Initialized(int *flag);
CRNET_MPI_EXTERN int MPI_Finalized(int *flag);
CRNET_MPI_EXTERN int MPI_Abort(MPI_Comm comm, int errorcode);
CRNET_MPI_EXTERN double MPI_Wtime(void);
CRNET_MPI_EXTERN double MPI_Wtick(void);
CRNET_MPI_EXTERN int MPI_Get_processor_name(char *name, int *resultlen);
CRNET_MPI_EXTERN int MPI_Get_version(int *version, int *subversion);
CRNET_MPI_EXTERN int MPI_Get_library_version(char *version, int *resultlen);
CRNET_MPI_EXTERN int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr);
CRNET_MPI_EXTERN int MPI_Get_address(const void *location, MPI_Aint *address);
CRNET_MPI_EXTERN MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp);
CRNET_MPI_EXTERN MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2);
CRNET_MPI_EXTERN int MPI_Free_mem(void *base);

/* --- errors ------------------------------------------------------------- */

CRNET_MPI_EXTERN int MPI_Error_string(int errorcode, char *string,
                                      int *resultlen);
CRNET_MPI_EXTERN int MPI_Error_class(int errorcode, int *errorclass);
CRNET_MPI_EXTERN int MPI_Comm_set_errhandler(MPI_Comm comm,
                                             MPI_Errhandler errhandler);
CRNET_MPI_EXTERN int MPI_Comm_get_errhandler(MPI_Comm comm,
                                             MPI_Errhandler *errhandler);

/* --- communicators -------------------------------------------------------- */

CRNET_MPI_EXTERN int MPI_Comm_rank(MPI_Comm comm, int *rank);
CRNET_MPI_EXTERN int MPI_Comm_size(MPI_Comm comm, int *size);
CRNET_MPI_EXTERN int MPI_Comm_split(MPI_Comm comm, int color, int key,
                                    MPI_Comm *newcomm);
CRNET_MPI_EXTERN int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
/* Info objects hold the program's hints; crnet-mpi accepts them where MPI
 * takes them and uses none (MPI allows that). */
CRNET_MPI_EXTERN int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info,
                                            MPI_Comm *newcomm);
CRNET_MPI_EXTERN int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info);
CRNET_MPI_EXTERN int MPI_Comm_get_info(MPI_Comm comm, MPI_Info *info_used);
CRNET_MPI_EXTERN int MPI_Info_create(MPI_Info *info);
CRNET_MPI_EXTERN int MPI_Info_set(MPI_Info info, const char *key,
                                  const char *value);
CRNET_MPI_EXTERN int MPI_Info_get(MPI_Info info, const char *key,
                                  int valuelen, char *value, int *flag);
CRNET_MPI_EXTERN int MPI_Info_get_valuelen(MPI_Info info, const char *key,
                                           int *valuelen, int *flag);
CRNET_MPI_EXTERN int MPI_Info_delete(MPI_Info info, const char *key);
CRNET_MPI_EXTERN int MPI_Info_get_nkeys(MPI_Info info, int *nkeys);
CRNET_MPI_EXTERN int MPI_Info_get_nthkey(MPI_Info info, int n, char *key);
CRNET_MPI_EXTERN int MPI_Info_dup(MPI_Info info, MPI_Info *newinfo);
CRNET_MPI_EXTERN int MPI_Info_free(MPI_Info *info);
CRNET_MPI_EXTERN int MPI_Comm_free(MPI_Comm *comm);
CRNET_MPI_EXTERN int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2,
                                      int *result);
CRNET_MPI_EXTERN int MPI_Comm_set_name(MPI_Comm comm, const char *comm_name);
CRNET_MPI_EXTERN int MPI_Comm_get_name(MPI_Comm comm, char *comm_name,
                                       int *resultlen);
/* The ranks of each host (MPI_COMM_TYPE_SHARED; crnet_comm_host). */
#define MPI_COMM_TYPE_SHARED 1
CRNET_MPI_EXTERN int MPI_Comm_split_type(MPI_Comm comm, int split_type,
                                         int key, MPI_Info info,
                                         MPI_Comm *newcomm);

/* Results of MPI_Comm_compare and MPI_Group_compare. */
#define MPI_IDENT 0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR 2
#define MPI_UNEQUAL 3

/* --- groups --------------------------------------------------------------- */

typedef struct crnet_mpi_group *MPI_Group;
#define MPI_GROUP_NULL ((MPI_Group)0)
#define MPI_GROUP_EMPTY ((MPI_Group)1)

CRNET_MPI_EXTERN int MPI_Comm_group(MPI_Comm comm, MPI_Group *group);
CRNET_MPI_EXTERN int MPI_Comm_create(MPI_Comm comm, MPI_Group group,
                                     MPI_Comm *newcomm);
CRNET_MPI_EXTERN int MPI_Group_size(MPI_Group group, int *size);
CRNET_MPI_EXTERN int MPI_Group_rank(MPI_Group group, int *rank);
CRNET_MPI_EXTERN int MPI_Group_free(MPI_Group *group);
CRNET_MPI_EXTERN int MPI_Group_translate_ranks(MPI_Group group1, int n,
                                               const int ranks1[],
                                               MPI_Group group2,
                                               int ranks2[]);
CRNET_MPI_EXTERN int MPI_Group_compare(MPI_Group group1, MPI_Group group2,
                                       int *result);
CRNET_MPI_EXTERN int MPI_Group_incl(MPI_Group group, int n, const int ranks[],
                                    MPI_Group *newgroup);
CRNET_MPI_EXTERN int MPI_Group_excl(MPI_Group group, int n, const int ranks[],
                                    MPI_Group *newgroup);
CRNET_MPI_EXTERN int MPI_Group_range_incl(MPI_Group group, int n,
                                          int ranges[][3],
                                          MPI_Group *newgroup);
CRNET_MPI_EXTERN int MPI_Group_range_excl(MPI_Group group, int n,
                                          int ranges[][3],
                                          MPI_Group *newgroup);
CRNET_MPI_EXTERN int MPI_Group_union(MPI_Group group1, MPI_Group group2,
                                     MPI_Group *newgroup);
CRNET_MPI_EXTERN int MPI_Group_intersection(MPI_Group group1,
                                            MPI_Group group2,
                                            MPI_Group *newgroup);
CRNET_MPI_EXTERN int MPI_Group_difference(MPI_Group group1, MPI_Group group2,
                                          MPI_Group *newgroup);

/* --- attributes ----------------------------------------------------------- */

/* Predefined keys: MPI_Comm_get_attr gives the address of an int. */
#define MPI_TAG_UB 1
#define MPI_HOST 2
#define MPI_IO 3
#define MPI_WTIME_IS_GLOBAL 4
#define MPI_UNIVERSE_SIZE 5
#define MPI_APPNUM 6
#define MPI_LASTUSEDCODE 7
#define MPI_KEYVAL_INVALID (-1)

typedef int MPI_Comm_copy_attr_function(MPI_Comm oldcomm, int comm_keyval,
                                        void *extra_state,
                                        void *attribute_val_in,
                                        void *attribute_val_out, int *flag);
typedef int MPI_Comm_delete_attr_function(MPI_Comm comm, int comm_keyval,
                                          void *attribute_val,
                                          void *extra_state);
/* Copy nothing, delete nothing; and copy the value as it is. */
#define MPI_COMM_NULL_COPY_FN ((MPI_Comm_copy_attr_function *)0)
#define MPI_COMM_NULL_DELETE_FN ((MPI_Comm_delete_attr_function *)0)
#define MPI_COMM_DUP_FN crnet_mpi_comm_dup_fn
CRNET_MPI_EXTERN int crnet_mpi_comm_dup_fn(MPI_Comm oldcomm, int comm_keyval,
                                           void *extra_state,
                                           void *attribute_val_in,
                                           void *attribute_val_out,
                                           int *flag);

CRNET_MPI_EXTERN int MPI_Comm_create_keyval(
    MPI_Comm_copy_attr_function *comm_copy_attr_fn,
    MPI_Comm_delete_attr_function *comm_delete_attr_fn, int *comm_keyval,
    void *extra_state);
CRNET_MPI_EXTERN int MPI_Comm_free_keyval(int *comm_keyval);
CRNET_MPI_EXTERN int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval,
                                       void *attribute_val);
CRNET_MPI_EXTERN int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval,
                                       void *attribute_val, int *flag);
CRNET_MPI_EXTERN int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval);

/* MPI 1's names of the same (deprecated since MPI 2, still in older
 * programs): the same keys, values and callbacks. */
typedef MPI_Comm_copy_attr_function MPI_Copy_function;
typedef MPI_Comm_delete_attr_function MPI_Delete_function;
#define MPI_NULL_COPY_FN MPI_COMM_NULL_COPY_FN
#define MPI_NULL_DELETE_FN MPI_COMM_NULL_DELETE_FN
#define MPI_DUP_FN MPI_COMM_DUP_FN
CRNET_MPI_EXTERN int MPI_Keyval_create(MPI_Copy_function *copy_fn,
                                       MPI_Delete_function *delete_fn,
                                       int *keyval, void *extra_state);
CRNET_MPI_EXTERN int MPI_Keyval_free(int *keyval);
CRNET_MPI_EXTERN int MPI_Attr_put(MPI_Comm comm, int keyval,
                                  void *attribute_val);
CRNET_MPI_EXTERN int MPI_Attr_get(MPI_Comm comm, int keyval,
                                  void *attribute_val, int *flag);
CRNET_MPI_EXTERN int MPI_Attr_delete(MPI_Comm comm, int keyval);

/* --- Cartesian topologies ------------------------------------------------ */

/* MPI_Topo_test's answers (graphs are not supported: never returned). */
#define MPI_CART 1
#define MPI_GRAPH 2
#define MPI_DIST_GRAPH 3

/* Grid ranks are the old communicator's, in row-major order: reorder is
 * accepted and not done. */
CRNET_MPI_EXTERN int MPI_Dims_create(int nnodes, int ndims, int dims[]);
CRNET_MPI_EXTERN int MPI_Cart_create(MPI_Comm comm_old, int ndims,
                                     const int dims[], const int periods[],
                                     int reorder, MPI_Comm *comm_cart);
CRNET_MPI_EXTERN int MPI_Topo_test(MPI_Comm comm, int *status);
CRNET_MPI_EXTERN int MPI_Cartdim_get(MPI_Comm comm, int *ndims);
CRNET_MPI_EXTERN int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[],
                                  int periods[], int coords[]);
CRNET_MPI_EXTERN int MPI_Cart_rank(MPI_Comm comm, const int coords[],
                                   int *rank);
CRNET_MPI_EXTERN int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims,
                                     int coords[]);
CRNET_MPI_EXTERN int MPI_Cart_shift(MPI_Comm comm, int direction, int disp,
                                    int *rank_source, int *rank_dest);
CRNET_MPI_EXTERN int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[],
                                  MPI_Comm *newcomm);

/* --- datatypes and operators ---------------------------------------------- */

CRNET_MPI_EXTERN int MPI_Type_size(MPI_Datatype datatype, int *size);
CRNET_MPI_EXTERN int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb,
                                         MPI_Aint *extent);
CRNET_MPI_EXTERN int MPI_Type_get_true_extent(MPI_Datatype datatype,
                                              MPI_Aint *true_lb,
                                              MPI_Aint *true_extent);
CRNET_MPI_EXTERN int MPI_Type_contiguous(int count, MPI_Datatype oldtype,
                                         MPI_Datatype *newtype);
/* Derived types with holes: moved packed, in point-to-point and in every
 * collective but the v- and w-variants and reduce-scatter, which refuse
 * them (docs/MPI.md). */
CRNET_MPI_EXTERN int MPI_Type_vector(int count, int blocklength, int stride,
                                     MPI_Datatype oldtype,
                                     MPI_Datatype *newtype);
CRNET_MPI_EXTERN int MPI_Type_create_hvector(int count, int blocklength,
                                             MPI_Aint stride,
                                             MPI_Datatype oldtype,
                                             MPI_Datatype *newtype);
CRNET_MPI_EXTERN int MPI_Type_indexed(int count,
                                      const int array_of_blocklengths[],
                                      const int array_of_displacements[],
                                      MPI_Datatype oldtype,
                                      MPI_Datatype *newtype);
CRNET_MPI_EXTERN int
MPI_Type_create_hindexed(int count, const int array_of_blocklengths[],
                         const MPI_Aint array_of_displacements[],
                         MPI_Datatype oldtype, MPI_Datatype *newtype);
CRNET_MPI_EXTERN int
MPI_Type_create_indexed_block(int count, int blocklength,
                              const int array_of_displacements[],
                              MPI_Datatype oldtype, MPI_Datatype *newtype);
CRNET_MPI_EXTERN int
MPI_Type_create_hindexed_block(int count, int blocklength,
                               const MPI_Aint array_of_displacements[],
                               MPI_Datatype oldtype, MPI_Datatype *newtype);
CRNET_MPI_EXTERN int MPI_Type_create_struct(
    int count, const int array_of_blocklengths[],
    const MPI_Aint array_of_displacements[],
    const MPI_Datatype array_of_types[], MPI_Datatype *newtype);
CRNET_MPI_EXTERN int MPI_Type_create_resized(MPI_Datatype oldtype,
                                             MPI_Aint lb, MPI_Aint extent,
                                             MPI_Datatype *newtype);
CRNET_MPI_EXTERN int MPI_Type_create_subarray(
    int ndims, const int array_of_sizes[], const int array_of_subsizes[],
    const int array_of_starts[], int order, MPI_Datatype oldtype,
    MPI_Datatype *newtype);
CRNET_MPI_EXTERN int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype);
CRNET_MPI_EXTERN int MPI_Type_commit(MPI_Datatype *datatype);
CRNET_MPI_EXTERN int MPI_Type_free(MPI_Datatype *datatype);
CRNET_MPI_EXTERN int MPI_Get_count(const MPI_Status *status,
                                   MPI_Datatype datatype, int *count);
CRNET_MPI_EXTERN int MPI_Pack(const void *inbuf, int incount,
                              MPI_Datatype datatype, void *outbuf, int outsize,
                              int *position, MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Unpack(const void *inbuf, int insize, int *position,
                                void *outbuf, int outcount,
                                MPI_Datatype datatype, MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Pack_size(int incount, MPI_Datatype datatype,
                                   MPI_Comm comm, int *size);
CRNET_MPI_EXTERN int MPI_Op_create(MPI_User_function *function, int commute,
                                   MPI_Op *op);
CRNET_MPI_EXTERN int MPI_Op_free(MPI_Op *op);
CRNET_MPI_EXTERN int MPI_Op_commutative(MPI_Op op, int *commute);

/* --- collectives -------------------------------------------------------- */

CRNET_MPI_EXTERN int MPI_Barrier(MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype,
                               int root, MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
                                MPI_Datatype datatype, MPI_Op op, int root,
                                MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Allreduce(const void *sendbuf, void *recvbuf,
                                   int count, MPI_Datatype datatype, MPI_Op op,
                                   MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf,
                                        const int recvcounts[],
                                        MPI_Datatype datatype, MPI_Op op,
                                        MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Reduce_scatter_block(const void *sendbuf,
                                              void *recvbuf, int recvcount,
                                              MPI_Datatype datatype, MPI_Op op,
                                              MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Scan(const void *sendbuf, void *recvbuf, int count,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Exscan(const void *sendbuf, void *recvbuf, int count,
                                MPI_Datatype datatype, MPI_Op op,
                                MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Alltoall(const void *sendbuf, int sendcount,
                                  MPI_Datatype sendtype, void *recvbuf,
                                  int recvcount, MPI_Datatype recvtype,
                                  MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Alltoallv(const void *sendbuf, const int sendcounts[],
                                   const int sdispls[], MPI_Datatype sendtype,
                                   void *recvbuf, const int recvcounts[],
                                   const int rdispls[], MPI_Datatype recvtype,
                                   MPI_Comm comm);
/* Each block its own type; displacements in bytes (docs/MPI.md). */
CRNET_MPI_EXTERN int MPI_Alltoallw(const void *sendbuf, const int sendcounts[],
                                   const int sdispls[],
                                   const MPI_Datatype sendtypes[],
                                   void *recvbuf, const int recvcounts[],
                                   const int rdispls[],
                                   const MPI_Datatype recvtypes[],
                                   MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Allgather(const void *sendbuf, int sendcount,
                                   MPI_Datatype sendtype, void *recvbuf,
                                   int recvcount, MPI_Datatype recvtype,
                                   MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Allgatherv(const void *sendbuf, int sendcount,
                                    MPI_Datatype sendtype, void *recvbuf,
                                    const int recvcounts[], const int displs[],
                                    MPI_Datatype recvtype, MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Gather(const void *sendbuf, int sendcount,
                                MPI_Datatype sendtype, void *recvbuf,
                                int recvcount, MPI_Datatype recvtype, int root,
                                MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Scatter(const void *sendbuf, int sendcount,
                                 MPI_Datatype sendtype, void *recvbuf,
                                 int recvcount, MPI_Datatype recvtype, int root,
                                 MPI_Comm comm);

CRNET_MPI_EXTERN int MPI_Gatherv(const void *sendbuf, int sendcount,
                                 MPI_Datatype sendtype, void *recvbuf,
                                 const int recvcounts[], const int displs[],
                                 MPI_Datatype recvtype, int root,
                                 MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Scatterv(const void *sendbuf, const int sendcounts[],
                                  const int displs[], MPI_Datatype sendtype,
                                  void *recvbuf, int recvcount,
                                  MPI_Datatype recvtype, int root,
                                  MPI_Comm comm);

CRNET_MPI_EXTERN int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype,
                                int root, MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count,
                                 MPI_Datatype datatype, MPI_Op op, int root,
                                 MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Iallreduce(const void *sendbuf, void *recvbuf,
                                    int count, MPI_Datatype datatype, MPI_Op op,
                                    MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf,
                                         const int recvcounts[],
                                         MPI_Datatype datatype, MPI_Op op,
                                         MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Ireduce_scatter_block(const void *sendbuf,
                                               void *recvbuf, int recvcount,
                                               MPI_Datatype datatype, MPI_Op op,
                                               MPI_Comm comm,
                                               MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Iscan(const void *sendbuf, void *recvbuf, int count,
                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                               MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count,
                                 MPI_Datatype datatype, MPI_Op op,
                                 MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Ialltoall(const void *sendbuf, int sendcount,
                                   MPI_Datatype sendtype, void *recvbuf,
                                   int recvcount, MPI_Datatype recvtype,
                                   MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[],
                                    const int sdispls[], MPI_Datatype sendtype,
                                    void *recvbuf, const int recvcounts[],
                                    const int rdispls[], MPI_Datatype recvtype,
                                    MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[],
                                    const int sdispls[],
                                    const MPI_Datatype sendtypes[],
                                    void *recvbuf, const int recvcounts[],
                                    const int rdispls[],
                                    const MPI_Datatype recvtypes[],
                                    MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Iallgather(const void *sendbuf, int sendcount,
                                    MPI_Datatype sendtype, void *recvbuf,
                                    int recvcount, MPI_Datatype recvtype,
                                    MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Iallgatherv(const void *sendbuf, int sendcount,
                                     MPI_Datatype sendtype, void *recvbuf,
                                     const int recvcounts[], const int displs[],
                                     MPI_Datatype recvtype, MPI_Comm comm,
                                     MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Igather(const void *sendbuf, int sendcount,
                                 MPI_Datatype sendtype, void *recvbuf,
                                 int recvcount, MPI_Datatype recvtype, int root,
                                 MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Iscatter(const void *sendbuf, int sendcount,
                                  MPI_Datatype sendtype, void *recvbuf,
                                  int recvcount, MPI_Datatype recvtype,
                                  int root, MPI_Comm comm,
                                  MPI_Request *request);

CRNET_MPI_EXTERN int MPI_Igatherv(const void *sendbuf, int sendcount,
                                  MPI_Datatype sendtype, void *recvbuf,
                                  const int recvcounts[], const int displs[],
                                  MPI_Datatype recvtype, int root,
                                  MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Iscatterv(const void *sendbuf, const int sendcounts[],
                                   const int displs[], MPI_Datatype sendtype,
                                   void *recvbuf, int recvcount,
                                   MPI_Datatype recvtype, int root,
                                   MPI_Comm comm, MPI_Request *request);

/* --- messages and requests --------------------------------------------------
 */

CRNET_MPI_EXTERN int MPI_Send(const void *buf, int count, MPI_Datatype datatype,
                              int dest, int tag, MPI_Comm comm);
/* Completes once the receive is posted (synchronous mode). */
CRNET_MPI_EXTERN int MPI_Ssend(const void *buf, int count,
                               MPI_Datatype datatype, int dest, int tag,
                               MPI_Comm comm);
/* Buffered mode: the message is copied, and the call returns; what is in
 * flight this way is bounded by the buffer attached. */
#define MPI_BSEND_OVERHEAD 64
CRNET_MPI_EXTERN int MPI_Buffer_attach(void *buffer, int size);
CRNET_MPI_EXTERN int MPI_Buffer_detach(void *buffer_addr, int *size);
CRNET_MPI_EXTERN int MPI_Bsend(const void *buf, int count,
                               MPI_Datatype datatype, int dest, int tag,
                               MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Ibsend(const void *buf, int count,
                                MPI_Datatype datatype, int dest, int tag,
                                MPI_Comm comm, MPI_Request *request);
/* Ready mode: as MPI_Send (MPI allows it). */
CRNET_MPI_EXTERN int MPI_Rsend(const void *buf, int count,
                               MPI_Datatype datatype, int dest, int tag,
                               MPI_Comm comm);
CRNET_MPI_EXTERN int MPI_Recv(void *buf, int count, MPI_Datatype datatype,
                              int source, int tag, MPI_Comm comm,
                              MPI_Status *status);
CRNET_MPI_EXTERN int MPI_Sendrecv(const void *sendbuf, int sendcount,
                                  MPI_Datatype sendtype, int dest, int sendtag,
                                  void *recvbuf, int recvcount,
                                  MPI_Datatype recvtype, int source,
                                  int recvtag, MPI_Comm comm,
                                  MPI_Status *status);
CRNET_MPI_EXTERN int MPI_Sendrecv_replace(void *buf, int count,
                                          MPI_Datatype datatype, int dest,
                                          int sendtag, int source, int recvtag,
                                          MPI_Comm comm, MPI_Status *status);
CRNET_MPI_EXTERN int MPI_Isend(const void *buf, int count,
                               MPI_Datatype datatype, int dest, int tag,
                               MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Issend(const void *buf, int count,
                                MPI_Datatype datatype, int dest, int tag,
                                MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Irsend(const void *buf, int count,
                                MPI_Datatype datatype, int dest, int tag,
                                MPI_Comm comm, MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Irecv(void *buf, int count, MPI_Datatype datatype,
                               int source, int tag, MPI_Comm comm,
                               MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Probe(int source, int tag, MPI_Comm comm,
                               MPI_Status *status);
CRNET_MPI_EXTERN int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag,
                                MPI_Status *status);
CRNET_MPI_EXTERN int MPI_Wait(MPI_Request *request, MPI_Status *status);
CRNET_MPI_EXTERN int MPI_Waitall(int count, MPI_Request requests[],
                                 MPI_Status statuses[]);
CRNET_MPI_EXTERN int MPI_Waitany(int count, MPI_Request requests[], int *index,
                                 MPI_Status *status);
CRNET_MPI_EXTERN int MPI_Testany(int count, MPI_Request requests[], int *index,
                                 int *flag, MPI_Status *status);
CRNET_MPI_EXTERN int MPI_Waitsome(int incount, MPI_Request requests[],
                                  int *outcount, int indices[],
                                  MPI_Status statuses[]);
CRNET_MPI_EXTERN int MPI_Testsome(int incount, MPI_Request requests[],
                                  int *outcount, int indices[],
                                  MPI_Status statuses[]);
/* Asks that a receive no message has matched yet end without one: its
 * wait or test then completes it, and MPI_Test_cancelled on its status
 * says whether the cancel won. A send, or a receive already matched,
 * completes as it would have (the cancel does not win). Not for
 * nonblocking collectives (MPI_ERR_REQUEST), and not while another thread
 * waits for the same request. */
CRNET_MPI_EXTERN int MPI_Cancel(MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Test_cancelled(const MPI_Status *status, int *flag);
/* The request goes on and ends unseen; not for nonblocking collectives. */
CRNET_MPI_EXTERN int MPI_Request_free(MPI_Request *request);
CRNET_MPI_EXTERN int MPI_Test(MPI_Request *request, int *flag,
                              MPI_Status *status);
CRNET_MPI_EXTERN int MPI_Testall(int count, MPI_Request requests[], int *flag,
                                 MPI_Status statuses[]);

#ifdef __cplusplus
}
#endif

#endif /* CRNET_MPI_H */
