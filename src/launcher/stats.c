/* crlaunch --stats: the counters the ranks report at their end (CRNET_STATS),
 * summed per collective and per rank, and the table printed once every rank
 * is gone (launch.h). */
#include "launch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rank's counters at its end (comm.c, report_stats): "stats <rank>
 * <collective> <calls> <failed> <rounds> <sent> <received> <seconds>
 * <wait> <reduce>", for a rank in [first, first + count). 0, or -1 if
 * malformed. An agent passes the line on to crlaunch. */
int crnet__launch_take_stats(struct job *job, const char *line, int first,
                             int count) {
  struct stats_row in;
  int rank;
  char tail;
  memset(&in, 0, sizeof in);
  if (sscanf(line,
             "stats %d %23s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
             " %" SCNu64 " %lf %lf %lf%c",
             &rank, in.coll, &in.calls, &in.failed, &in.rounds, &in.sent,
             &in.received, &in.seconds, &in.wait, &in.reduce, &tail) != 11 ||
      tail != '\n' || rank < first || rank >= first + count ||
      rank >= job->size)
    return -1;
  if (job->agent != NULL) {
    /* no newline */
    crnet__launch_report_up(job, "%.*s", (int)strlen(line) - 1, line);
    return 0;
  }
  if (job->stats == NULL) {
    job->stats = calloc(MAX_STATS_ROWS, sizeof *job->stats);
    job->rank_stats = calloc((size_t)job->size, sizeof *job->rank_stats);
    if (job->stats == NULL || job->rank_stats == NULL) {
      free(job->stats);
      free(job->rank_stats);
      job->stats = NULL;
      job->rank_stats = NULL;
      return 0; /* no table, the job goes on */
    }
  }
  struct stats_row *row = NULL;
  for (int i = 0; i < job->nstats && row == NULL; i++)
    if (strcmp(job->stats[i].coll, in.coll) == 0)
      row = &job->stats[i];
  if (row == NULL) {
    if (job->nstats == MAX_STATS_ROWS)
      return -1;
    row = &job->stats[job->nstats++];
    snprintf(row->coll, sizeof row->coll, "%s", in.coll);
  }
  row->nranks++;
  row->calls += in.calls;
  row->failed += in.failed;
  row->rounds += in.rounds;
  row->sent += in.sent;
  row->received += in.received;
  row->seconds += in.seconds;
  row->wait += in.wait;
  row->reduce += in.reduce;
  if (in.calls > 0 && in.seconds / (double)in.calls > row->seconds_max)
    row->seconds_max = in.seconds / (double)in.calls;
  struct rank_stats *rs = &job->rank_stats[rank];
  rs->seen = 1;
  rs->calls += in.calls;
  rs->sent += in.sent;
  rs->received += in.received;
  rs->seconds += in.seconds;
  return 0;
}

static double mib(uint64_t bytes) {
  return (double)bytes / (1024.0 * 1024.0);
}

/* "12.3 us", "4.56 ms", "7.89 s" */
static void format_time(char *buf, size_t n, double s) {
  if (s < 1e-3)
    snprintf(buf, n, "%.1f us", s * 1e6);
  else if (s < 1)
    snprintf(buf, n, "%.2f ms", s * 1e3);
  else
    snprintf(buf, n, "%.2f s", s);
}

/* crlaunch --stats: the table of the counters the ranks reported, on
 * stderr once every rank is gone. Per collective: calls per rank, the mean
 * time of a call over ranks and the slowest rank's mean, and the shares
 * of that time spent waiting for messages and reducing; per rank: what it
 * sent and received and its time in collectives (every rank for jobs of up
 * to 16, else the extremes). */
void crnet__launch_print_stats(struct job *job) {
  int seen = 0;
  if (job->stats == NULL)
    return;
  for (int r = 0; r < job->size; r++)
    seen += job->rank_stats[r].seen;
  fprintf(stderr,
          "crlaunch: collectives of %d rank%s (CRNET_STATS; %d reported)\n"
          "  %-15s %10s %10s %12s %12s %6s %6s %12s\n",
          job->size, crnet__launch_plural(job->size), seen, "collective",
          "calls/rank", "rounds", "mean/call", "max/call", "wait", "reduce",
          "MiB sent");
  for (int i = 0; i < job->nstats; i++) {
    const struct stats_row *row = &job->stats[i];
    char mean[24], max[24];
    double per_call = row->calls > 0 ? row->seconds / (double)row->calls : 0;
    format_time(mean, sizeof mean, per_call);
    format_time(max, sizeof max, row->seconds_max);
    fprintf(stderr, "  %-15s %10.0f %10.1f %12s %12s %5.0f%% %5.0f%% %12.2f\n",
            row->coll, (double)row->calls / row->nranks,
            row->calls > 0 ? (double)row->rounds / (double)row->calls : 0.0,
            mean, max,
            row->seconds > 0 ? 100 * row->wait / row->seconds : 0.0,
            row->seconds > 0 ? 100 * row->reduce / row->seconds : 0.0,
            mib(row->sent));
  }
  fprintf(stderr, "  %-6s %12s %12s %14s\n", "rank", "MiB sent",
          "MiB received", "in collectives");
  int lo = -1, hi = -1;
  for (int r = 0; r < job->size; r++) {
    const struct rank_stats *rs = &job->rank_stats[r];
    if (!rs->seen)
      continue;
    if (lo < 0 || rs->seconds < job->rank_stats[lo].seconds)
      lo = r;
    if (hi < 0 || rs->seconds > job->rank_stats[hi].seconds)
      hi = r;
    if (job->size <= 16) {
      char t[24];
      format_time(t, sizeof t, rs->seconds);
      fprintf(stderr, "  %-6d %12.2f %12.2f %14s\n", r, mib(rs->sent),
              mib(rs->received), t);
    }
  }
  if (job->size > 16 && lo >= 0) {
    int ends[2] = {lo, hi};
    for (int i = 0; i < 2; i++) {
      const struct rank_stats *rs = &job->rank_stats[ends[i]];
      char t[24];
      format_time(t, sizeof t, rs->seconds);
      fprintf(stderr, "  %-6d %12.2f %12.2f %14s  (%s)\n", ends[i],
              mib(rs->sent), mib(rs->received), t,
              i == 0 ? "least time" : "most time");
    }
  }
}
