"""Honest numerics: models whose answers move by one ULP with where a window sits in its request.

Real kernels do this: a GEMM's last row block, another blocking for another position, another
algorithm for another batch size. A harness that refuses such a model in ``tolerance`` mode refuses
shapes that meet every tolerance the user set (a false reject); one that promotes it in ``bitwise``
mode promises bits it did not get. These controls are the null model (batch-invariant by construction,
so the golden and its floor are bitwise) with two deterministic one-ULP moves:

- ``later``: every window after the first block of a request, and every voiceprint row of such a
  window, one ULP up (a packed request's later slots are computed otherwise);
- ``copies``: every window whose audio an earlier window of the same request already had (the
  duplicates' second copy), and its voiceprint rows, one ULP up.

Spec: ``lanes.controls.ulp_controls:small`` (both moves), ``...:small?copies=false`` (slots only), ``...:full``.
In ``tolerance`` mode both are reported (warnings for slots and duplicates) and promoted; in ``bitwise``
and ``noise-floor`` mode they are refused, the cause "depends on slot / neighbours / duplicates".
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

from harness.data import ops
from harness.data.ops import Op
from lanes.models.null_model import NullModel, _config_geometry, window_keys


class UlpMovesModel(NullModel):
    """The null model whose later slots and repeated windows answer one ULP up (module doc)."""

    def __init__(self, label: str, seed: int, later: bool, copies: bool) -> None:
        super().__init__(_config_geometry(label), label, seed)
        self.later, self.copies = bool(later), bool(copies)
        self.fingerprint = hashlib.sha256(f"{self.fingerprint}|control:ulp-moves|{later}|{copies}".encode()).hexdigest()
        self.name = f"{self.name}-control-ulp-moves"

    def moved(self, request: Mapping[str, np.ndarray]) -> np.ndarray:
        """[N] bool: the windows of ``request`` that answer one ULP up."""
        offsets, valid = np.asarray(request[ops.OFFSETS]), np.asarray(request[ops.VALID])
        out = np.zeros(offsets.shape[0], dtype=bool)
        if self.later:
            out[self.geometry.windows_per_block :] = True
        if self.copies:
            keys = window_keys(np.asarray(request[ops.SPAN]), offsets, valid)
            seen: set[int] = set()
            for i, key in enumerate(keys.tolist()):
                if valid[i] > 0 and key in seen:
                    out[i] = True
                seen.add(key)
        return out

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        answer = super().infer(request)
        op = Op(int(np.asarray(request[ops.OP]).reshape(-1)[0]))
        moved = self.moved(request)
        out = answer[op.output_name].copy()
        rows = moved if op is Op.SEGMENTATION else moved[np.asarray(request[ops.IDX]).astype(np.int64)]
        out[rows] = np.nextafter(out[rows], np.float32(np.inf))
        return {op.output_name: out}


def small(seed: int = 0, device: str = "cpu", later: bool = True, copies: bool = True) -> UlpMovesModel:
    """The control at the small test geometry."""
    return UlpMovesModel("small", seed, later, copies)


def full(seed: int = 0, device: str = "cpu", later: bool = True, copies: bool = True) -> UlpMovesModel:
    """The control at the reference model's full geometry."""
    return UlpMovesModel("full", seed, later, copies)
