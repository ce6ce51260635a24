"""crnet: collective communication over authenticated TCP links, from Python.

A process joins the job with ``crnet.Comm()`` (from the environment that
``crlaunch`` sets, so ``crlaunch -n 4 python3 app.py`` just works; started
directly, a job of one) and calls collectives on buffers: NumPy arrays,
``array.array``, ``bytearray``, ``memoryview``, CPU torch tensors through
``.numpy()`` — anything with the buffer protocol, C-contiguous::

    import numpy as np
    import crnet

    with crnet.Comm() as comm:
        a = np.full(4, comm.rank, dtype=np.float32)
        comm.allreduce(a)                  # in place: every rank gets the sum
        b = np.empty(4 * comm.size, dtype=np.float32)
        comm.allgather(a, out=b)           # into out=

Calls: allreduce, reduce_scatter, allgather, alltoall, bcast, reduce, scan,
exscan, barrier, gather, scatter, allgatherv, alltoallv, send, recv,
sendrecv, and the nonblocking twins (iallreduce, ..., isend, irecv), which
return a ``Request`` (``wait()``, ``test()``, ``crnet.waitall``,
``crnet.waitany``). Comms: ``split(color, key)``, ``dup()``, ``close()``
(derived comms before the world comm), ``abort(code)``,
``set_schedule(coll, name)``, counters.

The element type comes from the buffer's format (int8..int64,
uint8..uint64, float16, float32, float64, bool, complex64/128), or
``dtype=`` names one ('bfloat16' from a 16-bit view, ...). Operators are
names ('sum', 'prod', 'min', 'max', 'band', 'bor', 'bxor', 'land', 'lor')
or constants (``crnet.SUM``, ...). Wrong buffers raise TypeError or
ValueError before anything is sent; crnet's errors raise ``crnet.Error``
subclasses (``PeerLost``, ``Timeout``, ``Mismatch``, ``Aborted``,
``AuthError``, ``Truncated``, ``Cancelled``, ``Revoked``, ``Unsupported``,
``InvalidArgument``,
``OutOfMemory``, ``NetworkError``) carrying the comm's explanation in
``errmsg`` and the code in ``code``. Every call that can wait releases the
GIL.

At interpreter exit, calls still in flight are completed (for at most
``crnet.exit_grace`` seconds, then the job is aborted) and comms still open
are closed, derived comms first.
"""

import atexit as _atexit

from . import _crnet
from ._crnet import (
    ANY_SOURCE,
    ANY_TAG,
    BAND,
    BFLOAT16,
    BOR,
    BXOR,
    BYTE,
    COLL_ALLGATHER,
    COLL_ALLREDUCE,
    COLL_ALLTOALL,
    COLL_ALLTOALLV,
    COLL_BARRIER,
    COLL_BCAST,
    COLL_GATHER,
    COLL_REDUCE,
    COLL_REDUCE_SCATTER,
    COLL_SCAN,
    COLL_SCATTER,
    CRNET_VERSION,
    EABORTED,
    EAGER_BYTES,
    EAUTH,
    ECANCELED,
    EREVOKED,
    EINVAL,
    EIO,
    EMISMATCH,
    ENOMEM,
    EPEER,
    ETIMEDOUT,
    ETRUNCATE,
    EUNSUPPORTED,
    FLOAT16,
    FLOAT32,
    FLOAT64,
    IN_PLACE,
    INT8,
    INT16,
    INT32,
    INT64,
    LAND,
    LOR,
    MAX,
    MIN,
    PROD,
    SUM,
    TAG_MAX,
    UINT8,
    UINT16,
    UINT32,
    UINT64,
    UNDEFINED,
    Aborted,
    AuthError,
    Cancelled,
    Comm,
    Error,
    InvalidArgument,
    Mismatch,
    NetworkError,
    OutOfMemory,
    PeerLost,
    Revoked,
    Request,
    Status,
    Timeout,
    Truncated,
    Unsupported,
    strerror,
    waitall,
    waitany,
)

__version__ = CRNET_VERSION

#: Seconds the exit hook lets calls still in flight complete before it
#: aborts the job (a receive whose message never comes, a collective some
#: rank never joins): the interpreter's exit never hangs on crnet.
exit_grace = 10.0


def _exit_hook():
    _crnet._shutdown(float(exit_grace))


_atexit.register(_exit_hook)

__all__ = [name for name in dir(_crnet) if not name.startswith("_")] + [
    "exit_grace"
]
