"""Bring your own model, as a TorchScript file: ``harness ... --model my_model.pt``.

Run ``python examples/byo_torchscript.py out.pt`` to write a minimal scripted model that
follows the contract (lanes/models/torchscript_model.py): ``forward(span, offsets, valid, op,
weights, idx)`` on the raw wire tensors, and an exported ``geometry()``. Isolation is the
module's own job here: it reads VALID samples from each offset and zeros after them.
"""

from __future__ import annotations

import sys
from typing import Optional

import torch
from torch import nn


class TinyDiar(nn.Module):
    """``drift`` (a negative control, 0 by default) adds drift x (windows in the call) to every output:
    an answer that depends on the batch shape, which every packed shape must fail."""

    def __init__(self, drift: float = 0.0) -> None:
        super().__init__()
        self.drift = float(drift)
        self.window = 16_000
        self.frames = 50
        self.step = 320
        self.classes = 7
        self.dim = 8
        torch.manual_seed(0)
        self.frame_proj = nn.Linear(self.step, 16)
        self.classifier = nn.Linear(16, self.classes)
        self.embed = nn.Linear(16, self.dim)

    @torch.jit.export
    def geometry(self) -> dict[str, int]:
        return {
            "sample_rate": 16_000,
            "window_samples": self.window,
            "frames_per_window": self.frames,
            "frame_step": self.step,
            "speakers": 3,
            "max_simultaneous": 2,
            "embedding_dim": self.dim,
            "windows_per_block": 8,
        }

    def windows(self, span: torch.Tensor, offsets: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        n = offsets.shape[0]
        out = torch.zeros(n, self.window, dtype=span.dtype, device=span.device)
        for i in range(n):
            v = int(valid[i])
            if v > 0:
                start = int(offsets[i])
                out[i, :v] = span[start : start + v]  # VALID samples, zeros after: isolation
        return out

    def forward(
        self,
        span: torch.Tensor,
        offsets: torch.Tensor,
        valid: torch.Tensor,
        op: torch.Tensor,
        weights: Optional[torch.Tensor],  # noqa: UP045 (TorchScript reads Optional, not X | None)
        idx: Optional[torch.Tensor],  # noqa: UP045
    ) -> torch.Tensor:
        x = self.windows(span, offsets, valid)
        frames = x[:, : self.frames * self.step].reshape(x.shape[0], self.frames, self.step)
        h = torch.tanh(self.frame_proj(frames))  # [N, F, 16]
        if int(op[0]) == 0:
            out = torch.log_softmax(self.classifier(h), dim=-1)
        else:
            assert weights is not None and idx is not None
            w = weights.unsqueeze(-1)  # [R, F, 1]
            pooled = (h[idx.long()] * w).sum(dim=1) / (w.sum(dim=1) + 1e-8)
            out = self.embed(pooled)
        if self.drift != 0.0:
            out = out + self.drift * float(offsets.shape[0])
        return out


def build(path: str, drift: float = 0.0) -> str:
    torch.jit.script(TinyDiar(drift).eval()).save(path)
    return path


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else "tiny_diar.pt"))
