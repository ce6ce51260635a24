/* Attributes of communicators (MPI 3.1, section 6.7): the predefined ones
 * every MPI gives (MPI_TAG_UB and its kin), and the program's own keys
 * with their copy and delete callbacks, which MPI_Comm_dup, MPI_Comm_free
 * and MPI_Finalize (for MPI_COMM_SELF's, first of all) call.
 *
 * A key is an index into a table; the table and every comm's list of
 * values are under one lock, which is never held while a callback runs
 * (a callback may call MPI: get an attribute, dup a comm). */
#include <pthread.h>
#include <stdlib.h>

#include "mpi_internal.h"

struct crnet_mpi_attr {
  int keyval;
  void *val;
  struct crnet_mpi_attr *next;
};

typedef struct keyval {
  MPI_Comm_copy_attr_function *copy;
  MPI_Comm_delete_attr_function *del;
  void *extra;
  bool live;  /* created and not freed by the program */
  int values; /* attributes of it still set on some comm */
} keyval;

/* User keys are FIRST_USER_KEY + their index in `keys`. */
#define FIRST_USER_KEY 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static keyval *keys;
static int nkeys;

/* The predefined attributes' values: MPI hands out their addresses. */
static int tag_ub = CRNET_TAG_MAX;
static int host = MPI_PROC_NULL;
static int io = MPI_ANY_SOURCE; /* every rank may do I/O */
static int wtime_is_global = 0;
static int universe_size;
static int appnum = 0;
static int lastusedcode = MPI_ERR_LASTCODE;

static int *predefined(int k) {
  switch (k) {
  case MPI_TAG_UB:
    return &tag_ub;
  case MPI_HOST:
    return &host;
  case MPI_IO:
    return &io;
  case MPI_WTIME_IS_GLOBAL:
    return &wtime_is_global;
  case MPI_UNIVERSE_SIZE:
    universe_size = crnet_comm_size(crnet_mpi_world());
    return &universe_size;
  case MPI_APPNUM:
    return &appnum;
  case MPI_LASTUSEDCODE:
    return &lastusedcode;
  default:
    return NULL;
  }
}

/* The live or still-used key k, under lock; NULL if there is none. */
static keyval *key_of(int k) {
  int i = k - FIRST_USER_KEY;
  if (i < 0 || i >= nkeys || (!keys[i].live && keys[i].values == 0))
    return NULL;
  return &keys[i];
}

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *copy_fn,
                           MPI_Comm_delete_attr_function *delete_fn,
                           int *comm_keyval, void *extra_state) {
  const char *fn = "MPI_Comm_create_keyval";
  keyval *grown;
  int i;
  if (!crnet_mpi_ready())
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_OTHER,
                          "called before MPI_Init or after MPI_Finalize");
  if (comm_keyval == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                          "comm_keyval is NULL");
  pthread_mutex_lock(&lock);
  for (i = 0; i < nkeys; i++)
    if (!keys[i].live && keys[i].values == 0)
      break;
  if (i == nkeys) {
    grown = realloc(keys, sizeof *keys * (size_t)(nkeys + 1));
    if (grown == NULL) {
      pthread_mutex_unlock(&lock);
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_NO_MEM, "a key");
    }
    keys = grown;
    nkeys++;
  }
  keys[i] = (keyval){copy_fn, delete_fn, extra_state, true, 0};
  pthread_mutex_unlock(&lock);
  *comm_keyval = FIRST_USER_KEY + i;
  return MPI_SUCCESS;
}

/* The key goes; values of it still set stay until deleted, with their
 * callbacks (MPI 3.1, 6.7.2). */
int MPI_Comm_free_keyval(int *comm_keyval) {
  const char *fn = "MPI_Comm_free_keyval";
  keyval *k;
  if (comm_keyval == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                          "comm_keyval is NULL");
  if (predefined(*comm_keyval) != NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_KEYVAL,
                          "key %d is predefined", *comm_keyval);
  pthread_mutex_lock(&lock);
  k = key_of(*comm_keyval);
  if (k == NULL || !k->live) {
    pthread_mutex_unlock(&lock);
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_KEYVAL,
                          "key %d was not created, or is freed already",
                          *comm_keyval);
  }
  k->live = false;
  pthread_mutex_unlock(&lock);
  *comm_keyval = MPI_KEYVAL_INVALID;
  return MPI_SUCCESS;
}

/* comm's value of key k and where it is in the list, under lock. */
static struct crnet_mpi_attr **find(MPI_Comm comm, int k) {
  struct crnet_mpi_attr **at = &comm->attrs;
  while (*at != NULL && (*at)->keyval != k)
    at = &(*at)->next;
  return at;
}

/* The handle the program knows comm by: MPI_COMM_WORLD and MPI_COMM_SELF
 * are small integers, not the objects behind them (a callback may compare
 * its comm with them). */
static MPI_Comm handle_of(MPI_Comm comm) {
  if (comm == crnet_mpi_comm_of(MPI_COMM_WORLD))
    return MPI_COMM_WORLD;
  if (comm == crnet_mpi_comm_of(MPI_COMM_SELF))
    return MPI_COMM_SELF;
  return comm;
}

/* Runs key k's delete callback on val (outside the lock). */
static int call_delete(MPI_Comm comm, int k, void *val) {
  MPI_Comm_delete_attr_function *del;
  void *extra;
  pthread_mutex_lock(&lock);
  del = keys[k - FIRST_USER_KEY].del;
  extra = keys[k - FIRST_USER_KEY].extra;
  pthread_mutex_unlock(&lock);
  return del != NULL ? del(handle_of(comm), k, val, extra) : MPI_SUCCESS;
}

/* The user key of a set or delete: MPI_SUCCESS or the error, raised. */
static int check_user_key(MPI_Comm comm, const char *fn, int k) {
  bool ok;
  if (predefined(k) != NULL)
    return crnet_mpi_fail(comm, fn, MPI_ERR_KEYVAL,
                          "key %d is predefined: it is read only", k);
  pthread_mutex_lock(&lock);
  ok = key_of(k) != NULL && key_of(k)->live;
  pthread_mutex_unlock(&lock);
  if (!ok)
    return crnet_mpi_fail(comm, fn, MPI_ERR_KEYVAL,
                          "key %d was not created, or is freed", k);
  return MPI_SUCCESS;
}

int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void *attribute_val) {
  const char *fn = "MPI_Comm_set_attr";
  struct crnet_mpi_attr *a, **at;
  int rc = crnet_mpi_check_comm(&comm, fn);
  if (rc == MPI_SUCCESS)
    rc = check_user_key(comm, fn, comm_keyval);
  if (rc != MPI_SUCCESS)
    return rc;
  void *old = NULL;
  bool had;
  pthread_mutex_lock(&lock);
  a = *find(comm, comm_keyval);
  had = a != NULL;
  if (had)
    old = a->val;
  pthread_mutex_unlock(&lock);
  /* The old value's delete callback first; if it fails, nothing changes. */
  if (had && (rc = call_delete(comm, comm_keyval, old)) != MPI_SUCCESS)
    return crnet_mpi_fail(comm, fn, MPI_ERR_OTHER,
                          "key %d's delete callback returned %d", comm_keyval,
                          rc);
  if ((a = malloc(sizeof *a)) == NULL)
    return crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM, "an attribute");
  a->keyval = comm_keyval;
  a->val = attribute_val;
  a->next = NULL;
  /* Found again: another thread may have set or deleted it meanwhile. */
  pthread_mutex_lock(&lock);
  at = find(comm, comm_keyval); /* at the end: values keep their order */
  if (*at != NULL) {
    (*at)->val = attribute_val;
  } else {
    *at = a;
    a = NULL;
    keys[comm_keyval - FIRST_USER_KEY].values++;
  }
  pthread_mutex_unlock(&lock);
  free(a);
  return MPI_SUCCESS;
}

int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val,
                      int *flag) {
  const char *fn = "MPI_Comm_get_attr";
  struct crnet_mpi_attr *a;
  int *value = predefined(comm_keyval);
  bool known;
  int rc = crnet_mpi_check_comm(&comm, fn);
  if (rc != MPI_SUCCESS)
    return rc;
  if (attribute_val == NULL || flag == NULL)
    return crnet_mpi_fail(comm, fn, MPI_ERR_ARG,
                          "attribute_val or flag is NULL");
  /* A predefined value is the address of an int (MPI 3.1, 8.1.2). */
  if (value != NULL) {
    *(void **)attribute_val = value;
    *flag = 1;
    return MPI_SUCCESS;
  }
  pthread_mutex_lock(&lock);
  known = key_of(comm_keyval) != NULL;
  a = known ? *find(comm, comm_keyval) : NULL;
  if (a != NULL)
    *(void **)attribute_val = a->val;
  pthread_mutex_unlock(&lock);
  if (!known)
    return crnet_mpi_fail(comm, fn, MPI_ERR_KEYVAL,
                          "key %d was not created, or is freed", comm_keyval);
  *flag = a != NULL;
  return MPI_SUCCESS;
}

/* Takes key k's value off comm after its delete callback agreed. */
static int delete_one(MPI_Comm comm, const char *fn, int k) {
  struct crnet_mpi_attr *a, **at;
  void *val = NULL;
  int rc;
  pthread_mutex_lock(&lock);
  a = *find(comm, k);
  if (a != NULL)
    val = a->val;
  pthread_mutex_unlock(&lock);
  if (a == NULL)
    return crnet_mpi_fail(comm, fn, MPI_ERR_KEYVAL,
                          "key %d has no value on the communicator", k);
  rc = call_delete(comm, k, val);
  if (rc != MPI_SUCCESS)
    return crnet_mpi_fail(comm, fn, MPI_ERR_OTHER,
                          "key %d's delete callback returned %d", k, rc);
  pthread_mutex_lock(&lock);
  at = find(comm, k);
  if (*at == a) {
    *at = a->next;
    keys[k - FIRST_USER_KEY].values--;
  } else {
    a = NULL; /* another thread took it meanwhile */
  }
  pthread_mutex_unlock(&lock);
  free(a);
  return MPI_SUCCESS;
}

int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval) {
  const char *fn = "MPI_Comm_delete_attr";
  int rc = crnet_mpi_check_comm(&comm, fn);
  if (rc != MPI_SUCCESS)
    return rc;
  if (predefined(comm_keyval) != NULL)
    return crnet_mpi_fail(comm, fn, MPI_ERR_KEYVAL,
                          "key %d is predefined: it is read only", comm_keyval);
  pthread_mutex_lock(&lock);
  rc = key_of(comm_keyval) != NULL;
  pthread_mutex_unlock(&lock);
  if (!rc)
    return crnet_mpi_fail(comm, fn, MPI_ERR_KEYVAL,
                          "key %d was not created, or is freed", comm_keyval);
  return delete_one(comm, fn, comm_keyval);
}

/* The last value set goes first: MPI_Finalize deletes MPI_COMM_SELF's in
 * the reverse order of their setting (MPI 3.1, 8.7.1), where libraries
 * rely on it for the order of their clean-up. */
int crnet_mpi_attr_delete_all(MPI_Comm comm, const char *fn) {
  for (;;) {
    int k = -1, rc;
    pthread_mutex_lock(&lock);
    for (struct crnet_mpi_attr *a = comm->attrs; a != NULL; a = a->next)
      k = a->keyval;
    pthread_mutex_unlock(&lock);
    if (k < 0)
      return MPI_SUCCESS;
    if ((rc = delete_one(comm, fn, k)) != MPI_SUCCESS)
      return rc;
  }
}

int crnet_mpi_attr_copy_all(MPI_Comm from, MPI_Comm to, const char *fn) {
  struct crnet_mpi_attr *a;
  int done = 0;
  for (;;) {
    MPI_Comm_copy_attr_function *copy = NULL;
    void *extra = NULL, *in = NULL, *out = NULL;
    int k = -1, flag = 0, rc, i = 0;
    /* The done-th value of `from`, as it is now. */
    pthread_mutex_lock(&lock);
    for (a = from->attrs; a != NULL && i < done; a = a->next)
      i++;
    if (a != NULL) {
      k = a->keyval;
      in = a->val;
      copy = keys[k - FIRST_USER_KEY].copy;
      extra = keys[k - FIRST_USER_KEY].extra;
    }
    pthread_mutex_unlock(&lock);
    if (k < 0)
      return MPI_SUCCESS;
    done++;
    if (copy == NULL)
      continue;
    rc = copy(handle_of(from), k, extra, in, &out, &flag);
    if (rc != MPI_SUCCESS)
      return crnet_mpi_fail(from, fn, MPI_ERR_OTHER,
                            "key %d's copy callback returned %d", k, rc);
    if (!flag)
      continue;
    if ((a = malloc(sizeof *a)) == NULL)
      return crnet_mpi_fail(from, fn, MPI_ERR_NO_MEM, "an attribute");
    a->keyval = k;
    a->val = out;
    pthread_mutex_lock(&lock);
    a->next = NULL;
    *find(to, k) = a;
    keys[k - FIRST_USER_KEY].values++;
    pthread_mutex_unlock(&lock);
  }
}

void crnet_mpi_attr_drop_all(MPI_Comm comm) {
  pthread_mutex_lock(&lock);
  while (comm->attrs != NULL) {
    struct crnet_mpi_attr *a = comm->attrs;
    comm->attrs = a->next;
    keys[a->keyval - FIRST_USER_KEY].values--;
    free(a);
  }
  pthread_mutex_unlock(&lock);
}

void crnet_mpi_attr_fini(void) {
  pthread_mutex_lock(&lock);
  free(keys);
  keys = NULL;
  nkeys = 0;
  pthread_mutex_unlock(&lock);
}

int crnet_mpi_comm_dup_fn(MPI_Comm oldcomm, int comm_keyval, void *extra_state,
                          void *attribute_val_in, void *attribute_val_out,
                          int *flag) {
  (void)oldcomm;
  (void)comm_keyval;
  (void)extra_state;
  *(void **)attribute_val_out = attribute_val_in;
  *flag = 1;
  return MPI_SUCCESS;
}

/* MPI 1's names (mpi.h). */
int MPI_Keyval_create(MPI_Copy_function *copy_fn,
                      MPI_Delete_function *delete_fn, int *keyval,
                      void *extra_state) {
  return MPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state);
}

int MPI_Keyval_free(int *keyval) { return MPI_Comm_free_keyval(keyval); }

int MPI_Attr_put(MPI_Comm comm, int keyval, void *attribute_val) {
  return MPI_Comm_set_attr(comm, keyval, attribute_val);
}

int MPI_Attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag) {
  return MPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}

int MPI_Attr_delete(MPI_Comm comm, int keyval) {
  return MPI_Comm_delete_attr(comm, keyval);
}
