// gloo_bench: a Gloo collective benchmark with the methodology and the JSON
// rows of crbench (tools/crbench.c) and mpi_bench.c, so that crnet can be
// compared with Gloo on the same terms. Gloo only; nothing of crnet.
//
//   crlaunch -n P gloo_bench --store DIR -c allreduce -b 8 -e 64M -f 4 --json
//
// Rank and size come from CRNET_RANK/CRNET_SIZE (crlaunch sets them), else
// OMPI_COMM_WORLD_RANK/SIZE (mpirun.openmpi), else PMI_RANK/PMI_SIZE
// (mpirun.mpich). The ranks meet through a gloo::rendezvous::FileStore in
// DIR (which must exist, be empty for a new job and be shared by all ranks)
// and connect a full mesh of Gloo TCP pairs on 127.0.0.1.
//
// Each Gloo algorithm is a "schedule" (gloo_bench -h lists them). Per (size,
// schedule) row: WARMUP untimed calls, then ITERS repetitions of
// (gloo::barrier; one call timed with CLOCK_MONOTONIC); an allreduce (max)
// over the repetition times gives each repetition's slowest rank; the row
// shows the median. Datatype float, operator sum.
//
// Gloo's older algorithm classes (AllreduceRing, ReduceScatterHalvingDoubling,
// ...) work in place. The benchmark's calls are out of place, as crbench's and
// mpi_bench's are: the timed call copies the send buffer into the receive
// buffer and runs the algorithm there (--no-copy leaves the copy out of the
// timing). --budget and --check as in mpi_bench; GLOO_BENCH_CORRUPT=R makes
// rank R spoil one checked element, to test the check itself.
//
// gather, scatter (root 0 unless -r), allgatherv and alltoallv follow
// crbench and mpi_bench: the same sizes and counts (the v-variants with equal
// counts, built once per row, outside the timed call), busbw factor (p-1)/p.
// They are the "unbound buffer" calls gloo::gather, gloo::scatter (the root
// posts a receive from, or a send to, every rank at once), gloo::allgatherv
// (a ring) and gloo::alltoallv (every send and receive posted at once).
//
// --p2p latency|bw times point-to-point between ranks 0 and 1 with unbound
// buffers' send/recv, in the conventions of crbench --p2p and mpi_bench
// --p2p (OSU's osu_latency and osu_bw): half the round trip of a blocking
// ping-pong (send, waitSend, recv, waitRecv), or windows of 64 sends posted
// at once then a 4-byte ack; OSU's counts; the same rows.

#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allgather_ring.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/config.h>
#include <gloo/gather.h>
#include <gloo/allgatherv.h>
#include <gloo/alltoallv.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <getopt.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr const char *kProg = "gloo_bench";
constexpr int kExitWrong = 1;
constexpr int kExitUsage = 2;
constexpr int kMinIters = 3;
constexpr float kPreset = -1.0f;

enum class Coll {
  Allreduce,
  ReduceScatter,
  Allgather,
  Alltoall,
  Bcast,
  Gather,
  Scatter,
  Allgatherv,
  Alltoallv,
};
enum class P2p { None, Latency, Bw };
// --p2p: osu_bw's window, and OSU's boundary between small and large counts.
constexpr int kWindow = 64;
constexpr size_t kP2pLarge = 8192;
// --p2p: slots of the data and of the acks and the budget's message (a
// prefix no Gloo collective uses).
constexpr uint8_t kP2pSlotPrefix = 0x40;
enum class Bus { Allreduce, Spread, One };

struct CollDesc {
  const char *name;
  Coll id;
  Bus factor;
  bool reduces, rooted;
  std::vector<std::string> schedules;
};

const std::vector<CollDesc> &colls() {
  static const std::vector<CollDesc> v = {
      {"allreduce", Coll::Allreduce, Bus::Allreduce, true, false,
       {"gloo-ring", "gloo-ring-chunked", "gloo-halving-doubling",
        "gloo-bcube", "gloo-ub-ring", "gloo-ub-bcube"}},
      {"reduce_scatter", Coll::ReduceScatter, Bus::Spread, true, false,
       {"gloo-halving-doubling"}},
      {"allgather", Coll::Allgather, Bus::Spread, false, false,
       {"gloo-ring", "gloo-ub-ring"}},
      {"alltoall", Coll::Alltoall, Bus::Spread, false, false,
       {"gloo-ub-pairwise"}},
      {"bcast", Coll::Bcast, Bus::One, false, true,
       {"gloo-one-to-all", "gloo-ub-tree"}},
      {"gather", Coll::Gather, Bus::Spread, false, true, {"gloo-ub-linear"}},
      {"scatter", Coll::Scatter, Bus::Spread, false, true, {"gloo-ub-linear"}},
      {"allgatherv", Coll::Allgatherv, Bus::Spread, false, false,
       {"gloo-ub-ring"}},
      {"alltoallv", Coll::Alltoallv, Bus::Spread, false, false,
       {"gloo-ub-pairwise"}},
  };
  return v;
}

const char kUsage[] =
    "Usage: crlaunch -n P gloo_bench --store DIR [options]\n"
    "\n"
    "Times Gloo collectives in the conventions of nccl-tests and crbench\n"
    "(float, sum), over Gloo's TCP transport on 127.0.0.1. Rank 0 prints\n"
    "one row per (size, schedule).\n"
    "\n"
    "Options:\n"
    "  -c, --coll COLL      allreduce (default), reduce_scatter, allgather,\n"
    "                       alltoall, bcast, gather, scatter, allgatherv,\n"
    "                       alltoallv (Gloo has no scan)\n"
    "  -s, --schedule S     a Gloo algorithm, a comma-separated list, or\n"
    "                       all (default):\n"
    "                         allreduce: gloo-ring, gloo-ring-chunked,\n"
    "                           gloo-halving-doubling, gloo-bcube (the\n"
    "                           algorithm classes), gloo-ub-ring,\n"
    "                           gloo-ub-bcube (gloo::allreduce)\n"
    "                         reduce_scatter: gloo-halving-doubling\n"
    "                         allgather: gloo-ring (AllgatherRing),\n"
    "                           gloo-ub-ring (gloo::allgather)\n"
    "                         alltoall: gloo-ub-pairwise (gloo::alltoall)\n"
    "                         bcast: gloo-one-to-all (BroadcastOneToAll),\n"
    "                           gloo-ub-tree (gloo::broadcast)\n"
    "                         gather: gloo-ub-linear (gloo::gather)\n"
    "                         scatter: gloo-ub-linear (gloo::scatter)\n"
    "                         allgatherv: gloo-ub-ring (gloo::allgatherv)\n"
    "                         alltoallv: gloo-ub-pairwise (gloo::alltoallv)\n"
    "  -b, --minbytes N     smallest size (default 32M); K, M, G suffixes\n"
    "  -e, --maxbytes N     largest size (default: MIN)\n"
    "  -f, --stepfactor F   multiply the size by F (>= 2) each step (2)\n"
    "  -i, --stepbytes N    add N bytes each step instead\n"
    "  -n, --iters N        timed repetitions per row (default 20)\n"
    "  -w, --warmup_iters N untimed calls per row first (default 5)\n"
    "  -r, --root R         root of bcast, gather, scatter (default 0)\n"
    "  -t, --budget SEC     cut the repetitions of a row to about SEC\n"
    "                       seconds, judged from the warm-up (at least 3)\n"
    "      --store DIR      FileStore directory for the rendezvous\n"
    "                       (required; or GLOO_BENCH_STORE)\n"
    "      --prefix STR     key prefix in the store (default\n"
    "                       CRNET_RENDEZVOUS, else gloo_bench)\n"
    "      --timeout SEC    Gloo's own timeout per operation (default 600)\n"
    "      --no-copy        in-place algorithms: leave the copy of the send\n"
    "                       buffer out of the timed call\n"
    "      --check          check every row's result (one more call)\n"
    "      --json           one JSON object per row, as crbench --json,\n"
    "                       plus \"lib\": \"gloo\"\n"
    "      --p2p latency|bw point-to-point between ranks 0 and 1 instead\n"
    "                       (unbound buffers' send/recv), as crbench --p2p:\n"
    "                       half a ping-pong round trip (us), or windows of\n"
    "                       64 sends (MB/s = 10^6 B/s); OSU's counts unless\n"
    "                       -n, -w; sizes 0 (1 for bw) to 4M by 2 unless -b,\n"
    "                       -e, -f\n"
    "  -h, --help           print this text and exit\n"
    "\n"
    "Exit status: 0 right (or unchecked), 1 a wrong result or a failure,\n"
    "2 bad usage.\n";

struct Options {
  const CollDesc *coll = &colls()[0];
  std::vector<std::string> schedules;
  size_t min_bytes = size_t{32} << 20, max_bytes = 0, factor = 2, step = 0;
  int iters = 20, warmup = 5, root = 0;
  double budget = 0, timeout = 600;
  std::string store, prefix;
  bool no_copy = false, check = false, json = false, help = false;
  P2p p2p = P2p::None;
  bool have_iters = false, have_warmup = false; // -n, -w given
};

struct Layout {
  size_t count = 0, send_elems = 0, recv_elems = 0, bytes = 0;
};

bool parse_size(const char *s, size_t *out) {
  char *end;
  unsigned long long mul = 1;
  if (s[0] == '\0' || s[0] == '-')
    return false;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s)
    return false;
  switch (*end) {
  case 'K': case 'k': mul = 1ULL << 10; end++; break;
  case 'M': case 'm': mul = 1ULL << 20; end++; break;
  case 'G': case 'g': mul = 1ULL << 30; end++; break;
  default: break;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end != '\0' || v > SIZE_MAX / mul)
    return false;
  *out = static_cast<size_t>(v * mul);
  return true;
}

bool parse_int(const char *s, int lo, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > 1000000000L)
    return false;
  *out = static_cast<int>(v);
  return true;
}

bool parse_seconds(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v > 0))
    return false;
  *out = v;
  return true;
}

int parse_options(int argc, char **argv, Options *o, bool speak) {
  enum { OPT_STORE = 256, OPT_PREFIX, OPT_TIMEOUT, OPT_NOCOPY, OPT_CHECK,
         OPT_JSON, OPT_P2P };
  static const struct option longopts[] = {
      {"coll", required_argument, nullptr, 'c'},
      {"schedule", required_argument, nullptr, 's'},
      {"minbytes", required_argument, nullptr, 'b'},
      {"maxbytes", required_argument, nullptr, 'e'},
      {"stepfactor", required_argument, nullptr, 'f'},
      {"stepbytes", required_argument, nullptr, 'i'},
      {"iters", required_argument, nullptr, 'n'},
      {"warmup_iters", required_argument, nullptr, 'w'},
      {"root", required_argument, nullptr, 'r'},
      {"budget", required_argument, nullptr, 't'},
      {"store", required_argument, nullptr, OPT_STORE},
      {"prefix", required_argument, nullptr, OPT_PREFIX},
      {"timeout", required_argument, nullptr, OPT_TIMEOUT},
      {"no-copy", no_argument, nullptr, OPT_NOCOPY},
      {"check", no_argument, nullptr, OPT_CHECK},
      {"json", no_argument, nullptr, OPT_JSON},
      {"p2p", required_argument, nullptr, OPT_P2P},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0},
  };
  bool have_max = false, have_min = false;
  std::string sched = "all";
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":c:s:b:e:f:i:n:w:r:t:h", longopts,
                          nullptr)) != -1) {
    const char *bad = nullptr;
    switch (c) {
    case 'c': {
      const CollDesc *found = nullptr;
      for (const auto &d : colls())
        if (std::strcmp(optarg, d.name) == 0)
          found = &d;
      if (found != nullptr)
        o->coll = found;
      else if (std::strcmp(optarg, "scan") == 0)
        bad = "Gloo has no scan";
      else
        bad = "unknown collective";
      break;
    }
    case 's':
      sched = optarg;
      break;
    case 'b':
      if (!parse_size(optarg, &o->min_bytes))
        bad = "bad size";
      have_min = true;
      break;
    case 'e':
      if (!parse_size(optarg, &o->max_bytes))
        bad = "bad size";
      have_max = true;
      break;
    case 'f': {
      int f;
      if (!parse_int(optarg, 2, &f)) {
        bad = "bad factor (an integer >= 2)";
      } else {
        o->factor = static_cast<size_t>(f);
        o->step = 0;
      }
      break;
    }
    case 'i':
      if (!parse_size(optarg, &o->step) || o->step == 0)
        bad = "bad step";
      else
        o->factor = 0;
      break;
    case 'n':
      if (!parse_int(optarg, 1, &o->iters))
        bad = "bad repetition count";
      o->have_iters = true;
      break;
    case 'w':
      if (!parse_int(optarg, 0, &o->warmup))
        bad = "bad warm-up count";
      o->have_warmup = true;
      break;
    case 'r':
      if (!parse_int(optarg, 0, &o->root))
        bad = "bad root";
      break;
    case 't':
      if (!parse_seconds(optarg, &o->budget))
        bad = "bad budget (seconds > 0)";
      break;
    case OPT_STORE:
      o->store = optarg;
      break;
    case OPT_PREFIX:
      o->prefix = optarg;
      break;
    case OPT_TIMEOUT:
      if (!parse_seconds(optarg, &o->timeout))
        bad = "bad timeout (seconds > 0)";
      break;
    case OPT_NOCOPY:
      o->no_copy = true;
      break;
    case OPT_CHECK:
      o->check = true;
      break;
    case OPT_JSON:
      o->json = true;
      break;
    case OPT_P2P:
      if (std::strcmp(optarg, "latency") == 0)
        o->p2p = P2p::Latency;
      else if (std::strcmp(optarg, "bw") == 0)
        o->p2p = P2p::Bw;
      else
        bad = "bad --p2p (latency or bw)";
      break;
    case 'h':
      o->help = true;
      break;
    case ':':
      bad = "missing argument";
      break;
    default:
      bad = "unknown option";
      break;
    }
    if (bad != nullptr) {
      if (speak)
        std::fprintf(stderr, "%s: %s: %s (%s -h for help)\n", kProg,
                     optind > 1 ? argv[optind - 1] : "", bad, kProg);
      return kExitUsage;
    }
  }
  if (o->help)
    return 0;
  if (optind < argc) {
    if (speak)
      std::fprintf(stderr, "%s: unexpected argument '%s'\n", kProg,
                   argv[optind]);
    return kExitUsage;
  }
  if (o->p2p != P2p::None) {
    // crbench --p2p's (OSU's) sweep unless -b, -e say otherwise.
    if (!have_min)
      o->min_bytes = o->p2p == P2p::Latency ? 0 : 1;
    if (!have_max)
      o->max_bytes = size_t{4} << 20;
    have_max = true;
    if (o->check) {
      if (speak)
        std::fprintf(stderr, "%s: --check is not for --p2p\n", kProg);
      return kExitUsage;
    }
  }
  if (!have_max)
    o->max_bytes = o->min_bytes;
  if (o->max_bytes < o->min_bytes) {
    if (speak)
      std::fprintf(stderr, "%s: -e is smaller than -b\n", kProg);
    return kExitUsage;
  }
  if (o->store.empty() && std::getenv("GLOO_BENCH_STORE") != nullptr)
    o->store = std::getenv("GLOO_BENCH_STORE");
  if (o->store.empty()) {
    if (speak)
      std::fprintf(stderr, "%s: --store DIR is required\n", kProg);
    return kExitUsage;
  }
  if (o->prefix.empty()) {
    const char *r = std::getenv("CRNET_RENDEZVOUS");
    o->prefix = r != nullptr ? r : "gloo_bench";
  }
  if (sched == "all") {
    o->schedules = o->coll->schedules;
  } else {
    size_t pos = 0;
    for (;;) {
      size_t comma = sched.find(',', pos);
      std::string name = sched.substr(pos, comma == std::string::npos
                                               ? std::string::npos
                                               : comma - pos);
      if (std::find(o->coll->schedules.begin(), o->coll->schedules.end(),
                    name) == o->coll->schedules.end()) {
        if (speak)
          std::fprintf(stderr, "%s: schedule '%s' cannot do %s\n", kProg,
                       name.c_str(), o->coll->name);
        return kExitUsage;
      }
      if (std::find(o->schedules.begin(), o->schedules.end(), name) ==
          o->schedules.end())
        o->schedules.push_back(name);
      if (comma == std::string::npos)
        break;
      pos = comma + 1;
    }
  }
  return 0;
}

bool env_int(const char *name, int *out) {
  const char *s = std::getenv(name);
  return s != nullptr && parse_int(s, 0, out);
}

// Rank and size from the launcher's environment.
bool rank_and_size(int *rank, int *size) {
  static const char *const pairs[][2] = {
      {"CRNET_RANK", "CRNET_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
  };
  for (const auto &p : pairs)
    if (env_int(p[0], rank) && env_int(p[1], size) && *size >= 1 &&
        *rank < *size)
      return true;
  return false;
}

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Reduction input of rank r at index i (0..3) and moved data (positive),
// both exact in float; the same patterns as mpi_bench.
float red_in(int r, size_t i) {
  return static_cast<float>((i * 7u + static_cast<size_t>(r) * 13u) % 4u);
}

float mov_in(int r, size_t i) {
  return static_cast<float>((static_cast<size_t>(r) * 4099u + i) % 8388593u +
                            1u);
}

float red_sum(int lo, int hi, size_t i) {
  float s = 0;
  for (int r = lo; r < hi; r++)
    s += red_in(r, i);
  return s;
}

template <typename T>
void max_fn(void *c, const void *a, const void *b, size_t n) {
  T *out = static_cast<T *>(c);
  const T *x = static_cast<const T *>(a), *y = static_cast<const T *>(b);
  for (size_t i = 0; i < n; i++)
    out[i] = std::max(x[i], y[i]);
}

template <typename T>
void sum_fn(void *c, const void *a, const void *b, size_t n) {
  T *out = static_cast<T *>(c);
  const T *x = static_cast<const T *>(a), *y = static_cast<const T *>(b);
  for (size_t i = 0; i < n; i++)
    out[i] = x[i] + y[i];
}

class Bench {
 public:
  Bench(const Options &o, std::shared_ptr<gloo::Context> ctx)
      : o_(o), ctx_(std::move(ctx)), rank_(ctx_->rank), p_(ctx_->size) {
    const char *c = std::getenv("GLOO_BENCH_CORRUPT");
    if (c != nullptr)
      corrupt_ = std::atoi(c);
  }

  int run();
  int run_p2p();

 private:
  Layout layout_of(size_t size) const;
  double bus_factor() const;
  void fill_inputs(const Layout &l);
  uint64_t count_wrong(const Layout &l) const;
  std::function<void()> make_call(const std::string &sched, const Layout &l,
                                  std::function<void()> *prep);
  void barrier();
  template <typename T>
  void allreduce_small(T *v, size_t n, gloo::AllreduceOptions::Func fn);
  void run_row(const std::string &sched, const Layout &l);
  void p2p_step(gloo::transport::UnboundBuffer *s,
                gloo::transport::UnboundBuffer *r,
                gloo::transport::UnboundBuffer *ack);
  double p2p_size(char *s, char *r, size_t bytes, int *iters_run);

  const Options &o_;
  std::shared_ptr<gloo::Context> ctx_;
  int rank_, p_;
  std::vector<float> send_, recv_;
  std::vector<double> times_;
  uint32_t tag_ = 1;
  bool any_wrong_ = false;
  int corrupt_ = -1; // GLOO_BENCH_CORRUPT: this rank spoils a checked result
};

Layout Bench::layout_of(size_t size) const {
  Layout l;
  size_t ts = sizeof(float), p = static_cast<size_t>(p_);
  switch (o_.coll->id) {
  case Coll::Allreduce:
  case Coll::Bcast:
    l.count = size / ts;
    l.send_elems = l.recv_elems = l.count;
    l.bytes = l.count * ts;
    break;
  case Coll::ReduceScatter:
    l.count = size / ts / p;
    l.send_elems = l.count * p;
    l.recv_elems = l.count;
    l.bytes = l.send_elems * ts;
    break;
  case Coll::Allgather:
  case Coll::Allgatherv:
  case Coll::Gather:
    // gather: the root receives size bytes (every rank has the buffer, and
    // at the others it must stay preset).
    l.count = size / ts / p;
    l.send_elems = l.count;
    l.recv_elems = l.count * p;
    l.bytes = l.recv_elems * ts;
    break;
  case Coll::Scatter:
    l.count = size / ts / p;
    l.send_elems = l.count * p;
    l.recv_elems = l.count;
    l.bytes = l.send_elems * ts;
    break;
  case Coll::Alltoall:
  case Coll::Alltoallv:
    l.count = size / ts / p;
    l.send_elems = l.recv_elems = l.count * p;
    l.bytes = l.send_elems * ts;
    break;
  }
  return l;
}

double Bench::bus_factor() const {
  double p = p_;
  switch (o_.coll->factor) {
  case Bus::Allreduce:
    return 2.0 * (p - 1) / p;
  case Bus::Spread:
    return (p - 1) / p;
  case Bus::One:
    break;
  }
  return 1.0;
}

void Bench::fill_inputs(const Layout &l) {
  for (size_t i = 0; i < l.send_elems; i++)
    send_[i] = o_.coll->reduces ? red_in(rank_, i) : mov_in(rank_, i);
  // The in-place reduce-scatter works on the whole vector in recv_.
  size_t n = o_.coll->id == Coll::ReduceScatter ? l.send_elems : l.recv_elems;
  for (size_t i = 0; i < n; i++)
    recv_[i] = o_.coll->id == Coll::Bcast && rank_ == o_.root
                   ? mov_in(rank_, i)
                   : kPreset;
}

uint64_t Bench::count_wrong(const Layout &l) const {
  uint64_t wrong = 0;
  size_t n = l.count, p = static_cast<size_t>(p_);
  switch (o_.coll->id) {
  case Coll::Allreduce:
    for (size_t i = 0; i < n; i++)
      wrong += recv_[i] != red_sum(0, p_, i);
    break;
  case Coll::ReduceScatter:
    for (size_t i = 0; i < n; i++)
      wrong += recv_[i] != red_sum(0, p_, static_cast<size_t>(rank_) * n + i);
    break;
  case Coll::Allgather:
  case Coll::Allgatherv:
    for (size_t j = 0; j < p; j++)
      for (size_t i = 0; i < n; i++)
        wrong += recv_[j * n + i] != mov_in(static_cast<int>(j), i);
    break;
  case Coll::Gather:
    // The root holds every rank's block; the others' buffers stay preset.
    for (size_t j = 0; j < p; j++)
      for (size_t i = 0; i < n; i++)
        wrong += recv_[j * n + i] !=
                 (rank_ == o_.root ? mov_in(static_cast<int>(j), i) : kPreset);
    break;
  case Coll::Scatter:
    for (size_t i = 0; i < n; i++)
      wrong += recv_[i] != mov_in(o_.root, static_cast<size_t>(rank_) * n + i);
    break;
  case Coll::Alltoall:
  case Coll::Alltoallv:
    for (size_t j = 0; j < p; j++)
      for (size_t i = 0; i < n; i++)
        wrong += recv_[j * n + i] !=
                 mov_in(static_cast<int>(j), static_cast<size_t>(rank_) * n + i);
    break;
  case Coll::Bcast:
    for (size_t i = 0; i < n; i++)
      wrong += recv_[i] != mov_in(o_.root, i);
    break;
  }
  // The send buffer must come back unchanged.
  for (size_t i = 0; i < l.send_elems; i++)
    wrong += send_[i] != (o_.coll->reduces ? red_in(rank_, i) : mov_in(rank_, i));
  return wrong;
}

void Bench::barrier() {
  gloo::BarrierOptions opts(ctx_);
  opts.setTag(tag_++);
  gloo::barrier(opts);
}

template <typename T>
void Bench::allreduce_small(T *v, size_t n, gloo::AllreduceOptions::Func fn) {
  gloo::AllreduceOptions opts(ctx_);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setOutput(v, n);
  opts.setReduceFunction(fn);
  opts.setTag(tag_++);
  gloo::allreduce(opts);
}

// Builds the call of one schedule on the current buffers. *prep, when set,
// must run before each call outside the timing (the copy, with --no-copy).
std::function<void()> Bench::make_call(const std::string &s, const Layout &l,
                                       std::function<void()> *prep) {
  float *send = send_.data(), *recv = recv_.data();
  const int count = static_cast<int>(l.count);
  const size_t copy_bytes = l.send_elems * sizeof(float);
  auto ctx = ctx_;
  auto in_place = [this, prep, send, recv,
                   copy_bytes](std::shared_ptr<gloo::Algorithm> alg) {
    auto copy = [send, recv, copy_bytes] { std::memcpy(recv, send, copy_bytes); };
    if (o_.no_copy) {
      *prep = copy;
      return std::function<void()>([alg] { alg->run(); });
    }
    return std::function<void()>([alg, copy] {
      copy();
      alg->run();
    });
  };
  *prep = nullptr;
  switch (o_.coll->id) {
  case Coll::Allreduce: {
    std::vector<float *> ptrs{recv};
    if (s == "gloo-ring")
      return in_place(std::make_shared<gloo::AllreduceRing<float>>(ctx, ptrs, count));
    if (s == "gloo-ring-chunked")
      return in_place(
          std::make_shared<gloo::AllreduceRingChunked<float>>(ctx, ptrs, count));
    if (s == "gloo-halving-doubling")
      return in_place(
          std::make_shared<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, count));
    if (s == "gloo-bcube")
      return in_place(std::make_shared<gloo::AllreduceBcube<float>>(ctx, ptrs, count));
    auto algo = s == "gloo-ub-ring" ? gloo::AllreduceOptions::Algorithm::RING
                                    : gloo::AllreduceOptions::Algorithm::BCUBE;
    return [this, ctx, send, recv, count, algo] {
      gloo::AllreduceOptions opts(ctx);
      opts.setAlgorithm(algo);
      opts.setInput(send, static_cast<size_t>(count));
      opts.setOutput(recv, static_cast<size_t>(count));
      opts.setReduceFunction(sum_fn<float>);
      opts.setTag(tag_++);
      gloo::allreduce(opts);
    };
  }
  case Coll::ReduceScatter: {
    std::vector<int> recv_elems(static_cast<size_t>(p_), count);
    return in_place(std::make_shared<gloo::ReduceScatterHalvingDoubling<float>>(
        ctx, std::vector<float *>{recv}, static_cast<int>(l.send_elems),
        recv_elems));
  }
  case Coll::Allgather:
    if (s == "gloo-ring") {
      auto alg = std::make_shared<gloo::AllgatherRing<float>>(
          ctx, std::vector<const float *>{send}, recv, count);
      return [alg] { alg->run(); };
    }
    return [this, ctx, send, recv, count] {
      gloo::AllgatherOptions opts(ctx);
      opts.setInput(send, static_cast<size_t>(count));
      opts.setOutput(recv, static_cast<size_t>(count) * static_cast<size_t>(p_));
      opts.setTag(tag_++);
      gloo::allgather(opts);
    };
  case Coll::Alltoall:
    return [this, ctx, send, recv, l] {
      gloo::AlltoallOptions opts(ctx);
      opts.setInput(send, l.send_elems);
      opts.setOutput(recv, l.recv_elems);
      opts.setTag(tag_++);
      gloo::alltoall(opts);
    };
  case Coll::Gather:
    return [this, ctx, send, recv, l] {
      gloo::GatherOptions opts(ctx);
      opts.setInput(send, l.count);
      if (rank_ == o_.root)
        opts.setOutput(recv, l.recv_elems);
      opts.setRoot(o_.root);
      opts.setTag(tag_++);
      gloo::gather(opts);
    };
  case Coll::Scatter: {
    // The root's p blocks, set once per row.
    std::vector<float *> blocks;
    if (rank_ == o_.root)
      for (int d = 0; d < p_; d++)
        blocks.push_back(send + static_cast<size_t>(d) * l.count);
    return [this, ctx, blocks, recv, l] {
      gloo::ScatterOptions opts(ctx);
      if (rank_ == o_.root)
        opts.setInputs(blocks, l.count);
      opts.setOutput(recv, l.count);
      opts.setRoot(o_.root);
      opts.setTag(tag_++);
      gloo::scatter(opts);
    };
  }
  case Coll::Allgatherv: {
    // Equal counts through the v-interface, as crbench's, set once per row.
    std::vector<size_t> counts(static_cast<size_t>(p_), l.count);
    return [this, ctx, send, recv, l, counts] {
      gloo::AllgathervOptions opts(ctx);
      opts.setInput(send, l.count);
      opts.setOutput(recv, counts);
      opts.setTag(tag_++);
      gloo::allgatherv(opts);
    };
  }
  case Coll::Alltoallv: {
    std::vector<int64_t> counts(static_cast<size_t>(p_),
                                static_cast<int64_t>(l.count));
    return [this, ctx, send, recv, counts] {
      gloo::AlltoallvOptions opts(ctx);
      opts.setInput(send, counts);
      opts.setOutput(recv, counts);
      opts.setTag(tag_++);
      gloo::alltoallv(opts);
    };
  }
  case Coll::Bcast:
    if (s == "gloo-one-to-all") {
      auto alg = std::make_shared<gloo::BroadcastOneToAll<float>>(
          ctx, std::vector<float *>{recv}, l.count, o_.root);
      return [alg] { alg->run(); };
    }
    return [this, ctx, recv, l] {
      gloo::BroadcastOptions opts(ctx);
      opts.setOutput(recv, l.count);
      opts.setRoot(o_.root);
      opts.setTag(tag_++);
      gloo::broadcast(opts);
    };
  }
  return nullptr;
}

void Bench::run_row(const std::string &sched, const Layout &l) {
  std::function<void()> prep;
  std::function<void()> call = make_call(sched, l, &prep);
  int iters = o_.iters;
  uint64_t wrong = 0;

  barrier();
  double t0 = now_s();
  for (int k = 0; k < o_.warmup; k++) {
    if (prep)
      prep();
    call();
  }
  double warm = now_s() - t0;
  if (o_.budget > 0 && o_.warmup > 0) {
    allreduce_small(&warm, 1, max_fn<double>);
    double per_call = warm / o_.warmup;
    if (per_call * iters > o_.budget) {
      int cut = static_cast<int>(o_.budget / per_call);
      int floor_iters = std::min(iters, kMinIters);
      iters = std::max(cut, floor_iters);
    }
  }
  for (int k = 0; k < iters; k++) {
    if (prep)
      prep();
    barrier();
    t0 = now_s();
    call();
    times_[static_cast<size_t>(k)] = now_s() - t0;
  }
  if (o_.check) {
    fill_inputs(l);
    if (prep)
      prep();
    // Gloo's algorithm classes write straight into a peer's registered
    // buffer: nobody may send before everybody has refilled.
    barrier();
    call();
    if (corrupt_ == rank_ && l.recv_elems > 0)
      recv_[l.recv_elems - 1] += 0.5f; // self-test of the check
    wrong = count_wrong(l);
    allreduce_small(&wrong, 1, sum_fn<uint64_t>);
    if (wrong != 0)
      any_wrong_ = true;
  }
  allreduce_small(times_.data(), static_cast<size_t>(iters), max_fn<double>);
  std::sort(times_.begin(), times_.begin() + iters);
  size_t h = static_cast<size_t>(iters / 2);
  double t = iters % 2 ? times_[h] : (times_[h - 1] + times_[h]) / 2;

  if (rank_ != 0)
    return;
  double us = t * 1e6;
  double algbw = t > 0 ? static_cast<double>(l.bytes) / t / 1e9 : 0;
  double busbw = algbw * bus_factor();
  const char *op = o_.coll->reduces ? "sum" : "none";
  int root = o_.coll->rooted ? o_.root : -1;
  if (o_.json) {
    std::printf("{\"coll\": \"%s\", \"size\": %zu, \"count\": %zu, \"type\": "
                "\"float\", \"op\": \"%s\", \"schedule\": \"%s\", \"root\": %d, "
                "\"p\": %d, \"time_us\": %.9g, \"algbw_gbps\": %.9g, "
                "\"busbw_gbps\": %.9g, ",
                o_.coll->name, l.bytes, l.count, op, sched.c_str(), root, p_, us,
                algbw, busbw);
    if (o_.check)
      std::printf("\"wrong\": %" PRIu64, wrong);
    else
      std::printf("\"wrong\": null");
    std::printf(", \"iters\": %d, \"lib\": \"gloo\"}\n", iters);
  } else {
    char w[32];
    if (o_.check)
      std::snprintf(w, sizeof w, "%" PRIu64, wrong);
    else
      std::snprintf(w, sizeof w, "N/A");
    std::printf("  %10zu  %12zu  %6s  %5s  %22s  %4d  %10.2f  %8.3f  %8.3f  %6s"
                "  %5d\n",
                l.bytes, l.count, "float", op, sched.c_str(), root, us, algbw,
                busbw, w, iters);
  }
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------
// Point-to-point (--p2p), as crbench --p2p and mpi_bench --p2p

void wait_send(gloo::transport::UnboundBuffer *b, std::chrono::milliseconds t) {
  if (!b->waitSend(t))
    throw std::runtime_error("send aborted");
}

void wait_recv(gloo::transport::UnboundBuffer *b, std::chrono::milliseconds t) {
  if (!b->waitRecv(t))
    throw std::runtime_error("receive aborted");
}

// One iteration between ranks 0 and 1: a ping-pong round trip (latency),
// or a window of kWindow messages and the 4-byte ack (bw).
void Bench::p2p_step(gloo::transport::UnboundBuffer *s,
                     gloo::transport::UnboundBuffer *r,
                     gloo::transport::UnboundBuffer *ack) {
  const auto t = ctx_->getTimeout();
  const uint64_t data = gloo::Slot::build(kP2pSlotPrefix, 1);
  const uint64_t ack_slot = gloo::Slot::build(kP2pSlotPrefix, 2);
  const int peer = 1 - rank_;
  if (o_.p2p == P2p::Latency) {
    if (rank_ == 0) {
      s->send(peer, data);
      wait_send(s, t);
      r->recv(peer, data);
      wait_recv(r, t);
    } else {
      r->recv(peer, data);
      wait_recv(r, t);
      s->send(peer, data);
      wait_send(s, t);
    }
    return;
  }
  if (rank_ == 0) {
    for (int k = 0; k < kWindow; k++)
      s->send(peer, data);
    for (int k = 0; k < kWindow; k++)
      wait_send(s, t);
    ack->recv(peer, ack_slot);
    wait_recv(ack, t);
  } else {
    for (int k = 0; k < kWindow; k++)
      r->recv(peer, data);
    for (int k = 0; k < kWindow; k++)
      wait_recv(r, t);
    ack->send(peer, ack_slot);
    wait_send(ack, t);
  }
}

// One size: warm-up, the budget's cut (rank 0 decides from its warm-up and
// tells rank 1), the timed iterations. Returns rank 0's figure: seconds of
// half a round trip, or bytes per second. The unbound buffers are made
// once per size, outside the timing.
double Bench::p2p_size(char *s, char *r, size_t bytes, int *iters_run) {
  bool large = bytes > kP2pLarge;
  int iters, warmup;
  if (o_.p2p == P2p::Latency) {
    iters = large ? 1000 : 10000;
    warmup = large ? 10 : 100;
  } else {
    iters = large ? 20 : 100;
    warmup = large ? 2 : 10;
  }
  if (o_.have_iters)
    iters = o_.iters;
  if (o_.have_warmup)
    warmup = o_.warmup;
  uint32_t ack = 0;
  int32_t budget_iters = 0;
  auto sb = ctx_->createUnboundBuffer(s, bytes);
  auto rb = ctx_->createUnboundBuffer(r, bytes);
  auto ab = ctx_->createUnboundBuffer(&ack, sizeof ack);
  auto bb = ctx_->createUnboundBuffer(&budget_iters, sizeof budget_iters);
  double t0 = now_s();
  for (int i = 0; i < warmup; i++)
    p2p_step(sb.get(), rb.get(), ab.get());
  if (o_.budget > 0 && warmup > 0) {
    const uint64_t slot = gloo::Slot::build(kP2pSlotPrefix, 3);
    if (rank_ == 0) {
      double per = (now_s() - t0) / warmup;
      if (per * iters > o_.budget) {
        int cut = static_cast<int>(o_.budget / per);
        iters = std::max(cut, std::min(iters, kMinIters));
      }
      budget_iters = iters;
      bb->send(1, slot);
      wait_send(bb.get(), ctx_->getTimeout());
    } else {
      bb->recv(0, slot);
      wait_recv(bb.get(), ctx_->getTimeout());
      iters = budget_iters;
    }
  }
  t0 = now_s();
  for (int i = 0; i < iters; i++)
    p2p_step(sb.get(), rb.get(), ab.get());
  t0 = now_s() - t0;
  *iters_run = iters;
  if (o_.p2p == P2p::Latency)
    return t0 / (2.0 * iters);
  return t0 > 0 ? static_cast<double>(bytes) * kWindow * iters / t0 : 0;
}

int Bench::run_p2p() {
  const bool lat = o_.p2p == P2p::Latency;
  if (p_ < 2) {
    if (rank_ == 0)
      std::fprintf(stderr, "%s: --p2p needs 2 ranks or more (ranks 0 and 1 "
                           "talk, the others wait)\n", kProg);
    return kExitUsage;
  }
  const size_t max = std::max<size_t>(o_.max_bytes, 4);
  // Page aligned, touched before timing, as crbench's.
  auto alloc = [max] {
    void *p = nullptr;
    if (posix_memalign(&p, 4096, max) != 0)
      throw std::bad_alloc();
    return std::unique_ptr<char, decltype(&std::free)>(static_cast<char *>(p),
                                                       &std::free);
  };
  auto s = alloc(), r = alloc();
  std::memset(s.get(), 'a', max);
  std::memset(r.get(), 'b', max);
  if (rank_ == 0 && !o_.json) {
    std::printf("# %s --p2p %s: ranks 0 and 1 of %d, Gloo %d.%d.%d unbound "
                "buffers over TCP 127.0.0.1 (OSU %s conventions)\n"
                "# %-10s %s\n",
                kProg, lat ? "latency" : "bw", p_, GLOO_VERSION_MAJOR,
                GLOO_VERSION_MINOR, GLOO_VERSION_PATCH,
                lat ? "osu_latency" : "osu_bw", "Size",
                lat ? "Latency (us)" : "Bandwidth (MB/s)");
    std::fflush(stdout);
  }
  for (size_t bytes = o_.min_bytes; bytes <= o_.max_bytes;) {
    int iters = 0;
    double v = 0;
    barrier();
    if (rank_ < 2)
      v = p2p_size(s.get(), r.get(), bytes, &iters);
    if (rank_ == 0) {
      if (o_.json)
        std::printf("{\"mode\": \"%s\", \"bytes\": %zu, \"iters\": %d, "
                    "\"%s\": %.3f, \"lib\": \"gloo\"}\n",
                    lat ? "latency" : "bw", bytes, iters,
                    lat ? "latency_us" : "bandwidth_MBps",
                    lat ? v * 1e6 : v / 1e6);
      else
        std::printf("%-12zu %.2f\n", bytes, lat ? v * 1e6 : v / 1e6);
      std::fflush(stdout);
    }
    if (o_.factor == 0) {
      if (bytes > o_.max_bytes - o_.step)
        break;
      bytes += o_.step;
    } else if (bytes == 0) {
      bytes = 1;
    } else {
      if (bytes > o_.max_bytes / o_.factor)
        break;
      bytes *= o_.factor;
    }
  }
  barrier();
  return 0;
}

int Bench::run() {
  if (o_.p2p != P2p::None)
    return run_p2p();
  Layout big = layout_of(o_.max_bytes);
  if (big.count > static_cast<size_t>(INT32_MAX) ||
      big.send_elems > static_cast<size_t>(INT32_MAX)) {
    if (rank_ == 0)
      std::fprintf(stderr, "%s: %zu B is too large for Gloo's int counts\n",
                   kProg, o_.max_bytes);
    return kExitUsage;
  }
  send_.assign(std::max<size_t>(big.send_elems, 1), 0.0f);
  recv_.assign(std::max<size_t>(std::max(big.recv_elems, big.send_elems), 1),
               0.0f);
  times_.assign(static_cast<size_t>(o_.iters), 0.0);
  // AllreduceBcube (base 2) computes wrong sums unless p is a power of two.
  std::vector<std::string> scheds;
  for (const auto &sched : o_.schedules) {
    if (sched == "gloo-bcube" && (p_ & (p_ - 1)) != 0) {
      if (rank_ == 0)
        std::fprintf(stderr,
                     "%s: skipping gloo-bcube at p = %d: it needs a power "
                     "of two\n",
                     kProg, p_);
      continue;
    }
    scheds.push_back(sched);
  }
  if (rank_ == 0 && !o_.json) {
    std::printf("# %s: %s, p = %d, float sum, iters %d, warmup %d, check %s, "
                "Gloo %d.%d.%d over TCP 127.0.0.1\n#\n",
                kProg, o_.coll->name, p_, o_.iters, o_.warmup,
                o_.check ? "yes" : "no", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                GLOO_VERSION_PATCH);
    std::printf("# %10s  %12s  %6s  %5s  %22s  %4s  %10s  %8s  %8s  %6s  %5s\n",
                "size(B)", "count", "type", "redop", "schedule", "root",
                "time(us)", "algbw", "busbw", "#wrong", "iters");
    std::fflush(stdout);
  }
  for (size_t s = o_.min_bytes;;) {
    Layout l = layout_of(s);
    if (l.count == 0) {
      if (rank_ == 0)
        std::fprintf(stderr, "%s: skipping %zu B: no element per rank at p = %d\n",
                     kProg, s, p_);
    } else {
      fill_inputs(l);
      for (const auto &sched : scheds)
        run_row(sched, l);
    }
    if (o_.factor != 0) {
      if (s > o_.max_bytes / o_.factor)
        break;
      s *= o_.factor;
    } else {
      if (s > o_.max_bytes - o_.step)
        break;
      s += o_.step;
    }
    if (s == 0)
      break;
  }
  return any_wrong_ ? kExitWrong : 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  int rank = 0, size = 1;
  if (!rank_and_size(&rank, &size)) {
    rank = 0;
    size = 1;
  }
  int status = parse_options(argc, argv, &o, rank == 0);
  if (o.help) {
    if (rank == 0)
      std::fputs(kUsage, stdout);
    return 0;
  }
  if (status != 0)
    return status;
  if (o.p2p == P2p::None && o.coll->rooted && o.root >= size) {
    if (rank == 0)
      std::fprintf(stderr, "%s: root %d is not a rank (p = %d)\n", kProg,
                   o.root, size);
    return kExitUsage;
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    attr.ai_family = AF_INET;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(o.store);
    gloo::rendezvous::PrefixStore store(o.prefix, file_store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(std::chrono::milliseconds(
        static_cast<long long>(o.timeout * 1000)));
    ctx->connectFullMesh(store, dev);
    Bench b(o, ctx);
    return b.run();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s: rank %d: %s\n", kProg, rank, e.what());
    return kExitWrong;
  }
}
