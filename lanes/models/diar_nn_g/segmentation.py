"""OP 0: a PyanNet-style segmentation network, as in pyannote segmentation-3.0."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lanes.models.diar_nn_g.config import SegmentationConfig
from lanes.models.diar_nn_g.init import FIXED_INIT_ATTR


class SincConv(nn.Module):
    """Learnable band-pass sinc filters (SincNet): each filter is two cut-off frequencies.

    Filters are rebuilt from their cut-offs on each call, as in SincNet; they do not depend
    on the batch, so a window's output cannot depend on its neighbours through them.
    """

    window_half: torch.Tensor  # buffers (register_buffer): declared, or mypy sees nn.Module.__getattr__'s union
    t_half: torch.Tensor

    def __init__(
        self,
        filters: int,
        kernel: int,
        stride: int,
        sample_rate: int,
        min_low_hz: float = 50.0,
        min_band_hz: float = 50.0,
    ) -> None:
        super().__init__()
        setattr(self, FIXED_INIT_ATTR, ("low_hz", "band_hz"))
        self.kernel, self.stride, self.sample_rate = kernel, stride, sample_rate
        self.min_low_hz, self.min_band_hz = min_low_hz, min_band_hz
        high = sample_rate / 2 - (min_low_hz + min_band_hz)
        mel = np.linspace(_to_mel(30.0), _to_mel(high), filters + 1)
        hz = _to_hz(mel)
        self.low_hz = nn.Parameter(torch.tensor(hz[:-1], dtype=torch.float32).view(-1, 1))
        self.band_hz = nn.Parameter(torch.tensor(np.diff(hz), dtype=torch.float32).view(-1, 1))
        half = kernel // 2
        n = np.arange(half, dtype=np.float64)
        window = 0.54 - 0.46 * np.cos(2 * math.pi * n / kernel)
        t = 2 * math.pi * np.arange(-half, 0, dtype=np.float64) / sample_rate
        self.register_buffer("window_half", torch.tensor(window, dtype=torch.float32))
        self.register_buffer("t_half", torch.tensor(t, dtype=torch.float32).view(1, -1))

    def filters(self) -> torch.Tensor:
        low = self.min_low_hz + torch.abs(self.low_hz)
        high = torch.clamp(low + self.min_band_hz + torch.abs(self.band_hz), self.min_low_hz, self.sample_rate / 2)
        band = (high - low)[:, 0]
        f_low = low @ self.t_half
        f_high = high @ self.t_half
        left = ((torch.sin(f_high) - torch.sin(f_low)) / (self.t_half / 2)) * self.window_half
        center = 2 * band.view(-1, 1)
        right = torch.flip(left, dims=[1])
        band_pass = torch.cat([left, center, right], dim=1) / (2 * band[:, None])
        return band_pass.view(-1, 1, self.kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv1d(x, self.filters(), stride=self.stride)


class SincNet(nn.Module):
    """pyannote's SincNet: instance-normalised waveform, sinc conv (abs), two Conv1d stages."""

    def __init__(self, cfg: SegmentationConfig, sample_rate: int) -> None:
        super().__init__()
        self.wav_norm = nn.InstanceNorm1d(1, affine=True)
        self.conv = nn.ModuleList(
            [
                SincConv(cfg.sinc_filters, cfg.sinc_kernel, cfg.sinc_stride, sample_rate),
                nn.Conv1d(cfg.sinc_filters, cfg.conv_channels, cfg.conv_kernel),
                nn.Conv1d(cfg.conv_channels, cfg.conv_channels, cfg.conv_kernel),
            ]
        )
        self.pool = nn.ModuleList([nn.MaxPool1d(cfg.pool, stride=cfg.pool) for _ in range(3)])
        self.norm = nn.ModuleList(
            [
                nn.InstanceNorm1d(cfg.sinc_filters, affine=True),
                nn.InstanceNorm1d(cfg.conv_channels, affine=True),
                nn.InstanceNorm1d(cfg.conv_channels, affine=True),
            ]
        )

    def forward(self, waveforms: torch.Tensor) -> torch.Tensor:
        x = self.wav_norm(waveforms)
        for i, (conv, pool, norm) in enumerate(zip(self.conv, self.pool, self.norm, strict=True)):
            x = conv(x)
            if i == 0:
                x = torch.abs(x)
            x = F.leaky_relu(norm(pool(x)))
        return x


class PyanNet(nn.Module):
    """[N, 1, samples] -> [N, frames, classes] powerset log-probabilities."""

    def __init__(self, cfg: SegmentationConfig, sample_rate: int, classes: int) -> None:
        super().__init__()
        self.sincnet = SincNet(cfg, sample_rate)
        self.lstm = nn.LSTM(
            cfg.conv_channels,
            cfg.lstm_hidden,
            num_layers=cfg.lstm_layers,
            bidirectional=True,
            batch_first=True,
            dropout=0.5 if cfg.lstm_layers > 1 else 0.0,
        )
        sizes = (2 * cfg.lstm_hidden, *cfg.linear)
        self.linear = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)])
        self.classifier = nn.Linear(sizes[-1], classes)

    def forward(self, waveforms: torch.Tensor) -> torch.Tensor:
        x = self.sincnet(waveforms).transpose(1, 2)
        x, _ = self.lstm(x)
        for layer in self.linear:
            x = F.leaky_relu(layer(x))
        return F.log_softmax(self.classifier(x), dim=-1)


def _to_mel(hz: float | np.ndarray) -> np.ndarray:
    return 2595 * np.log10(1 + np.asarray(hz) / 700)


def _to_hz(mel: np.ndarray) -> np.ndarray:
    return 700 * (10 ** (mel / 2595) - 1)
