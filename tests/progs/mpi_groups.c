/* mpi_groups: crnet-mpi's groups and attributes through the MPI names,
 * with the small calls on handles (names, extents, addresses, operators'
 * commutativity), at any p >= 2.
 *
 *   crlaunch -n P mpi_groups
 *
 * Groups: made from communicators and from each other, compared and
 * translated, MPI_Comm_create of one group and of disjoint ones,
 * MPI_Comm_compare, and the errors (bad ranks, a NULL group, ranks that
 * pass different groups: every one of them fails, none waits). Attributes:
 * the predefined keys, the program's keys with their copy and delete
 * callbacks through MPI_Comm_dup, MPI_Comm_free, MPI_Comm_set_attr on a
 * set value and MPI_Finalize (MPI_COMM_SELF's, whose callback may still
 * call MPI), and callbacks that fail. Info objects.
 *
 * Exits 0 when every check held; else prints each that failed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT_PROG "mpi_groups"
#include "mpi.h"
#include "mpi_expect.h"

static int rank, p;
static int failures;

static int size_of(MPI_Group g) {
  int n = -1;
  OK(MPI_Group_size(g, &n));
  return n;
}

static int rank_in(MPI_Group g) {
  int r = -7;
  OK(MPI_Group_rank(g, &r));
  return r;
}

static int compare(MPI_Group a, MPI_Group b) {
  int r = -1;
  OK(MPI_Group_compare(a, b, &r));
  return r;
}

static int compare_comms(MPI_Comm a, MPI_Comm b) {
  int r = -1;
  OK(MPI_Comm_compare(a, b, &r));
  return r;
}

/* The ranks of world from `first` on by `stride`, as a group. */
static MPI_Group stride_group(MPI_Group world, int first, int stride) {
  int ranks[64], n = 0;
  MPI_Group g = MPI_GROUP_NULL;
  for (int r = first; r < p; r += stride)
    ranks[n++] = r;
  OK(MPI_Group_incl(world, n, ranks, &g));
  return g;
}

static void check_groups(void) {
  MPI_Group world, evens, odds, g, h;
  int n, ranks[64], out[64];
  int ranges[2][3];

  OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  EXPECT(size_of(world) == p && rank_in(world) == rank, "the world's group");
  evens = stride_group(world, 0, 2);
  odds = stride_group(world, 1, 2);
  EXPECT(size_of(evens) == (p + 1) / 2, "evens: %d", size_of(evens));
  EXPECT(rank_in(evens) == (rank % 2 == 0 ? rank / 2 : MPI_UNDEFINED),
         "my rank in the evens: %d", rank_in(evens));

  /* excl, range_incl and range_excl make the same evens */
  n = 0;
  for (int r = 1; r < p; r += 2)
    ranks[n++] = r;
  OK(MPI_Group_excl(world, n, ranks, &g));
  EXPECT(compare(g, evens) == MPI_IDENT, "excl of the odds");
  OK(MPI_Group_free(&g));
  EXPECT(g == MPI_GROUP_NULL, "free did not reset the handle");
  ranges[0][0] = 0, ranges[0][1] = p - 1, ranges[0][2] = 2;
  OK(MPI_Group_range_incl(world, 1, ranges, &g));
  EXPECT(compare(g, evens) == MPI_IDENT, "range_incl (0, p-1, 2)");
  OK(MPI_Group_free(&g));
  ranges[0][0] = 1, ranges[0][1] = p - 1, ranges[0][2] = 2;
  OK(MPI_Group_range_excl(world, 1, ranges, &g));
  EXPECT(compare(g, evens) == MPI_IDENT, "range_excl (1, p-1, 2)");
  OK(MPI_Group_free(&g));
  /* a negative stride: the world backwards, the same members */
  ranges[0][0] = p - 1, ranges[0][1] = 0, ranges[0][2] = -1;
  OK(MPI_Group_range_incl(world, 1, ranges, &g));
  EXPECT(rank_in(g) == p - 1 - rank, "backwards: %d", rank_in(g));
  EXPECT(compare(g, world) == MPI_SIMILAR, "backwards is similar");
  OK(MPI_Group_free(&g));

  /* set operations: group1's order first */
  OK(MPI_Group_union(odds, evens, &g));
  EXPECT(size_of(g) == p, "union size %d", size_of(g));
  EXPECT(rank_in(g) == (rank % 2 ? rank / 2 : p / 2 + rank / 2),
         "my rank in odds + evens: %d", rank_in(g));
  EXPECT(compare(g, world) == MPI_SIMILAR, "odds + evens is similar");
  OK(MPI_Group_free(&g));
  OK(MPI_Group_intersection(world, evens, &g));
  EXPECT(compare(g, evens) == MPI_IDENT, "world & evens");
  OK(MPI_Group_free(&g));
  OK(MPI_Group_difference(world, evens, &g));
  EXPECT(compare(g, odds) == MPI_IDENT, "world - evens");
  OK(MPI_Group_free(&g));
  OK(MPI_Group_intersection(evens, odds, &g));
  EXPECT(g == MPI_GROUP_EMPTY, "evens & odds is MPI_GROUP_EMPTY");
  EXPECT(size_of(g) == 0 && rank_in(g) == MPI_UNDEFINED, "the empty group");
  EXPECT(compare(g, MPI_GROUP_EMPTY) == MPI_IDENT, "empty is empty");
  EXPECT(compare(g, evens) == MPI_UNEQUAL, "empty against evens");
  OK(MPI_Group_free(&g));

  /* translate: world -> evens, and MPI_PROC_NULL passes */
  for (int r = 0; r < p; r++)
    ranks[r] = r;
  ranks[p] = MPI_PROC_NULL;
  OK(MPI_Group_translate_ranks(world, p + 1, ranks, evens, out));
  for (int r = 0; r < p; r++)
    EXPECT(out[r] == (r % 2 ? MPI_UNDEFINED : r / 2), "translate %d: %d", r,
           out[r]);
  EXPECT(out[p] == MPI_PROC_NULL, "translate MPI_PROC_NULL: %d", out[p]);
  /* of a split comm's group back to the world's */
  MPI_Comm rev;
  OK(MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &rev));
  OK(MPI_Comm_group(rev, &h));
  OK(MPI_Group_translate_ranks(h, p, ranks, world, out));
  for (int r = 0; r < p; r++)
    EXPECT(out[r] == p - 1 - r, "reversed comm's %d is world's %d", r, out[r]);
  EXPECT(compare_comms(rev, MPI_COMM_WORLD) == MPI_SIMILAR, "rev ~ world");
  OK(MPI_Group_free(&h));
  OK(MPI_Comm_free(&rev));

  OK(MPI_Group_free(&evens));
  OK(MPI_Group_free(&odds));
  OK(MPI_Group_free(&world));
}

static void check_comm_create(void) {
  MPI_Group world, evens, mine;
  MPI_Comm c = MPI_COMM_NULL, split, dup;
  int sum = -1, want = 0, r = -1;

  OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  evens = stride_group(world, 0, 2);
  /* one group: its members get a comm, the others MPI_COMM_NULL */
  OK(MPI_Comm_create(MPI_COMM_WORLD, evens, &c));
  EXPECT((rank % 2 == 0) == (c != MPI_COMM_NULL), "comm of the evens");
  if (c != MPI_COMM_NULL) {
    OK(MPI_Comm_rank(c, &r));
    EXPECT(r == rank / 2, "rank %d in the evens' comm", r);
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
    for (int k = 0; k < p; k += 2)
      want += k;
    EXPECT(sum == want, "sum %d over the evens, want %d", sum, want);
    OK(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &split));
    OK(MPI_Comm_free(&c));
  } else {
    OK(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &split));
  }
  /* disjoint groups (MPI 3): each rank passes its parity's */
  mine = stride_group(world, rank % 2, 2);
  OK(MPI_Comm_create(MPI_COMM_WORLD, mine, &c));
  EXPECT(c != MPI_COMM_NULL, "comm of my parity");
  if (c != MPI_COMM_NULL) {
    MPI_Comm byparity;
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &byparity));
    EXPECT(compare_comms(c, byparity) == MPI_CONGRUENT, "create ~ split");
    EXPECT(compare_comms(c, MPI_COMM_WORLD) == MPI_UNEQUAL, "parity != world");
    OK(MPI_Barrier(c));
    OK(MPI_Comm_free(&byparity));
    OK(MPI_Comm_free(&c));
  }
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  EXPECT(compare_comms(dup, MPI_COMM_WORLD) == MPI_CONGRUENT, "dup");
  EXPECT(compare_comms(split, MPI_COMM_WORLD) == MPI_CONGRUENT, "split 0");
  EXPECT(compare_comms(MPI_COMM_WORLD, MPI_COMM_WORLD) == MPI_IDENT, "ident");
  EXPECT(compare_comms(MPI_COMM_SELF, MPI_COMM_WORLD) == MPI_UNEQUAL, "self");
  /* the ranks of this host: here every rank (one host); keys order them */
  MPI_Comm node = MPI_COMM_NULL;
  OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                         &node));
  EXPECT(node != MPI_COMM_NULL &&
             compare_comms(node, MPI_COMM_WORLD) == MPI_CONGRUENT,
         "the host's comm");
  OK(MPI_Comm_free(&node));
  OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, -rank,
                         MPI_INFO_NULL, &node));
  EXPECT(compare_comms(node, MPI_COMM_WORLD) == MPI_SIMILAR,
         "the host's comm in reverse");
  OK(MPI_Comm_free(&node));
  OK(MPI_Comm_split_type(MPI_COMM_WORLD,
                         rank == 0 ? MPI_UNDEFINED : MPI_COMM_TYPE_SHARED, 0,
                         MPI_INFO_NULL, &node));
  EXPECT((rank == 0) == (node == MPI_COMM_NULL), "MPI_UNDEFINED split_type");
  if (node != MPI_COMM_NULL)
    OK(MPI_Comm_free(&node));
  /* the empty group: nobody gets a comm */
  OK(MPI_Comm_create(dup, MPI_GROUP_EMPTY, &c));
  EXPECT(c == MPI_COMM_NULL, "a comm of nobody");
  OK(MPI_Comm_free(&dup));
  OK(MPI_Comm_free(&split));
  OK(MPI_Group_free(&mine));
  OK(MPI_Group_free(&evens));
  OK(MPI_Group_free(&world));
}

static void check_errors(void) {
  MPI_Group world, g = MPI_GROUP_NULL, two;
  MPI_Comm c = MPI_COMM_NULL, half;
  int code, n = 0, ranks[2] = {0, 0}, ranges[1][3] = {{0, p - 1, 0}};

  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  ranks[0] = p;
  code = MPI_Group_incl(world, 1, ranks, &g);
  EXPECT(error_class(code) == MPI_ERR_RANK, "incl rank p: %s",
         error_text(code));
  ranks[0] = 0;
  code = MPI_Group_incl(world, 2, ranks, &g);
  EXPECT(error_class(code) == MPI_ERR_RANK &&
             strstr(error_text(code), "twice") != NULL,
         "incl 0 twice: %s", error_text(code));
  code = MPI_Group_excl(world, p + 1, ranks, &g);
  EXPECT(error_class(code) == MPI_ERR_ARG, "excl p+1: %s", error_text(code));
  code = MPI_Group_range_incl(world, 1, ranges, &g);
  EXPECT(error_class(code) == MPI_ERR_ARG, "stride 0: %s", error_text(code));
  EXPECT(g == MPI_GROUP_NULL, "a refused call made a group");
  code = MPI_Group_size(MPI_GROUP_NULL, &n);
  EXPECT(error_class(code) == MPI_ERR_GROUP, "size of MPI_GROUP_NULL: %s",
         error_text(code));
  code = MPI_Group_free(&g);
  EXPECT(error_class(code) == MPI_ERR_GROUP, "free MPI_GROUP_NULL: %s",
         error_text(code));

  /* Ranks that pass different groups fail, every one, and none waits:
   * rank 0 passes {0}, the others the world. */
  ranks[0] = 0;
  OK(MPI_Group_incl(world, 1, ranks, &two));
  code = MPI_Comm_create(MPI_COMM_WORLD, rank == 0 ? two : world, &c);
  EXPECT(error_class(code) == MPI_ERR_GROUP && c == MPI_COMM_NULL,
         "different groups: %s", error_text(code));
  /* A NULL group on rank 1: it fails, and so do the others (their comm
   * lacks it). */
  code =
      MPI_Comm_create(MPI_COMM_WORLD, rank == 1 ? MPI_GROUP_NULL : world, &c);
  EXPECT(error_class(code) == MPI_ERR_GROUP && c == MPI_COMM_NULL,
         "a NULL group on rank 1: %s", error_text(code));
  /* A group with ranks outside the comm: all fail alike. */
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
  code = MPI_Comm_create(half, world, &c);
  EXPECT(error_class(code) == MPI_ERR_GROUP &&
             strstr(error_text(code), "not in the communicator") != NULL,
         "the world's group on half: %s", error_text(code));
  OK(MPI_Comm_free(&half));
  /* no newcomm on rank 0: it fails, the others go on without it */
  MPI_Comm some = MPI_COMM_NULL;
  int some_size = -1;
  code = MPI_Comm_split(MPI_COMM_WORLD, 0, 0, rank == 0 ? NULL : &some);
  EXPECT(rank == 0 ? error_class(code) == MPI_ERR_ARG : code == MPI_SUCCESS,
         "split without newcomm on rank 0: %s", error_text(code));
  if (rank != 0) {
    OK(MPI_Comm_size(some, &some_size));
    EXPECT(some_size == p - 1, "the others' comm has %d ranks", some_size);
    OK(MPI_Comm_free(&some));
  }
  code = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                             MPI_INFO_NULL, rank == 0 ? NULL : &some);
  EXPECT(rank == 0 ? error_class(code) == MPI_ERR_ARG : code == MPI_SUCCESS,
         "split_type without newcomm on rank 0: %s", error_text(code));
  if (rank != 0)
    OK(MPI_Comm_free(&some));
  code = MPI_Comm_create(MPI_COMM_WORLD, world, rank == 0 ? NULL : &some);
  EXPECT(error_class(code) == (rank == 0 ? MPI_ERR_ARG : MPI_ERR_GROUP),
         "create without newcomm on rank 0: %s", error_text(code));
  /* a split type that does not exist: every rank fails, none waits */
  code = MPI_Comm_split_type(MPI_COMM_WORLD, 77, 0, MPI_INFO_NULL, &c);
  EXPECT(error_class(code) == MPI_ERR_ARG && c == MPI_COMM_NULL,
         "split_type 77: %s", error_text(code));
  code = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                             (MPI_Info)5, &c);
  EXPECT(error_class(code) == MPI_ERR_INFO && c == MPI_COMM_NULL,
         "split_type with info 5: %s", error_text(code));
  /* the world works after all that */
  int one = 1, all = 0;
  OK(MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  EXPECT(all == p, "allreduce after the failures: %d", all);
  OK(MPI_Group_free(&two));
  OK(MPI_Group_free(&world));
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

/* --- attributes ----------------------------------------------------------- */

static int deleted, copied, self_deleted;
static int refuse_copy, refuse_delete;

static int count_delete(MPI_Comm comm, int key, void *val, void *extra) {
  (void)comm;
  (void)key;
  (void)val;
  (void)extra;
  if (refuse_delete)
    return MPI_ERR_OTHER;
  deleted++;
  return MPI_SUCCESS;
}

static int count_copy(MPI_Comm old, int key, void *extra, void *in, void *out,
                      int *flag) {
  (void)old;
  (void)key;
  EXPECT(extra == &copied, "extra state %p", extra);
  if (refuse_copy)
    return MPI_ERR_OTHER;
  copied++;
  *(void **)out = (char *)in + 1;
  *flag = 1;
  return MPI_SUCCESS;
}

/* On MPI_COMM_SELF: runs inside MPI_Finalize, which must still answer,
 * with the handle MPI_COMM_SELF, the last value set first. self_order
 * gets each callback's extra state (1 for the first key set, 2 for the
 * second). */
static int self_order[2], self_calls;

static int self_delete(MPI_Comm comm, int key, void *val, void *extra) {
  int *tag_ub = NULL, flag = 0;
  (void)key;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag) ==
          MPI_SUCCESS &&
      flag && val == &self_deleted && comm == MPI_COMM_SELF)
    self_deleted++;
  if (self_calls < 2)
    self_order[self_calls] = (int)(intptr_t)extra;
  self_calls++;
  return MPI_SUCCESS;
}

static void check_attributes(void) {
  static char data[4];
  int *value = NULL, flag = 0, code, key = MPI_KEYVAL_INVALID;
  int dupkey = MPI_KEYVAL_INVALID, nocopy = MPI_KEYVAL_INVALID, selfkey;
  void *got = NULL;
  MPI_Comm c, d;

  /* predefined: the address of an int */
  OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag));
  EXPECT(flag && value != NULL && *value >= 32767, "MPI_TAG_UB");
  OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &value, &flag));
  EXPECT(flag && value != NULL && (*value == 0 || *value == 1),
         "MPI_WTIME_IS_GLOBAL");
  OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &value, &flag));
  EXPECT(flag && *value == MPI_PROC_NULL, "MPI_HOST");
  OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &value, &flag));
  EXPECT(flag && *value == MPI_ANY_SOURCE, "MPI_IO");
  OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &value, &flag));
  EXPECT(flag && *value == p, "MPI_UNIVERSE_SIZE");

  OK(MPI_Comm_create_keyval(count_copy, count_delete, &key, &copied));
  OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &dupkey,
                            NULL));
  OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &nocopy,
                            NULL));
  EXPECT(key != dupkey && key != nocopy && key != MPI_TAG_UB, "keys %d %d %d",
         key, dupkey, nocopy);
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
  OK(MPI_Comm_get_attr(c, key, &got, &flag));
  EXPECT(!flag, "a key with no value");
  OK(MPI_Comm_set_attr(c, key, &data[0]));
  OK(MPI_Comm_set_attr(c, dupkey, &data[2]));
  OK(MPI_Comm_set_attr(c, nocopy, &data[3]));
  OK(MPI_Comm_get_attr(c, key, &got, &flag));
  EXPECT(flag && got == &data[0], "the value set");
  /* a dup gets what the copy callbacks give */
  OK(MPI_Comm_dup(c, &d));
  EXPECT(copied == 1, "copies %d", copied);
  OK(MPI_Comm_get_attr(d, key, &got, &flag));
  EXPECT(flag && got == &data[1], "the copy callback's value");
  OK(MPI_Comm_get_attr(d, dupkey, &got, &flag));
  EXPECT(flag && got == &data[2], "MPI_COMM_DUP_FN's value");
  OK(MPI_Comm_get_attr(d, nocopy, &got, &flag));
  EXPECT(!flag, "MPI_COMM_NULL_COPY_FN copied");
  /* set on a set value: the old one is deleted first */
  OK(MPI_Comm_set_attr(c, key, &data[3]));
  EXPECT(deleted == 1, "deletes after a set over a value: %d", deleted);
  OK(MPI_Comm_delete_attr(c, key));
  EXPECT(deleted == 2, "deletes after delete_attr: %d", deleted);
  OK(MPI_Comm_get_attr(c, key, &got, &flag));
  EXPECT(!flag, "a deleted value");
  /* free runs the delete callbacks of what is left */
  OK(MPI_Comm_free(&d)); /* key's copy */
  EXPECT(deleted == 3, "deletes after freeing the dup: %d", deleted);
  OK(MPI_Comm_free_keyval(&key));
  EXPECT(key == MPI_KEYVAL_INVALID, "free_keyval did not reset the key");

  OK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
  /* a failing copy callback fails the dup, which leaves nothing */
  OK(MPI_Comm_create_keyval(count_copy, count_delete, &key, &copied));
  OK(MPI_Comm_set_attr(c, key, &data[0]));
  refuse_copy = 1;
  d = MPI_COMM_NULL;
  code = MPI_Comm_dup(c, &d);
  EXPECT(code != MPI_SUCCESS && d == MPI_COMM_NULL,
         "dup with a refusing "
         "copy: %s",
         error_text(code));
  refuse_copy = 0;
  /* a failing delete callback keeps the comm */
  refuse_delete = 1;
  code = MPI_Comm_free(&c);
  EXPECT(code != MPI_SUCCESS && c != MPI_COMM_NULL,
         "free with a refusing "
         "delete: %s",
         error_text(code));
  refuse_delete = 0;
  OK(MPI_Barrier(c));
  code = MPI_Comm_set_attr(c, MPI_TAG_UB, &data[0]);
  EXPECT(error_class(code) == MPI_ERR_KEYVAL, "set MPI_TAG_UB: %s",
         error_text(code));
  code = MPI_Comm_get_attr(c, 12345, &got, &flag);
  EXPECT(error_class(code) == MPI_ERR_KEYVAL, "get of key 12345: %s",
         error_text(code));
  /* the refused free stopped at once, at the last value set (key's, whose
   * callback refused): dupkey's value is still there, once */
  OK(MPI_Comm_delete_attr(c, dupkey));
  code = MPI_Comm_delete_attr(c, dupkey);
  EXPECT(error_class(code) == MPI_ERR_KEYVAL,
         "delete of a key with no value: %s", error_text(code));
  OK(MPI_Comm_free(&c));
  EXPECT(c == MPI_COMM_NULL, "free after the callback agreed");
  OK(MPI_Comm_free_keyval(&key));
  OK(MPI_Comm_free_keyval(&dupkey));
  /* a freed key whose value is still set: its callback still runs */
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
  OK(MPI_Comm_set_attr(c, nocopy, &data[0]));
  OK(MPI_Comm_free_keyval(&nocopy));
  int before = deleted;
  OK(MPI_Comm_free(&c));
  EXPECT(deleted == before + 1, "the freed key's value was not deleted");
  /* MPI 1's names: the same keys and values */
  int old = MPI_KEYVAL_INVALID;
  OK(MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag));
  EXPECT(flag && *value >= 32767, "MPI_Attr_get(MPI_TAG_UB)");
  OK(MPI_Keyval_create(MPI_NULL_COPY_FN, count_delete, &old, NULL));
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
  OK(MPI_Attr_put(c, old, &data[1]));
  OK(MPI_Comm_get_attr(c, old, &got, &flag));
  EXPECT(flag && got == &data[1], "MPI_Attr_put's value");
  before = deleted;
  OK(MPI_Attr_delete(c, old));
  OK(MPI_Attr_get(c, old, &got, &flag));
  EXPECT(!flag && deleted == before + 1, "MPI_Attr_delete");
  OK(MPI_Keyval_free(&old));
  EXPECT(old == MPI_KEYVAL_INVALID, "MPI_Keyval_free");
  OK(MPI_Comm_free(&c));
  /* MPI_COMM_SELF's: deleted by MPI_Finalize (main checks) */
  OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &selfkey,
                            (void *)(intptr_t)1));
  OK(MPI_Comm_set_attr(MPI_COMM_SELF, selfkey, &self_deleted));
  OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &selfkey,
                            (void *)(intptr_t)2));
  OK(MPI_Comm_set_attr(MPI_COMM_SELF, selfkey, &self_deleted));
}

/* Names, extents, addresses and operators' commutativity. */
static void first_of(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)in;
  (void)inout;
  (void)len;
  (void)dt;
}

static void check_handles(void) {
  char name[MPI_MAX_OBJECT_NAME + 8];
  char longname[100];
  int len = -1, size = -1, commute = -1, code;
  MPI_Comm c;
  MPI_Aint lb = -1, extent = -1, a1, a2;
  MPI_Datatype three;
  MPI_Op op;
  double d[4];

  OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
  EXPECT(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14, "world: %s", name);
  OK(MPI_Comm_get_name(MPI_COMM_SELF, name, &len));
  EXPECT(strcmp(name, "MPI_COMM_SELF") == 0, "self: %s", name);
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
  OK(MPI_Comm_get_name(c, name, &len));
  EXPECT(len == 0 && name[0] == '\0', "a dup's name: %s", name);
  OK(MPI_Comm_set_name(c, "solver rows"));
  OK(MPI_Comm_get_name(c, name, &len));
  EXPECT(strcmp(name, "solver rows") == 0 && len == 11, "set: %s", name);
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  OK(MPI_Comm_set_name(c, longname));
  OK(MPI_Comm_get_name(c, name, &len));
  EXPECT(len == MPI_MAX_OBJECT_NAME - 1, "a long name cut to %d", len);
  OK(MPI_Comm_free(&c));

  OK(MPI_Type_get_extent(MPI_DOUBLE, &lb, &extent));
  EXPECT(lb == 0 && extent == 8, "double: %ld %ld", (long)lb, (long)extent);
  OK(MPI_Type_contiguous(3, MPI_INT, &three));
  OK(MPI_Type_get_extent(three, &lb, &extent));
  EXPECT(lb == 0 && extent == 12, "3 ints: %ld %ld", (long)lb, (long)extent);
  OK(MPI_Type_free(&three));
  OK(MPI_Type_size(MPI_DOUBLE_INT, &size));
  OK(MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &extent));
  EXPECT(size == 12 && extent == 16, "double_int: size %d extent %ld", size,
         (long)extent);
  OK(MPI_Type_get_true_extent(MPI_DOUBLE_INT, &lb, &extent));
  EXPECT(lb == 0 && extent == 12, "double_int true extent %ld", (long)extent);
  OK(MPI_Type_size(MPI_SHORT_INT, &size));
  EXPECT(size == 6, "short_int: %d", size);
  /* three of them in a row: three pairs' data, three extents, and the
   * last pair's padding outside the true extent */
  OK(MPI_Type_contiguous(3, MPI_DOUBLE_INT, &three));
  OK(MPI_Type_size(three, &size));
  OK(MPI_Type_get_extent(three, &lb, &extent));
  EXPECT(size == 36 && extent == 48, "3 double_ints: size %d extent %ld", size,
         (long)extent);
  OK(MPI_Type_get_true_extent(three, &lb, &extent));
  EXPECT(extent == 44, "3 double_ints' true extent %ld", (long)extent);
  OK(MPI_Type_free(&three));

  OK(MPI_Get_address(&d[0], &a1));
  OK(MPI_Get_address(&d[3], &a2));
  EXPECT(MPI_Aint_diff(a2, a1) == 3 * (MPI_Aint)sizeof(double) &&
             MPI_Aint_add(a1, 24) == a2,
         "addresses");

  OK(MPI_Op_commutative(MPI_SUM, &commute));
  EXPECT(commute == 1, "sum commutes");
  OK(MPI_Op_commutative(MPI_MAXLOC, &commute));
  EXPECT(commute == 1, "maxloc commutes");
  OK(MPI_Op_create(first_of, 0, &op));
  OK(MPI_Op_commutative(op, &commute));
  EXPECT(commute == 0, "a non-commutative operator commutes");
  OK(MPI_Op_free(&op));
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  code = MPI_Op_commutative((MPI_Op)200, &commute);
  EXPECT(error_class(code) == MPI_ERR_OP, "operator 200: %s", error_text(code));
  code = MPI_Type_get_extent((MPI_Datatype)999, &lb, &extent);
  EXPECT(error_class(code) == MPI_ERR_TYPE, "type 999: %s", error_text(code));
  code = MPI_Comm_set_name(MPI_COMM_WORLD, NULL);
  EXPECT(error_class(code) == MPI_ERR_ARG, "a NULL name: %s", error_text(code));
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

/* Info objects: keys in the order first set, values cut to valuelen, dup,
 * delete, the errors; accepted where MPI takes them (split_type, dup with
 * info, alloc_mem), a freed one refused. A leftover info is freed by
 * MPI_Finalize (valgrind-mpi-groups-p3 says so). */
static void check_info(void) {
  MPI_Info in, copy, used, leftover;
  MPI_Comm c;
  char key[MPI_MAX_INFO_KEY], val[8];
  char longkey[MPI_MAX_INFO_KEY + 1];
  int n = -1, flag = -1, len = -1, code;
  void *mem = NULL;
  OK(MPI_Info_create(&in));
  OK(MPI_Info_set(in, "b_key", "second"));
  OK(MPI_Info_set(in, "a_key", "first value, longer"));
  OK(MPI_Info_set(in, "b_key", "2")); /* replaced, keeps its place */
  OK(MPI_Info_get_nkeys(in, &n));
  EXPECT(n == 2, "nkeys %d", n);
  OK(MPI_Info_get_nthkey(in, 0, key));
  EXPECT(strcmp(key, "b_key") == 0, "key 0 %s", key);
  OK(MPI_Info_get(in, "b_key", sizeof val - 1, val, &flag));
  EXPECT(flag == 1 && strcmp(val, "2") == 0, "b_key %d %s", flag, val);
  OK(MPI_Info_get(in, "a_key", 5, val, &flag));
  EXPECT(flag == 1 && strcmp(val, "first") == 0, "a_key cut to 5: %s", val);
  OK(MPI_Info_get_valuelen(in, "a_key", &len, &flag));
  EXPECT(flag == 1 && len == 19, "valuelen %d", len);
  OK(MPI_Info_get(in, "nope", sizeof val - 1, val, &flag));
  EXPECT(flag == 0, "a missing key found");
  OK(MPI_Info_dup(in, &copy));
  OK(MPI_Info_delete(in, "b_key"));
  OK(MPI_Info_get_nkeys(in, &n));
  EXPECT(n == 1, "nkeys after delete %d", n);
  OK(MPI_Info_get_nkeys(copy, &n));
  EXPECT(n == 2, "the dup lost a key: %d", n);
  OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, copy, &c));
  OK(MPI_Comm_free(&c));
  OK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, in, &c));
  OK(MPI_Comm_set_info(c, copy));
  OK(MPI_Comm_get_info(c, &used));
  OK(MPI_Info_get_nkeys(used, &n));
  EXPECT(n == 0, "hints in use: %d", n);
  OK(MPI_Info_free(&used));
  OK(MPI_Comm_free(&c));
  OK(MPI_Alloc_mem(64, in, &mem));
  OK(MPI_Free_mem(mem));
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  memset(longkey, 'k', sizeof longkey - 1);
  longkey[sizeof longkey - 1] = '\0';
  code = MPI_Info_set(in, longkey, "v");
  EXPECT(error_class(code) == MPI_ERR_INFO_KEY, "a long key: %s",
         error_text(code));
  code = MPI_Info_set(in, "k", "");
  EXPECT(error_class(code) == MPI_ERR_INFO_VALUE, "an empty value: %s",
         error_text(code));
  code = MPI_Info_delete(in, "b_key");
  EXPECT(error_class(code) == MPI_ERR_INFO_NOKEY, "delete twice: %s",
         error_text(code));
  code = MPI_Info_get_nthkey(in, 1, key);
  EXPECT(error_class(code) == MPI_ERR_ARG, "key 1 of 1: %s", error_text(code));
  OK(MPI_Info_free(&copy));
  EXPECT(copy == MPI_INFO_NULL, "freed info not null");
  MPI_Info stale = in;
  OK(MPI_Info_free(&in));
  code = MPI_Info_set(stale, "k", "v");
  EXPECT(error_class(code) == MPI_ERR_INFO, "a freed info: %s",
         error_text(code));
  code = MPI_Alloc_mem(64, stale, &mem);
  EXPECT(error_class(code) == MPI_ERR_INFO, "alloc_mem, a freed info: %s",
         error_text(code));
  /* One rank's freed info fails the dup on every rank, none keeps one. */
  c = MPI_COMM_NULL;
  code = MPI_Comm_dup_with_info(MPI_COMM_WORLD,
                                rank == 0 ? stale : MPI_INFO_NULL, &c);
  EXPECT(error_class(code) == MPI_ERR_INFO && c == MPI_COMM_NULL,
         "dup with one rank's freed info: %s", error_text(code));
  /* One rank's NULL newcomm: it fails, the others' dups work. */
  code = MPI_Comm_dup(MPI_COMM_WORLD, rank == 0 ? NULL : &c);
  EXPECT(rank == 0 ? error_class(code) == MPI_ERR_ARG : code == MPI_SUCCESS,
         "dup with rank 0's NULL newcomm: %s", error_text(code));
  if (rank != 0)
    OK(MPI_Comm_free(&c)); /* unused: rank 0 has no part of it */
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  OK(MPI_Info_create(&leftover));
  OK(MPI_Info_set(leftover, "left", "over"));
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
  if (p < 2 || p > 63) {
    fprintf(stderr, "mpi_groups: run it on 2 to 63 ranks\n");
    return 2;
  }
  check_groups();
  check_comm_create();
  check_errors();
  check_attributes();
  check_handles();
  check_info();
  int bad = failures, all_bad = 0;
  OK(MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  OK(MPI_Finalize());
  EXPECT(self_deleted == 2 && self_calls == 2,
         "MPI_Finalize ran MPI_COMM_SELF's delete callbacks %d times, %d "
         "of them with MPI answering and the handle MPI_COMM_SELF",
         self_calls, self_deleted);
  EXPECT(self_order[0] == 2 && self_order[1] == 1,
         "MPI_Finalize deleted MPI_COMM_SELF's values in the order %d, %d "
         "(the last set goes first)",
         self_order[0], self_order[1]);
  if (rank == 0 && all_bad == 0 && failures == 0)
    printf("mpi_groups: p = %d: every check held\n", p);
  return failures == 0 && all_bad == 0 ? 0 : 1;
}
