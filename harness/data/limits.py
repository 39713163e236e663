"""The upper bound of every count a user can set (a ``harness.toml`` key, its flag, a command's option).

Far above real use, low enough that a typo (an extra digit, ``1e20``) is refused at once, naming the bound,
instead of a command that runs for ever or runs out of memory. Declared here, with no imports, so the
command line's options (whose module must not import the configuration's models: ``--help`` stays fast)
and the configuration's keys share one number each. docs/configuration.md lists them.
"""

from __future__ import annotations

from typing import Final

MAX_BLOCKS: Final = 10_000_000  # blocks of a corpus, of a load sweep's points: a synthetic block takes ~7 ms
MAX_LAWS_EXAMPLES: Final = 1_000_000  # examples per packing law: 100 take seconds; a million, hours
MAX_EVIDENCE_RUNS: Final = 64  # arrangements, repeats: each multiplies the packed lanes' device time
MAX_NEIGHBOUR_CONTROLS: Final = 64  # plain requests per shape and OP sent again to tell a leak from noise
MAX_CONCURRENCY: Final = 1024  # requests in flight to one server (the lanes', the load sweep's)
MAX_RAY_WORKERS: Final = 4096  # one per GPU of a cluster
MAX_RAY_SHARDS: Final = 100_000  # shards a corpus or capture is cut in
MAX_RAY_RETRIES: Final = 100  # restarts of a worker that died
MAX_SERVE_INSTANCES: Final = 256  # model instances of one served model (Triton's instance_group count)
MAX_SHARDS: Final = MAX_BLOCKS  # --shard i/n: more shards than blocks leaves shards without a block
MAX_STEP_SAMPLES: Final = 1_000_000  # a corpus's window step (62.5 s at 16 kHz): a recording is windows x step long
MAX_FRAMES: Final = 1_000_000  # frames a speaker needs in a window ([masks] min_active_frames)
