/* Groups (MPI 3.1, section 6.3): ordered sets of the job's ranks, made
 * from communicators and from each other without any message; and the two
 * communicator calls made of them, MPI_Comm_create and MPI_Comm_compare.
 *
 * A group is the list of its members' ranks in the job
 * (crnet_comm_job_rank), in the group's order. MPI_GROUP_EMPTY is a static
 * group of none; a group operation whose result is empty gives it, as MPI
 * does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

struct crnet_mpi_group {
  int size;
  int *ranks; /* job ranks, in the group's order */
};

static struct crnet_mpi_group empty_group;

static struct crnet_mpi_group *group_of(MPI_Group g) {
  return g == MPI_GROUP_EMPTY ? &empty_group : g;
}

static int job_size(void) { return crnet_comm_size(crnet_mpi_world()); }

/* Errors of the group calls go to MPI_COMM_WORLD's handler (they have no
 * comm of their own). */
static int check_group(MPI_Group g, const char *fn, const char *what) {
  if (!crnet_mpi_ready())
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_OTHER,
                          "called before MPI_Init or after MPI_Finalize");
  if (g == MPI_GROUP_NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_GROUP,
                          "%s is "
                          "MPI_GROUP_NULL",
                          what);
  return MPI_SUCCESS;
}

static int check_out(void *out, const char *fn, const char *what) {
  if (out == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG, "%s is NULL", what);
  return MPI_SUCCESS;
}

/* Where each job rank is in g: job_size() entries, -1 for none. NULL when
 * memory is short. */
static int *positions(const struct crnet_mpi_group *g) {
  int n = job_size();
  int *at = malloc(sizeof *at * (size_t)(n > 0 ? n : 1));
  if (at == NULL)
    return NULL;
  for (int j = 0; j < n; j++)
    at[j] = -1;
  for (int i = 0; i < g->size; i++)
    at[g->ranks[i]] = i;
  return at;
}

/* The group of the n job ranks in `ranks` (taken: freed on failure, and
 * when n is 0, which gives MPI_GROUP_EMPTY). */
static int make_group(const char *fn, int *ranks, int n, MPI_Group *out) {
  struct crnet_mpi_group *g;
  if (n == 0) {
    free(ranks);
    *out = MPI_GROUP_EMPTY;
    return MPI_SUCCESS;
  }
  g = malloc(sizeof *g);
  if (g == NULL) {
    free(ranks);
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_NO_MEM, "a group");
  }
  g->size = n;
  g->ranks = ranks;
  *out = g;
  return MPI_SUCCESS;
}

static int *alloc_ranks(int n) {
  return malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
}

static int no_memory(const char *fn) {
  return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_NO_MEM, "a group");
}

int MPI_Comm_group(MPI_Comm comm, MPI_Group *group) {
  int rc = crnet_mpi_check_comm(&comm, "MPI_Comm_group"), n;
  int *ranks;
  if (rc != MPI_SUCCESS)
    return rc;
  if (group == NULL)
    return crnet_mpi_fail(comm, "MPI_Comm_group", MPI_ERR_ARG, "group is NULL");
  n = crnet_comm_size(comm->c);
  if ((ranks = alloc_ranks(n)) == NULL)
    return no_memory("MPI_Comm_group");
  for (int i = 0; i < n; i++)
    ranks[i] = crnet_comm_job_rank(comm->c, i);
  return make_group("MPI_Comm_group", ranks, n, group);
}

int MPI_Group_size(MPI_Group group, int *size) {
  int rc = check_group(group, "MPI_Group_size", "group");
  if (rc == MPI_SUCCESS)
    rc = check_out(size, "MPI_Group_size", "size");
  if (rc == MPI_SUCCESS)
    *size = group_of(group)->size;
  return rc;
}

int MPI_Group_rank(MPI_Group group, int *rank) {
  int rc = check_group(group, "MPI_Group_rank", "group");
  const struct crnet_mpi_group *g = group_of(group);
  int me;
  if (rc == MPI_SUCCESS)
    rc = check_out(rank, "MPI_Group_rank", "rank");
  if (rc != MPI_SUCCESS)
    return rc;
  me = crnet_comm_rank(crnet_mpi_world());
  *rank = MPI_UNDEFINED;
  for (int i = 0; i < g->size; i++)
    if (g->ranks[i] == me)
      *rank = i;
  return MPI_SUCCESS;
}

int MPI_Group_free(MPI_Group *group) {
  int rc = check_out(group, "MPI_Group_free", "group");
  if (rc == MPI_SUCCESS)
    rc = check_group(*group, "MPI_Group_free", "*group");
  if (rc != MPI_SUCCESS)
    return rc;
  if (*group != MPI_GROUP_EMPTY) {
    free((*group)->ranks);
    free(*group);
  }
  *group = MPI_GROUP_NULL;
  return MPI_SUCCESS;
}

int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[],
                              MPI_Group group2, int ranks2[]) {
  const char *fn = "MPI_Group_translate_ranks";
  int rc = check_group(group1, fn, "group1");
  const struct crnet_mpi_group *g1 = group_of(group1), *g2;
  int *at;
  if (rc == MPI_SUCCESS)
    rc = check_group(group2, fn, "group2");
  if (rc != MPI_SUCCESS)
    return rc;
  g2 = group_of(group2);
  if (n < 0)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG, "n is %d", n);
  if (n > 0 && (ranks1 == NULL || ranks2 == NULL))
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                          "ranks1 or ranks2 is NULL");
  for (int i = 0; i < n; i++)
    if (ranks1[i] != MPI_PROC_NULL && (ranks1[i] < 0 || ranks1[i] >= g1->size))
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_RANK,
                            "ranks1[%d] is %d: group1 has ranks 0 to %d", i,
                            ranks1[i], g1->size - 1);
  if ((at = positions(g2)) == NULL)
    return no_memory(fn);
  for (int i = 0; i < n; i++) {
    int r = ranks1[i];
    ranks2[i] = r == MPI_PROC_NULL ? MPI_PROC_NULL : at[g1->ranks[r]];
    if (ranks2[i] < 0 && r != MPI_PROC_NULL)
      ranks2[i] = MPI_UNDEFINED;
  }
  free(at);
  return MPI_SUCCESS;
}

/* MPI_IDENT: the same members in the same order; MPI_SIMILAR: the same
 * members; else MPI_UNEQUAL. */
static int compare(const struct crnet_mpi_group *a,
                   const struct crnet_mpi_group *b, int *result) {
  int *at;
  if (a->size != b->size) {
    *result = MPI_UNEQUAL;
    return MPI_SUCCESS;
  }
  if (a->size == 0 ||
      memcmp(a->ranks, b->ranks, sizeof(int) * (size_t)a->size) == 0) {
    *result = MPI_IDENT;
    return MPI_SUCCESS;
  }
  if ((at = positions(b)) == NULL)
    return MPI_ERR_NO_MEM;
  *result = MPI_SIMILAR;
  for (int i = 0; i < a->size; i++)
    if (at[a->ranks[i]] < 0)
      *result = MPI_UNEQUAL;
  free(at);
  return MPI_SUCCESS;
}

int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result) {
  const char *fn = "MPI_Group_compare";
  int rc = check_group(group1, fn, "group1");
  if (rc == MPI_SUCCESS)
    rc = check_group(group2, fn, "group2");
  if (rc == MPI_SUCCESS)
    rc = check_out(result, fn, "result");
  if (rc != MPI_SUCCESS)
    return rc;
  if (compare(group_of(group1), group_of(group2), result) != MPI_SUCCESS)
    return no_memory(fn);
  return MPI_SUCCESS;
}

/* n ranks of g, each valid and none twice: MPI_SUCCESS or the error. */
static int check_ranks(const char *fn, const struct crnet_mpi_group *g, int n,
                       const int ranks[]) {
  char *seen;
  if (n < 0 || n > g->size)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                          "n is %d: the group has %d ranks", n, g->size);
  if (n > 0 && ranks == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG, "ranks is NULL");
  if ((seen = calloc((size_t)g->size + 1, 1)) == NULL)
    return no_memory(fn);
  for (int i = 0; i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= g->size || seen[ranks[i]]) {
      int bad = ranks[i];
      bool twice = bad >= 0 && bad < g->size;
      free(seen);
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_RANK,
                            twice ? "ranks[%d] is %d, named twice"
                                  : "ranks[%d] is %d: the group has ranks 0 "
                                    "to %d",
                            i, bad, g->size - 1);
    }
    seen[ranks[i]] = 1;
  }
  free(seen);
  return MPI_SUCCESS;
}

/* g's members at the listed ranks (keep) or all but them, in order. */
static int pick(const char *fn, const struct crnet_mpi_group *g, int n,
                const int ranks[], bool keep, MPI_Group *newgroup) {
  int *out, k = 0;
  char *listed;
  if ((out = alloc_ranks(keep ? n : g->size - n)) == NULL)
    return no_memory(fn);
  if (keep) {
    for (int i = 0; i < n; i++)
      out[k++] = g->ranks[ranks[i]];
    return make_group(fn, out, k, newgroup);
  }
  if ((listed = calloc((size_t)g->size + 1, 1)) == NULL) {
    free(out);
    return no_memory(fn);
  }
  for (int i = 0; i < n; i++)
    listed[ranks[i]] = 1;
  for (int i = 0; i < g->size; i++)
    if (!listed[i])
      out[k++] = g->ranks[i];
  free(listed);
  return make_group(fn, out, k, newgroup);
}

static int incl_excl(const char *fn, MPI_Group group, int n, const int ranks[],
                     bool keep, MPI_Group *newgroup) {
  int rc = check_group(group, fn, "group");
  if (rc == MPI_SUCCESS)
    rc = check_out(newgroup, fn, "newgroup");
  if (rc == MPI_SUCCESS)
    rc = check_ranks(fn, group_of(group), n, ranks);
  if (rc != MPI_SUCCESS)
    return rc;
  return pick(fn, group_of(group), n, ranks, keep, newgroup);
}

int MPI_Group_incl(MPI_Group group, int n, const int ranks[],
                   MPI_Group *newgroup) {
  return incl_excl("MPI_Group_incl", group, n, ranks, true, newgroup);
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[],
                   MPI_Group *newgroup) {
  return incl_excl("MPI_Group_excl", group, n, ranks, false, newgroup);
}

/* The ranks the n triplets (first, last, stride) name, in order, into
 * *out (*count of them); each triplet names first, first + stride, ...
 * up to last, at least one rank. */
static int expand_ranges(const char *fn, const struct crnet_mpi_group *g, int n,
                         int ranges[][3], int **out, int *count) {
  int64_t total = 0;
  int *list, k = 0;
  if (n < 0)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG, "n is %d", n);
  if (n > 0 && ranges == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG, "ranges is NULL");
  for (int i = 0; i < n; i++) {
    int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
    if (stride == 0)
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                            "ranges[%d] has stride 0", i);
    if (first < 0 || first >= g->size || last < 0 || last >= g->size)
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_RANK,
                            "ranges[%d] is (%d, %d, %d): the group has ranks "
                            "0 to %d",
                            i, first, last, stride, g->size - 1);
    if ((stride > 0 && first > last) || (stride < 0 && first < last))
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_ARG,
                            "ranges[%d] is (%d, %d, %d): its stride never "
                            "reaches its last rank",
                            i, first, last, stride);
    total += ((int64_t)last - first) / stride + 1;
    if (total > g->size)
      return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_RANK,
                            "the ranges name more ranks than the group's %d "
                            "(some twice)",
                            g->size);
  }
  if ((list = alloc_ranks((int)total)) == NULL)
    return no_memory(fn);
  for (int i = 0; i < n; i++)
    for (int64_t r = ranges[i][0];
         ranges[i][2] > 0 ? r <= ranges[i][1] : r >= ranges[i][1];
         r += ranges[i][2])
      list[k++] = (int)r;
  *out = list;
  *count = k;
  return MPI_SUCCESS;
}

static int range_incl_excl(const char *fn, MPI_Group group, int n,
                           int ranges[][3], bool keep, MPI_Group *newgroup) {
  int rc = check_group(group, fn, "group"), *list = NULL, count = 0;
  if (rc == MPI_SUCCESS)
    rc = check_out(newgroup, fn, "newgroup");
  if (rc == MPI_SUCCESS)
    rc = expand_ranges(fn, group_of(group), n, ranges, &list, &count);
  if (rc == MPI_SUCCESS)
    rc = check_ranks(fn, group_of(group), count, list);
  if (rc == MPI_SUCCESS)
    rc = pick(fn, group_of(group), count, list, keep, newgroup);
  free(list);
  return rc;
}

int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3],
                         MPI_Group *newgroup) {
  return range_incl_excl("MPI_Group_range_incl", group, n, ranges, true,
                         newgroup);
}

int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3],
                         MPI_Group *newgroup) {
  return range_incl_excl("MPI_Group_range_excl", group, n, ranges, false,
                         newgroup);
}

enum set_op { UNION, INTERSECTION, DIFFERENCE };

/* MPI's order: group1's members first, in group1's order; a union then
 * adds group2's others in group2's order. */
static int set_op(const char *fn, MPI_Group group1, MPI_Group group2,
                  enum set_op op, MPI_Group *newgroup) {
  const struct crnet_mpi_group *a, *b;
  int rc = check_group(group1, fn, "group1"), *in_b, *out, k = 0;
  if (rc == MPI_SUCCESS)
    rc = check_group(group2, fn, "group2");
  if (rc == MPI_SUCCESS)
    rc = check_out(newgroup, fn, "newgroup");
  if (rc != MPI_SUCCESS)
    return rc;
  a = group_of(group1);
  b = group_of(group2);
  if ((in_b = positions(b)) == NULL)
    return no_memory(fn);
  if ((out = alloc_ranks(a->size + b->size)) == NULL) {
    free(in_b);
    return no_memory(fn);
  }
  for (int i = 0; i < a->size; i++) {
    bool both = in_b[a->ranks[i]] >= 0;
    if (op == UNION || (op == INTERSECTION) == both)
      out[k++] = a->ranks[i];
  }
  if (op == UNION) {
    int *in_a = positions(a);
    if (in_a == NULL) {
      free(in_b);
      free(out);
      return no_memory(fn);
    }
    for (int i = 0; i < b->size; i++)
      if (in_a[b->ranks[i]] < 0)
        out[k++] = b->ranks[i];
    free(in_a);
  }
  free(in_b);
  return make_group(fn, out, k, newgroup);
}

int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup) {
  return set_op("MPI_Group_union", group1, group2, UNION, newgroup);
}

int MPI_Group_intersection(MPI_Group group1, MPI_Group group2,
                           MPI_Group *newgroup) {
  return set_op("MPI_Group_intersection", group1, group2, INTERSECTION,
                newgroup);
}

int MPI_Group_difference(MPI_Group group1, MPI_Group group2,
                         MPI_Group *newgroup) {
  return set_op("MPI_Group_difference", group1, group2, DIFFERENCE, newgroup);
}

/* --- communicators made of groups ---------------------------------------- */

/* FNV-1a over the group's job ranks: equal groups hash alike. */
static uint64_t hash_of(const struct crnet_mpi_group *g) {
  uint64_t h = 14695981039346656037u;
  for (int i = 0; i < g->size; i++) {
    h ^= (uint64_t)(uint32_t)g->ranks[i];
    h *= 1099511628211u;
  }
  return h ^ (uint64_t)g->size;
}

/* This rank's place in g, and whether every member of g is in comm:
 * MPI_SUCCESS, or the error (not raised). */
static int place_in(MPI_Comm comm, const struct crnet_mpi_group *g, int *index,
                    char *why, size_t whylen) {
  int n = crnet_comm_size(comm->c),
      me = crnet_comm_job_rank(comm->c, crnet_comm_rank(comm->c));
  char *member = calloc((size_t)job_size() + 1, 1);
  if (member == NULL)
    return MPI_ERR_NO_MEM;
  for (int i = 0; i < n; i++)
    member[crnet_comm_job_rank(comm->c, i)] = 1;
  *index = -1;
  for (int i = 0; i < g->size; i++) {
    if (!member[g->ranks[i]]) {
      snprintf(why, whylen,
               "the group's rank %d (rank %d of MPI_COMM_WORLD) is not in "
               "the communicator",
               i, g->ranks[i]);
      free(member);
      return MPI_ERR_GROUP;
    }
    if (g->ranks[i] == me)
      *index = i;
  }
  free(member);
  return MPI_SUCCESS;
}

/* Collective over comm: every rank calls with its group, the same one or
 * (MPI 3) disjoint ones; each group's members get a comm of it, the others
 * MPI_COMM_NULL. A split does it: the color is the group's first member
 * in the job's order (disjoint groups have different ones), the key the
 * rank's place in it. A rank whose group is wrong still takes its part in
 * the split (with no color), so that the others do not wait for it; and
 * every new comm's members then agree, by one allreduce on it, that they
 * all passed the same group and found it whole, or all free it and fail. */
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
  const char *fn = "MPI_Comm_create";
  const struct crnet_mpi_group *g = group_of(group);
  crnet_comm *c = NULL;
  char why[200] = "";
  int rc = crnet_mpi_check_comm(&comm, fn), bad = MPI_SUCCESS, index = -1;
  int color = CRNET_UNDEFINED;
  uint64_t mine[3], all[3];
  if (rc != MPI_SUCCESS)
    return rc;
  if (newcomm == NULL) {
    bad = MPI_ERR_ARG;
    snprintf(why, sizeof why, "newcomm is NULL");
  } else if (group == MPI_GROUP_NULL) {
    bad = MPI_ERR_GROUP;
    snprintf(why, sizeof why, "group is MPI_GROUP_NULL");
  } else {
    bad = place_in(comm, g, &index, why, sizeof why);
  }
  if (bad == MPI_SUCCESS && index >= 0) {
    color = g->ranks[0];
    for (int i = 1; i < g->size; i++)
      if (g->ranks[i] < color)
        color = g->ranks[i];
  }
  rc = crnet_comm_split(comm->c, color, index, &c);
  if (rc != 0)
    return crnet_mpi_from_crnet(comm, fn, rc);
  if (bad != MPI_SUCCESS)
    return crnet_mpi_fail(comm, fn, bad, "%s",
                          bad == MPI_ERR_NO_MEM ? "a group's index" : why);
  if (c == NULL) {
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  /* Equal hashes on every member: max(h) and max(~h) are then its own. */
  mine[0] = hash_of(g);
  mine[1] = ~mine[0];
  mine[2] = crnet_comm_size(c) != g->size;
  rc = crnet_allreduce(c, mine, all, 3, CRNET_UINT64, CRNET_MAX);
  if (rc == 0 && (all[0] != mine[0] || all[1] != mine[1] || all[2] != 0)) {
    crnet_comm_destroy(c);
    return crnet_mpi_fail(comm, fn, MPI_ERR_GROUP,
                          "the ranks of one new communicator passed "
                          "different groups (MPI asks for the same group, "
                          "or disjoint ones)");
  }
  if (rc != 0) {
    int err = crnet_mpi_from_crnet(comm, fn, rc);
    crnet_comm_destroy(c);
    return err;
  }
  return crnet_mpi_comm_wrap(comm, fn, c, newcomm);
}

/* MPI_IDENT: one communicator; MPI_CONGRUENT: the same ranks in the same
 * order; MPI_SIMILAR: the same ranks; else MPI_UNEQUAL. */
int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result) {
  const char *fn = "MPI_Comm_compare";
  MPI_Group g1 = MPI_GROUP_NULL, g2 = MPI_GROUP_NULL;
  int rc = crnet_mpi_check_comm(&comm1, fn);
  if (rc == MPI_SUCCESS)
    rc = crnet_mpi_check_comm(&comm2, fn);
  if (rc != MPI_SUCCESS)
    return rc;
  if (result == NULL)
    return crnet_mpi_fail(comm1, fn, MPI_ERR_ARG, "result is NULL");
  if (comm1 == comm2) {
    *result = MPI_IDENT;
    return MPI_SUCCESS;
  }
  if ((rc = MPI_Comm_group(comm1, &g1)) != MPI_SUCCESS ||
      (rc = MPI_Comm_group(comm2, &g2)) != MPI_SUCCESS) {
    if (g1 != MPI_GROUP_NULL)
      MPI_Group_free(&g1);
    return rc;
  }
  rc = compare(group_of(g1), group_of(g2), result);
  if (rc == MPI_SUCCESS && *result == MPI_IDENT)
    *result = MPI_CONGRUENT;
  MPI_Group_free(&g1);
  MPI_Group_free(&g2);
  return rc == MPI_SUCCESS ? MPI_SUCCESS : no_memory(fn);
}
