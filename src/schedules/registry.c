/* The registry: every algorithm's row (algorithm.h), in one list.
 *
 * A row lives beside its builders in its family's file; this list names
 * them, in auto's order of preference on equal prices (the first of a
 * collective's candidates is the family that does it in the fewest rounds
 * at optimal volume). Wire ids are the rows' own, so the order here may
 * change; an id never does. Adding an algorithm: its file with its row,
 * and one line below.
 */
#include "algorithm.h"

extern const crnet__algorithm crnet__circulant_algorithm,
    crnet__circulant_doubling_algorithm, crnet__circulant_linear_algorithm,
    crnet__circulant_sqrt_algorithm, crnet__ring_algorithm,
    crnet__hypercube_algorithm, crnet__rabenseifner_algorithm,
    crnet__star_algorithm, crnet__pairwise_algorithm, crnet__bruck_algorithm,
    crnet__allgather_reduce_algorithm, crnet__binomial_algorithm,
    crnet__linear_algorithm, crnet__twolevel_algorithm,
    crnet__knomial_algorithm, crnet__swing_algorithm;

const crnet__algorithm *const crnet__algorithms[] = {
    &crnet__circulant_algorithm,
    &crnet__bruck_algorithm,
    &crnet__pairwise_algorithm,
    &crnet__hypercube_algorithm,
    &crnet__rabenseifner_algorithm,
    &crnet__swing_algorithm,
    &crnet__star_algorithm,
    &crnet__allgather_reduce_algorithm,
    &crnet__ring_algorithm,
    &crnet__circulant_linear_algorithm,
    &crnet__twolevel_algorithm,
    &crnet__knomial_algorithm,
    &crnet__binomial_algorithm,
    &crnet__linear_algorithm,
    /* named only (not in auto) */
    &crnet__circulant_doubling_algorithm,
    &crnet__circulant_sqrt_algorithm,
};

const size_t crnet__nalgorithms =
    sizeof crnet__algorithms / sizeof crnet__algorithms[0];
