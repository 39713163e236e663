"""OP 1/2: a WeSpeaker ResNet34-style voiceprint network with weighted statistics pooling.

Two stages, on purpose: the trunk (fbank + ResNet) runs once per *window* of the request,
the head (weighted statistics pooling + Linear) once per *row* (window, speaker). One trunk
pass serves every WEIGHTS row of that window, as the engine expects.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lanes.models.diar_nn_g.config import VoiceprintConfig

_POOL_ROWS_PER_CHUNK = 64  # bounds the [rows, features, frames] gather on long packs


class Fbank(nn.Module):
    """Kaldi-style log-mel filterbank (25 ms Hamming frames, 10 ms hop, no dither) + mean norm."""

    window: torch.Tensor  # buffers (register_buffer): declared, or mypy sees nn.Module.__getattr__'s union
    mel: torch.Tensor

    def __init__(self, cfg: VoiceprintConfig, sample_rate: int) -> None:
        super().__init__()
        self.cfg = cfg
        n = np.arange(cfg.frame_length, dtype=np.float64)
        window = 0.54 - 0.46 * np.cos(2 * math.pi * n / (cfg.frame_length - 1))
        self.register_buffer("window", torch.tensor(window, dtype=torch.float32))
        self.register_buffer("mel", torch.tensor(_mel_banks(cfg, sample_rate), dtype=torch.float32))

    def forward(self, waveforms: torch.Tensor) -> torch.Tensor:
        """[N, samples] -> [N, mel_bins, frames], mean-normalised over each window's frames."""
        x = waveforms * 32768.0  # WeSpeaker feeds int16-scaled audio to Kaldi fbank
        frames = x.unfold(-1, self.cfg.frame_length, self.cfg.frame_shift)
        frames = frames - frames.mean(dim=-1, keepdim=True)
        previous = torch.cat([frames[..., :1], frames[..., :-1]], dim=-1)
        frames = (frames - 0.97 * previous) * self.window
        spectrum = torch.fft.rfft(frames, n=self.cfg.fft_size, dim=-1)
        power = spectrum.real.square() + spectrum.imag.square()
        energies = torch.matmul(power, self.mel.T)
        logmel = torch.log(torch.clamp(energies, min=torch.finfo(torch.float32).eps))
        logmel = logmel - logmel.mean(dim=1, keepdim=True)
        return logmel.transpose(1, 2)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetTrunk(nn.Module):
    """[N, mel_bins, frames] -> [N, channels x bins', frames'] frame-level features."""

    def __init__(self, cfg: VoiceprintConfig) -> None:
        super().__init__()
        c = cfg.base_channels
        self.conv1 = nn.Conv2d(1, c, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        stages, cin = [], c
        for i, count in enumerate(cfg.blocks):
            cout = c * 2**i
            layers = [BasicBlock(cin, cout, 1 if i == 0 else 2)]
            layers += [BasicBlock(cout, cout, 1) for _ in range(count - 1)]
            stages.append(nn.Sequential(*layers))
            cin = cout
        self.stages = nn.Sequential(*stages)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(feats.unsqueeze(1))))
        x = self.stages(x)
        return x.flatten(1, 2)


class WeightedStatsPooling(nn.Module):
    """Weighted mean and (unbiased, as pyannote) standard deviation over frames."""

    def forward(self, frames: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """frames [R, D, T], weights [R, T] -> [R, 2 D]."""
        w = weights.unsqueeze(1)
        v1 = weights.sum(dim=1, keepdim=True) + 1e-8
        mean = (frames * w).sum(dim=2) / v1
        dx2 = (frames - mean.unsqueeze(2)).square()
        v2 = weights.square().sum(dim=1, keepdim=True)
        var = (dx2 * w).sum(dim=2) / (v1 - v2 / v1 + 1e-8)
        std = torch.sqrt(torch.clamp(var, min=1e-10))
        return torch.cat([mean, std], dim=1)


class VoiceprintNet(nn.Module):
    def __init__(self, cfg: VoiceprintConfig, sample_rate: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.fbank = Fbank(cfg, sample_rate)
        self.trunk = ResNetTrunk(cfg)
        features = cfg.base_channels * 2 ** (len(cfg.blocks) - 1) * cfg.trunk_bins()
        self.pooling = WeightedStatsPooling()
        self.embedding = nn.Linear(2 * features, cfg.embedding_dim)

    def forward(self, waveforms: torch.Tensor, weights: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """waveforms [N, samples], weights [R, F_seg], idx [R] -> [R, embedding_dim]."""
        frames = self.trunk(self.fbank(waveforms))  # [N, D, T]
        if weights.shape[0] == 0:
            return frames.new_zeros((0, self.cfg.embedding_dim))
        # nearest interpolation from segmentation frames to trunk frames
        w = F.interpolate(weights.unsqueeze(1), size=frames.shape[-1], mode="nearest").squeeze(1)
        # Pool in chunks of rows (bounds the gather), then one Linear over all rows.
        stats = [
            self.pooling(frames.index_select(0, idx[i : i + _POOL_ROWS_PER_CHUNK]), w[i : i + _POOL_ROWS_PER_CHUNK])
            for i in range(0, idx.shape[0], _POOL_ROWS_PER_CHUNK)
        ]
        return self.embedding(torch.cat(stats, dim=0))


def _mel_banks(cfg: VoiceprintConfig, sample_rate: int, low_hz: float = 20.0) -> np.ndarray:
    """[mel_bins, fft_size // 2 + 1] triangular filters on Kaldi's mel scale (1127 ln(1 + f/700))."""

    def mel(f):
        return 1127.0 * np.log(1.0 + np.asarray(f, dtype=np.float64) / 700.0)

    bins = cfg.fft_size // 2
    fft_mel = mel(np.arange(bins) * sample_rate / cfg.fft_size)
    edges = np.linspace(mel(low_hz), mel(sample_rate / 2), cfg.mel_bins + 2)
    left, center, right = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    up = (fft_mel[None, :] - left) / (center - left)
    down = (right - fft_mel[None, :]) / (right - center)
    banks = np.maximum(0.0, np.minimum(up, down))
    return np.pad(banks, ((0, 0), (0, 1)))  # Kaldi leaves the Nyquist bin out
